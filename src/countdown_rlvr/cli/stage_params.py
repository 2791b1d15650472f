"""The params each stage reads, after overrides are resolved, and the check of all of them.

An arm's section (countdown_rlvr.core.arms) lists only what differs from the section it inherits (say
`reward: shaped` over `rloo:`), so what a stage reads is its own section plus the inherited
keys it does not override. dvc.yaml lists exactly those keys for every stage
(tests/test_stage_params.py checks both ways), so a `-S` change re-runs exactly the stages
whose resolved config changes: `-S rloo.reward=shaped` re-runs the `rloo` arm and the stages
that inherit `rloo.reward` (the arms that do not set it, int), not an arm that sets its own.

`check_params` (the first stage, stages/check_params.py) builds every stage's config from
`READS`, so a bad value stops `dvc repro` before DVC removes any stage's outputs, with every
problem of the params listed at once (`check_all`).

Not listed: `replicates.*`. A replicated stage only checks that its seed is in its chain's
list; adding a seed must train the new replicate only, not re-run every existing one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from ..core import arms as A
from ..core import config as C
from ..core.analysis_config import Compare, Report
from ..core.data_config import Dedup, Pairs, Problems, TeacherTraces, Traces
from ..core.errors import StageError
from ..core.evaluate_config import Evaluate
from ..core.inputs import count_keys
from ..core.int_config import Interventions
from ..core.ipo_config import IPO
from ..core.pretrain_config import Base
from ..core.research_config import Diagnose, Distill, Repair
from ..core.rl_config import OPD, RL, RLRun
from ..core.sections import bad_values
from ..core.teacher_config import Teacher
from ..core.train_config import SFTStage

MODEL_RUN = ("model.dtype", "model.threads")  # every stage that loads a model
STYLE = ("model.prompt_style",)  # every stage that builds prompts
# a training stage's skill check (ipo, distill): pass@1 sampled as `evaluate` samples
SKILL = ("sampler", "evaluate.batch_size")
# params.yaml's one top-level value that is no section: the command dvc.yaml puts before a
# training script (`python`, `accelerate launch ...`); it reaches the shell, so plain words only
LAUNCHER = "launcher"
_WORDS = re.compile(r"[\w./=:,+-]+( [\w./=:,+-]+)*")


def rows(*files: str) -> list[str]:
    """The params that fix the row counts of the data files a stage reads (`train`: the train
    problems, `traces/solver`: the solver traces): it checks the files against them
    (core.inputs.read_rows), so it lists them."""
    return count_keys(*(f"data/{f if '/' in f else 'problems/' + f}.jsonl" for f in files))


@dataclass(frozen=True)
class Section:
    """A params section a stage builds into its config dataclass."""
    path: str  # dotted: "rloo", "int.rloo"
    cls: type  # the config dataclass (core.config and the section modules beside it)
    inherit: str | None = None  # the section whose keys `path` overrides
    skip: tuple[str, ...] = ()  # keys the stage does not read (lists naming other stages)
    optional: bool = False  # a nested block that may be null: a phase that is off (teacher.rl)


# dvc.yaml stage -> its matrix item's key (None: no matrix) and what it reads, per item value.
# A plain string is one key (or a whole section) read as is.
EVAL_LISTS = ("evaluate.shared", "evaluate.policies", "evaluate.controls",
              "evaluate.first_replicate_only")
# compare and report read every chain's seeds (which replicates each policy has); built, so
# that the params check runs the chain lists' relations (config.Replicates)
REPLICATES = Section("replicates", C.Replicates)
READS: dict[str, Any] = {
    "problems": lambda: [Section("problems", Problems)],
    "base": lambda: [*MODEL_RUN, "model.base", "model.tiny_preset", "model.seed",
                     Section("base", Base)],
    "traces": lambda: [Section("traces", Traces), *STYLE, *rows("train")],
    # base: `teacher.init: pretrain` pre-trains the teacher preset by the base section's recipe.
    # Listed whatever the init: dvc.yaml is made from params.yaml, so one made under another
    # init must still re-run the teacher when `-S teacher.init=pretrain` changes the base keys
    # teacher.rl: the RL phase's own complete keys; it reads no `rloo` key (a training
    # section's key never reaches a shared upstream stage: tests/test_cost.py)
    "teacher": lambda: [*MODEL_RUN, Section("teacher", Teacher), Section("base", Base),
                        Section("teacher.rl", RLRun, optional=True), *STYLE,
                        *rows("train", "traces/solver")],
    "teacher_traces": lambda: [*MODEL_RUN, Section("teacher_traces", TeacherTraces), *STYLE,
                               *rows("train")],
    "dedup": lambda: [Section("dedup", Dedup), *rows("traces/solver")],
    "pairs": lambda: [*MODEL_RUN, Section("pairs", Pairs), *STYLE,
                      *rows("train", "traces/solver")],
    "sft": lambda: [*MODEL_RUN, Section("sft", SFTStage)],
    # pairs.n_problems: the skill check's problems are the train problems after the pairs'
    "ipo": lambda: [*MODEL_RUN, Section("ipo", IPO, skip=("sources", "first_replicate_sources")),
                    "pairs.n_problems", *SKILL, *STYLE, *rows("train")],
    "rloo": lambda arm: [*MODEL_RUN, Section(arm, RL, A.arm(arm).inherits), *STYLE,
                         *rows("train")],
    "opd": lambda arm: [*MODEL_RUN, Section(arm, OPD, A.arm(arm).inherits), *STYLE,
                        *rows("train")],
    "diagnose": lambda: [Section("diagnose", Diagnose), "evaluate.n", "evaluate.ks",
                         "evaluate.seeds"],
    "repair": lambda: [*MODEL_RUN, Section("repair", Repair), "sampler", *STYLE, *rows("train")],
    "distill": lambda: [*MODEL_RUN, Section("distill", Distill,
                                            skip=("conditions", "first_replicate_conditions")),
                        *SKILL, *STYLE],
    # int starts from the SFT policy, whatever `rloo.init` says: it reads no init
    "int": lambda: [*MODEL_RUN, Section("int", Interventions),
                    Section("int.rloo", RL, "rloo", skip=("init",)), "sampler",
                    "traces.styles", *STYLE, *rows("unseen")],
    "evaluate": lambda: [*MODEL_RUN, Section("evaluate", Evaluate, skip=(
        "shared", "policies", "controls", "first_replicate_only", "int_policies",
        "dev_policies")),
                         "sampler", *STYLE, *rows("test", "ood", "dev")],
    "compare": lambda: [Section("compare", Compare), *EVAL_LISTS, REPLICATES],
    "report": lambda: [Section("report", Report), REPLICATES, *EVAL_LISTS, "ipo.sources",
                       "ipo.first_replicate_sources", "distill.conditions",
                       "distill.first_replicate_conditions"],
}
# dvc.yaml stages that run another stage's script with the same reads: an arm's stage of
# its own (countdown_rlvr.core.arms), then the `_first` stages; every evaluation stage
# (`evaluate_<stage>`, `evaluate_shared`: EVALUATION) reads as `evaluate`
SAME_AS = {**{a.stage: a.script for a in A.ARMS if a.stage != a.script},
           "ipo_first": "ipo", "distill_first": "distill"}
EVALUATION = "evaluate_"  # the prefix of the evaluation stages (cli.experiment.evaluation)
# dvc.yaml stage -> the arms it trains (countdown_rlvr.core.arms), in ARMS order
ARMS: dict[str, tuple[str, ...]] = {}
for _a in A.ARMS:
    ARMS[_a.stage] = (*ARMS.get(_a.stage, ()), _a.name)
del _a


def script_of(stage: str) -> str:
    """The READS entry of a dvc.yaml stage."""
    return "evaluate" if stage.startswith(EVALUATION) else SAME_AS.get(stage, stage)


def reads(stage: str, arm: str | None = None) -> list:
    """What the dvc.yaml stage `stage` (its `arm` for a stage that trains arms) reads."""
    fn = READS[script_of(stage)]
    return fn(arm or ARMS[stage][0]) if stage in ARMS else fn()


def leaves(params: dict, key: str) -> Iterator[str]:
    """The dotted leaf keys under `key` (itself when it holds a value, not a mapping)."""
    value = C.at(params, key)
    if isinstance(value, dict):
        yield from C.leaves(value, f"{key}.")
    else:
        yield key


def _inherited(params: dict, path: str, inherit: str, skip: tuple[str, ...] = ()
               ) -> Iterator[str]:
    """Leaf keys of `inherit` that `path` does not override (nested blocks key by key), but
    those under `skip` (keys the stage does not read)."""
    for leaf in leaves(params, inherit):
        if not C.has(params, path + leaf[len(inherit):]) and \
                leaf[len(inherit) + 1:].split(".")[0] not in skip:
            yield leaf


def _off(params: dict, s: Section) -> bool:
    """Whether `s` is a nested block of overrides set to null (`teacher.rl: null`: a phase
    that is off): the stage then reads none of the inherited keys, and builds no config."""
    return bool(s.inherit or s.optional) and "." in s.path and C.at(params, s.path) is None


def resolved_keys(params: dict, stage: str, arm: str | None = None) -> set[str]:
    """Every leaf key the stage's resolved config comes from: what dvc.yaml must list."""
    out: set[str] = set()
    for r in reads(stage, arm):
        if isinstance(r, str):
            out |= set(leaves(params, r))
            continue
        out |= {k for k in leaves(params, r.path)
                if k == r.path or k.split(".")[r.path.count(".") + 1] not in r.skip}
        if r.inherit and not _off(params, r):
            out |= set(_inherited(params, r.path, r.inherit, r.skip))
    return out


