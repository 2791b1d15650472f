"""The params each stage reads, after overrides are resolved, and the check of all of them.

An arm's section lists only what differs from the section it inherits (`rloo_shaped:` holds
`reward: shaped` over `rloo:`), so what a stage reads is its own section plus the inherited
keys it does not override. dvc.yaml lists exactly those keys for every stage
(tests/test_stage_params.py checks both ways), so a `-S` change re-runs exactly the stages
whose resolved config changes: `-S rloo.reward=shaped` re-runs the `rloo` arm and the stages
that inherit `rloo.reward` (rloo_nocurr, int), not rloo_shaped, which sets its own reward.

`check_params` (the first stage, stages/check_params.py) builds every stage's config from
`READS`, so a bad value stops `dvc repro` before DVC removes any stage's outputs.

Not listed: `replicates.seeds`. A replicated stage only checks that its seed is in the list;
adding a seed must train the new replicate only, not re-run every existing one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import config as C
from .errors import StageError

MODEL_RUN = ("model.dtype", "model.threads")  # every stage that loads a model
STYLE = ("model.prompt_style",)  # every stage that builds prompts


@dataclass(frozen=True)
class Section:
    """A params section a stage builds into its config dataclass."""
    path: str  # dotted: "rloo_shaped", "int.rloo"
    cls: type  # the config dataclass (config.py)
    inherit: str | None = None  # the section whose keys `path` overrides
    skip: tuple[str, ...] = ()  # keys the stage does not read (lists naming other stages)


# dvc.yaml stage -> its matrix item's key (None: no matrix) and what it reads, per item value.
# A plain string is one key (or a whole section) read as is.
EVAL_LISTS = ("evaluate.shared", "evaluate.policies", "evaluate.controls",
              "evaluate.first_replicate_only")
READS: dict[str, Any] = {
    "problems": lambda: [Section("problems", C.Problems)],
    "base": lambda: [*MODEL_RUN, "model.base", "model.tiny_preset", "model.seed",
                     Section("base", C.Base)],
    "traces": lambda: [Section("traces", C.Traces), *STYLE],
    "teacher": lambda: [*MODEL_RUN, Section("teacher", C.Teacher)],
    "teacher_traces": lambda: [*MODEL_RUN, Section("teacher_traces", C.TeacherTraces), *STYLE],
    "dedup": lambda: [Section("dedup", C.Dedup)],
    "pairs": lambda: [*MODEL_RUN, Section("pairs", C.Pairs), *STYLE],
    "sft": lambda: [*MODEL_RUN, Section("sft", C.SFT)],
    "ipo": lambda: [*MODEL_RUN, Section("ipo", C.IPO, skip=("sources", "first_replicate_sources"))],
    "rloo": lambda arm: [*MODEL_RUN, Section(arm, C.RL, None if arm == "rloo" else "rloo"), *STYLE],
    "opd": lambda arm: [*MODEL_RUN, Section(arm, C.OPD, None if arm == "opd" else "opd"), *STYLE],
    "diagnose": lambda: [Section("diagnose", C.Diagnose), "evaluate.n", "evaluate.ks",
                         "evaluate.seeds"],
    "repair": lambda: [*MODEL_RUN, Section("repair", C.Repair), "sampler", *STYLE],
    "distill": lambda: [*MODEL_RUN, Section("distill", C.Distill,
                                            skip=("conditions", "first_replicate_conditions")),
                        *STYLE],
    "int": lambda: [*MODEL_RUN, Section("int", C.Interventions),
                    Section("int.rloo", C.RL, "rloo"), "sampler", "traces.styles", *STYLE],
    "evaluate": lambda: [*MODEL_RUN, Section("evaluate", C.Evaluate, skip=(
        "shared", "policies", "controls", "first_replicate_only")),
                         "sampler", *STYLE],
    "compare": lambda: [Section("compare", C.Compare), *EVAL_LISTS, "replicates"],
    "report": lambda: [Section("report", C.Report), "replicates", *EVAL_LISTS, "ipo.sources",
                       "ipo.first_replicate_sources", "distill.conditions",
                       "distill.first_replicate_conditions"],
}
# dvc.yaml stages that run another stage's script with the same reads
SAME_AS = {"rloo_nocurr": "rloo", "ipo_first": "ipo", "distill_first": "distill",
           "evaluate_shared": "evaluate", "evaluate_first": "evaluate",
           "evaluate_control": "evaluate"}
ARMS = {"rloo": ("rloo", "rloo_shaped"), "rloo_nocurr": ("rloo_nocurr",), "opd": ("opd", "opd_ac")}


def reads(stage: str, arm: str | None = None) -> list:
    """What the dvc.yaml stage `stage` (its `arm` for rloo / rloo_nocurr / opd) reads."""
    fn = READS[SAME_AS.get(stage, stage)]
    return fn(arm or ARMS[stage][0]) if stage in ARMS else fn()


def _at(params: dict, path: str) -> Any:
    block: Any = params
    for part in path.split("."):
        block = block.get(part) if isinstance(block, dict) else None
    return block


def leaves(params: dict, key: str) -> Iterator[str]:
    """The dotted leaf keys under `key` (itself when it holds a value, not a mapping)."""
    value = _at(params, key)
    if isinstance(value, dict):
        for k in value:
            yield from leaves(params, f"{key}.{k}")
    else:
        yield key


def _has(params: dict, path: str) -> bool:
    """Whether the dotted key is present (a null value counts: it overrides)."""
    *parents, last = path.split(".")
    block = _at(params, ".".join(parents)) if parents else params
    return isinstance(block, dict) and last in block


def _inherited(params: dict, path: str, inherit: str) -> Iterator[str]:
    """Leaf keys of `inherit` that `path` does not override (nested blocks key by key)."""
    for leaf in leaves(params, inherit):
        if not _has(params, path + leaf[len(inherit):]):
            yield leaf


def resolved_keys(params: dict, stage: str, arm: str | None = None) -> set[str]:
    """Every leaf key the stage's resolved config comes from: what dvc.yaml must list."""
    out: set[str] = set()
    for r in reads(stage, arm):
        if isinstance(r, str):
            out |= set(leaves(params, r))
            continue
        out |= {k for k in leaves(params, r.path)
                if k.split(".")[r.path.count(".") + 1] not in r.skip}
        if r.inherit:
            out |= set(_inherited(params, r.path, r.inherit))
    return out


