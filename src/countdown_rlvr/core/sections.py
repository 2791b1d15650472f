"""Every params.yaml section and its dataclass, and the check of a whole params file.

Only the params check (cli.stage_params, the pipeline's first stage) and the tests import
this: it imports every section's rules, and a stage that did would re-run whenever any
section's rules changed (a stage checks the sections it builds: core.config).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .analysis_config import Compare, Report
from .config import EvalSampler, Model, Replicates, check_block, did_you_mean
from .data_config import Dedup, Pairs, Problems, TeacherTraces, Traces
from .evaluate_config import Evaluate
from .int_config import Interventions
from .ipo_config import IPO
from .pretrain_config import Base
from .research_config import Diagnose, Distill, Repair
from .rl_config import OPD, RL
from .teacher_config import Teacher
from .train_config import SFTStage

# every params.yaml section but the arms' (core.arms: each overrides its script's section, and
# only the params check reads that registry) -> its dataclass; `bad_values` walks params by it
SECTIONS: dict[str, type] = {
    "replicates": Replicates, "problems": Problems, "traces": Traces, "sampler": EvalSampler,
    "evaluate": Evaluate, "compare": Compare, "dedup": Dedup, "model": Model, "base": Base,
    "teacher": Teacher, "teacher_traces": TeacherTraces, "pairs": Pairs, "sft": SFTStage, "ipo": IPO, "rloo": RL, "opd": OPD, "diagnose": Diagnose,
    "repair": Repair, "distill": Distill, "int": Interventions, "report": Report,
}


def problems_in(params: dict[str, Any], arms: Mapping[str, str] | None = None) -> list[str]:
    """Every problem in `params`, as "`path`: value is bad; allowed: ..." lines."""
    return list(bad_values(params, arms).values())


def bad_values(params: dict[str, Any], arms: Mapping[str, str] | None = None) -> dict[str, str]:
    """{dotted key: its problem} for every value its field's rule refuses and every key or
    section no class has.

    `arms`: {an arm's section: the section it overrides}, from the arm registry
    (core.arms.ARMS); an arm's section holds only the keys that differ, each checked against
    the class of the section it overrides. Only the params check (cli.stage_params) passes
    it: a training stage must not read the registry (adding an arm would re-run every stage),
    so without it a section no class has is left to that check, and a stage checks its own
    arm's keys when it builds them (`config.build_section`)."""
    known = {**SECTIONS, **{a: SECTIONS[s] for a, s in (arms or {}).items() if a not in SECTIONS}}
    out: dict[str, str] = {}
    for section, block in params.items():
        if section not in known:
            if arms is not None:
                fix = f"{mean}if not, add" if (mean := did_you_mean(section, known)) else \
                    "check the spelling, or add"
                out[section] = (f"`{section}` is not a params section this pipeline reads; "
                                f"{fix} the arm it configures to core.arms.ARMS "
                                f"(known: {', '.join(known)})")
        elif isinstance(block, dict):  # else no section: `build_section` reports it missing
            check_block(known[section], block, section, out)
    return out