def stage_instances(params: dict) -> Iterator[tuple[str, str | None]]:
    """(dvc.yaml stage, arm) for every stage `check_params` builds a config for."""
    for stage in [*READS, *SAME_AS]:
        for arm in ARMS.get(stage, (None,)):
            yield stage, arm


def check_all(params: dict) -> int:
    """Build every stage's config and check the relations across sections; the number of
    configs built. Raises one StageError listing every problem, each naming the key and the
    fix: values no rule allows, unknown or missing keys, relations within a section
    (`__post_init__`) and across sections. So one `dvc repro` shows all there is to fix."""
    # each arm's section checked as its script's: only this check reads the arm registry
    bad = bad_values({k: v for k, v in params.items() if k != LAUNCHER},
                     {a.name: a.inherits for a in A.ARMS if a.inherits})
    found: dict[Section, list[str]] = {}  # each section's problems, built once for all stages
    built = 0
    for stage, arm in stage_instances(params):
        for r in reads(stage, arm):
            if isinstance(r, Section) and not _off(params, r):
                _section_problems(params, Section(r.path, r.cls, r.inherit, optional=r.optional),
                                  bad, found)
                built += 1
    problems = [*launcher_problems(params), *bad.values(),
                *(p for ps in found.values() for p in ps)]
    broken = {_top(k) for k in bad} | {_top(s.path) for s, ps in found.items() if ps}
    problems = list(dict.fromkeys([*problems, *cross_section_problems(params, broken)]))
    if problems:
        n = f"{len(problems)} problems" if len(problems) > 1 else "1 problem"
        raise StageError("check_params", f"params.yaml has {n}; fix each (in params.yaml or "
                         "the `-S` override) and run again:\n  " + "\n  ".join(problems))
    return built