def stage_instances(params: dict) -> Iterator[tuple[str, str | None]]:
    """(dvc.yaml stage, arm) for every stage `check_params` builds a config for."""
    for stage in [*READS, *SAME_AS]:
        for arm in ARMS.get(stage, (None,)):
            yield stage, arm


def check_all(params: dict) -> int:
    """Build every stage's config and check the relations across sections; the number of
    configs built. Raises StageError naming the key and the fix at the first problem (the
    values one by one were checked by `io.load_params`)."""
    built = 0
    for stage, arm in stage_instances(params):
        for r in reads(stage, arm):
            if isinstance(r, Section):
                C.from_section(r.cls, stage, params, r.path, inherit=r.inherit)
                built += 1
    if problems := cross_section_problems(params):
        raise StageError("check_params", "\n  ".join(problems))
    return built


def cross_section_problems(params: dict) -> list[str]:
    """Relations between sections that no single section can check."""
    ev = C.from_section(C.Evaluate, "check_params", params, "evaluate")
    out = []
    k = _at(params, "diagnose.k")
    if k not in ev.ks or k > ev.n:
        out.append(f"`diagnose.k` ({k}) must be one of `evaluate.ks` {ev.ks} and at most "
                   f"`evaluate.n` ({ev.n}): S0 Table 3 shows every policy at that K; change one")
    if over := [k for k in _at(params, "compare.ks") or [] if k > ev.n]:
        out.append(f"`compare.ks` has {over} > `evaluate.n` ({ev.n}): a pair is solved within k "
                   "of its n samples; remove them or raise evaluate.n")
    for pair in _at(params, "compare.pairs") or []:
        if unknown := [x for x in pair if x not in ev.all()]:
            out.append(f"`compare.pairs` names {unknown}, not in `evaluate` {ev.all()}; add "
                       "them there or fix the pair")
    from .pairs import SOURCES  # pure Python: no model code
    ipo = [*(_at(params, "ipo.sources") or []), *(_at(params, "ipo.first_replicate_sources") or [])]
    if unknown := [s for s in ipo if s not in SOURCES]:
        out.append(f"unknown pair source(s) {unknown} in `ipo.sources` / "
                   f"`ipo.first_replicate_sources`; valid: {', '.join(SOURCES)}; remove or "
                   "rename them in params.yaml")
    repair = _at(params, "repair.conditions") or []
    distill = [*(_at(params, "distill.conditions") or []),
               *(_at(params, "distill.first_replicate_conditions") or [])]
    if missing := [c for c in distill if c not in repair]:
        out.append(f"`distill` trains on the repairs of {missing}, which `repair.conditions` "
                   f"{repair} does not make; add them there")
    return out