def launcher_problems(params: dict) -> list[str]:
    """The `launcher` value's problem, if any: words of letters, digits and `-_./=:,+`."""
    value = params.get(LAUNCHER)
    if isinstance(value, str) and _WORDS.fullmatch(value):
        return []
    return [(f"`{LAUNCHER}` ({value!r}) must be the command that runs a training script, as "
             "plain words: `python`, or e.g. `accelerate launch --num_processes 2`")]


def _section_problems(params: dict, s: Section, bad: dict[str, str],
                      found: dict[Section, list[str]]) -> list[str]:
    """The problems building `s` finds that `bad` (the values' rules) does not list."""
    if s in found:
        return found[s]
    found[s] = []
    base = Section(s.inherit, s.cls) if s.inherit else None
    if base is not None and _section_problems(params, base, bad, found):
        # an arm merged over a broken section would repeat its problems under the arm's
        # name; the arm is checked once its base builds
        return found[s]
    # a refused value is already listed, and the section's relations could trip on it
    tainted = any(_under(key, p) for key in bad for p in (s.path, s.inherit) if p)
    # the base's keys, as the merged block has them under the arm's path
    reported = {*bad, *(s.path + k[len(s.inherit):] for k in bad
                        if s.inherit and _under(k, s.inherit))}
    found[s] = C.build_section(s.cls, params, s.path, s.inherit, construct=not tainted,
                               reported=reported)[1]
    return found[s]


def _under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + ".")


def _top(key: str) -> str:
    return key.split(".")[0]


def cross_section_problems(params: dict, broken: AbstractSet[str] = frozenset()) -> list[str]:
    """Relations between sections that no single section can check. A relation that reads a
    section in `broken` (one with a problem of its own) waits until that one is fixed: it
    would only repeat the problem, or trip on the bad value."""
    def ok(*sections: str) -> bool:
        return broken.isdisjoint(sections)

    out = []
    if ok("evaluate"):
        out += _evaluate_relations(params, ok)
    if ok("evaluate", "ipo", "distill"):
        out += _sampling_relations(params)
    if ok("evaluate", "replicates"):
        out += _arm_relations(params)
    if ok("ipo"):
        out += _ipo_relations(params)
    if ok("repair", "distill"):
        out += _distill_relations(params)
    if ok("problems", "int"):
        out += _int_relations(params)
    if ok("problems"):
        out += _pool_relations(params, ok)
    out += _init_relations(params, ok)
    return out


def _arm_relations(params: dict) -> list[str]:
    """An arm is trained only when an evaluate list names it (analysis.chains.trained_arms):
    the arm it starts from must be trained too, and so must RLOO while the int stage runs (it
    starts from RLOO's policy of its seed and compares with it)."""
    from ..analysis.chains import trained_arms  # torch-free

    trained, out = set(trained_arms(params)), []
    names = {a.name for a in A.ARMS}
    for a in A.ARMS:
        if a.name in trained and a.init in names and a.init not in trained:
            out.append(f"arm {a.name} starts from the {a.init} policy (core.arms), which no "
                       f"evaluate list names, so no stage trains it; add {a.init} to "
                       f"`evaluate.policies`, or leave {a.name} out of the evaluate lists too")
    if C.at(params, "replicates.int") and "rloo" not in trained:
        out.append("the int stage starts from the rloo policy of its seed, which no evaluate "
                   "list names, so no stage trains it; add rloo to `evaluate.policies`")
    return out


def _init_relations(params: dict, ok: Callable[..., bool]) -> list[str]:
    """What an RL arm's `init` (the policy it starts from) asks of the rest: the policy its
    dvc.yaml stage starts it from (core.arms: Arm.init, the stage's input), a policy some
    stage saves (`sft_early`: sft.early_step set), trained on the arm's seeds."""
    from ..analysis.chains import trained_arms  # torch-free
    from ..core.rl_config import INITS

    out = []
    for a in A.ARMS:
        if not ok(a.name, a.script) or ok("evaluate") and a.name not in trained_arms(params):
            continue  # an arm left out of the evaluate lists is not trained
        key = f"{a.name}.init" if C.has(params, f"{a.name}.init") else f"{a.script}.init"
        init = C.at(params, key)
        if init != a.init:
            out.append(f"`{key}` is {init!r} for arm {a.name}, whose dvc.yaml stage "
                       f"({a.stage}) starts it from {a.init} (core.arms.ARMS); set it to "
                       f"{a.init}, or change the arm's `init` there and run `python -m "
                       "countdown_rlvr.cli.experiment --write`")
            continue
        if init == "sft_early" and ok("sft") and C.at(params, "sft.early_step") is None:
            out.append(f"`{key}` is sft_early for arm {a.name}, but `sft.early_step` is null "
                       "(no early checkpoint is saved); set sft.early_step, or start the arm "
                       "from another policy")
        if not ok("replicates"):
            continue
        chain, source = a.script, INITS.get(init, "sft")
        if source == "sft" and C.at(params, "replicates.shared_sft") is not None:
            continue  # every replicate starts from the one shared SFT
        seeds = C.at(params, f"replicates.{C.seeds_key(chain)}") or []
        seeds = seeds[:1] if a.replicates == "first" else seeds
        have = C.at(params, f"replicates.{C.seeds_key(source)}") or []
        if missing := [s for s in seeds if s not in have]:
            out.append(f"`{key}` is {init}, trained on replicates.{C.seeds_key(source)} "
                       f"{have}, which lacks seed(s) {missing} of arm {a.name} "
                       f"(replicates.{C.seeds_key(chain)}); add them to "
                       f"replicates.{C.seeds_key(source)} or drop them")
    return out


def _int_relations(params: dict) -> list[str]:
    """The int stage samples int.n_problems of the unseen pool, the first ones (int.pool
    shared) or its replicate's own slice (own: one slice per seed of replicates.int): a pool
    too small would silently sample fewer problems than the params say."""
    n, pool = C.at(params, "int.n_problems"), C.at(params, "problems.n_unseen")
    if not (isinstance(n, int) and isinstance(pool, int)):
        return []
    if C.at(params, "int.pool") == "own":
        seeds = C.at(params, "replicates.int") or []
        if isinstance(seeds, list) and n * len(seeds) > pool:
            return [(f"int.pool is own: {len(seeds)} replicates of replicates.int x "
                     f"`int.n_problems` ({n}) = {n * len(seeds)} problems exceed "
                     f"`problems.n_unseen` ({pool}); raise problems.n_unseen to "
                     f"{n * len(seeds)}, or set int.pool: shared")]
        return []
    if n > pool:
        return [(f"`int.n_problems` ({n}) exceeds `problems.n_unseen` ({pool}), the pool the "
                 "int stage samples; raise problems.n_unseen or lower int.n_problems")]
    return []


def _rl_pools(params: dict, ok: Callable[..., bool]) -> Iterator[tuple[str, str, str, int]]:
    """(section, its base section or "", where its problems come from, how many there are at
    most) for every RL run params.yaml configures: each arm of core.arms (the first
    `n_problems` train problems), the teacher's RL phase when it runs (the same), and
    int.rloo (the unsolved ones among the first int.n_problems unseen problems: at most
    that many). Sections with a problem of their own (not `ok`) are left out."""
    n_train = C.at(params, "problems.n_train")
    if not isinstance(n_train, int):
        return
    for a in A.ARMS:
        if ok(a.name, a.script):
            yield a.name, a.inherits or "", "problems.n_train", n_train
    if ok("teacher", "rloo") and C.at(params, "teacher.base") == "tiny" \
            and isinstance(C.at(params, "teacher.rl"), dict):
        yield "teacher.rl", "rloo", "problems.n_train", n_train
    n_int = C.at(params, "int.n_problems")
    if ok("int", "rloo") and isinstance(n_int, int):
        yield "int.rloo", "rloo", "int.n_problems", n_int


def _pool_relations(params: dict, ok: Callable[..., bool]) -> list[str]:
    """An RL run draws `prompts_per_step` distinct problems a step from a pool of at most
    `n_problems` (null: all) of its source: more prompts than the pool repeat problems within
    one step (100000 passed the value rule and asked for a batch no machine holds), and an
    `n_problems` above the source silently trains on fewer problems than the params say."""
    def value(section: str, base: str, key: str) -> tuple[str, Any]:
        where = section if not base or C.has(params, f"{section}.{key}") else base
        return f"{where}.{key}", C.at(params, f"{where}.{key}")

    out = []
    for section, base, source, size in _rl_pools(params, ok):
        k_key, k = value(section, base, "prompts_per_step")
        # int trains on its unsolved problems: it reads no n_problems of int.rloo's
        n_key, n = value(section, base, "n_problems") if section != "int.rloo" else ("", None)
        if isinstance(n, int) and n > size:
            out.append(f"`{n_key}` ({n}) exceeds `{source}` ({size}), the problems it takes "
                       f"the first N of; lower {n_key} or raise {source}")
            continue
        pool, what = (n, f"`{n_key}`") if isinstance(n, int) and n < size else \
            (size, f"`{source}`")
        if isinstance(k, int) and k > pool:
            out.append(f"`{k_key}` ({k}) exceeds the {pool} problems its steps draw from "
                       f"({what}): a step would repeat problems; lower {k_key} to at most "
                       f"{pool}, or raise {what.strip('`')}")
    return out


def _evaluate_relations(params: dict, ok: Callable[..., bool]) -> list[str]:
    """What `diagnose` and `compare` ask of `evaluate`'s samples."""
    ev = C.from_section(Evaluate, "check_params", params, "evaluate")
    out = []
    k = C.at(params, "diagnose.k")
    if ok("diagnose") and (k not in ev.ks or k > ev.n):
        out.append(f"`diagnose.k` ({k}) must be one of `evaluate.ks` {ev.ks} and at most "
                   f"`evaluate.n` ({ev.n}): S0 Table 3 shows every policy at that K; change one")
    if not ok("compare"):
        return out
    if over := [k for k in C.at(params, "compare.ks") or [] if k > ev.n]:
        out.append(f"`compare.ks` has {over} > `evaluate.n` ({ev.n}): a pair is solved within k "
                   "of its n samples; remove them or raise evaluate.n")
    for pair in C.at(params, "compare.pairs") or []:
        if unknown := [x for x in pair if x not in ev.all()]:
            out.append(f"`compare.pairs` names {unknown}, not in `evaluate` {ev.all()}; add "
                       "them there or fix the pair")
    return out


# how a policy of a chain gets an evaluate stage (sft and the arms always have one)
SAMPLE_IT = {"sft": "set `sft.early_step` (the sft stage then saves and samples sft_early)",
             "ipo": "add its source to `ipo.sources` (every seed) or "
                    "`ipo.first_replicate_sources` (the first)",
             "repair": "add its condition to `distill.conditions` (every seed) or "
                       "`distill.first_replicate_conditions` (the first)",
             "int": "add it to `evaluate.int_policies`"}


def _sampling_relations(params: dict) -> list[str]:
    """The evaluate lists name policies that an evaluate stage samples, on the seeds compare
    reads (every seed of its chain, or the first): else compare would stop for want of
    records, after every evaluation ran."""
    from ..analysis.chains import INT_POLICIES, chain_of, sampled  # torch-free

    ev = C.from_section(Evaluate, "check_params", params, "evaluate")
    out, every = [], sampled(params)
    for key, names, all_seeds in (("policies", ev.policies, True),
                                  ("controls", ev.controls, True),
                                  ("first_replicate_only", ev.first_replicate_only, False)):
        for p in names:
            chain = chain_of(p)
            if chain is None:
                out.append(f"`evaluate.{key}` names {p!r}, which no stage trains per seed (a "
                           "policy trained once goes in `evaluate.shared`); fix or remove it")
            elif p not in every:
                out.append(f"`evaluate.{key}` names {p!r}, which no evaluate stage samples with "
                           f"these params; {SAMPLE_IT[chain]}, or remove it")
            elif all_seeds and not every[p]:
                out.append(f"`evaluate.{key}` names {p!r}, which is trained and sampled on the "
                           f"first seed of replicates.{C.seeds_key(chain)} only; move it to "
                           "`evaluate.first_replicate_only`")
    if other := [p for p in ev.int_policies if p not in INT_POLICIES]:
        out.append(f"`evaluate.int_policies` has {other}, which the int stage does not train "
                   f"(it trains {list(INT_POLICIES)}); remove them")
    if unread := [p for p in ev.int_policies if p in INT_POLICIES
                  and p not in (*ev.policies, *ev.controls, *ev.first_replicate_only)]:
        out.append(f"`evaluate.int_policies` samples {unread}, which no evaluate list reports; "
                   "add them to `evaluate.policies` or `evaluate.controls`, or remove them")
    return out


def _ipo_relations(params: dict) -> list[str]:
    from ..data.pairs import SOURCES  # pure Python: no model code
    ipo = [*(C.at(params, "ipo.sources") or []),
           *(C.at(params, "ipo.first_replicate_sources") or [])]
    if unknown := [s for s in ipo if s not in SOURCES]:
        return [(f"unknown pair source(s) {unknown} in `ipo.sources` / "
                 f"`ipo.first_replicate_sources`; valid: {', '.join(SOURCES)}; remove or "
                 "rename them in params.yaml")]
    return []


def _distill_relations(params: dict) -> list[str]:
    repair = C.at(params, "repair.conditions") or []
    distill = [*(C.at(params, "distill.conditions") or []),
               *(C.at(params, "distill.first_replicate_conditions") or [])]
    if missing := [c for c in distill if c not in repair]:
        return [(f"`distill` trains on the repairs of {missing}, which `repair.conditions` "
                 f"{repair} does not make; add them there")]
    return []
