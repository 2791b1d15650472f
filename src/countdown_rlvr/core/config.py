"""What every params.yaml value may be, checked when a stage reads params (`io.load_params`).

So a bad value stops a stage before it loads a model or samples anything, with one message
that names the key, the bad value and what is allowed; not after minutes of compute, and
not as a raw TypeError. A rule applies to every key of that name, in any section and at
any depth (so `rloo.sampler.temperature` and `int.rloo.lr` are checked too); `SECTION_RULES`
holds the few names whose meaning depends on the section. A key no rule knows is refused:
it is a typo, or a param this code does not read.

Every params.yaml section is a frozen dataclass below (one field per key, one comment per
field), built by `from_section`, which also checks the relations between values of a section
(`__post_init__`, e.g. `int.eval_seed` != `int.seed`); stages check only relations across
sections and files. params.yaml is the only place values live: no field has a default.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from .errors import StageError

# operands per problem: task.solve.MAX_NUMBERS, the exhaustive solver's limit (a copy, so
# that reading params imports no task code; tests/test_config.py checks they agree)
MAX_NUMBERS = 6
NAME = re.compile(r"[A-Za-z0-9_-]+")  # policy / source / condition names: they become
# shell arguments and path parts (`python stages/evaluate.py <name>`, reports/.../<name>.json)

Rule = Callable[[Any], str | None]  # None when the value is allowed, else what is allowed


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def integer(lo: int = 0, hi: int | None = None) -> Rule:
    top = "" if hi is None else f" and <= {hi}"
    return lambda v: None if _int(v) and v >= lo and (hi is None or v <= hi) else \
        f"an integer >= {lo}{top}"


def number(lo: float = 0.0, strict: bool = False, hi: float | None = None) -> Rule:
    what = f"a number {'>' if strict else '>='} {lo:g}" + ("" if hi is None else f" and <= {hi:g}")
    return lambda v: None if _num(v) and (v > lo if strict else v >= lo) and \
        (hi is None or v <= hi) else what


def optional(rule: Rule) -> Rule:
    return lambda v: None if v is None else (None if rule(v) is None else f"null or {rule(v)}")


def choice(*options: str) -> Rule:
    return lambda v: None if v in options else "one of " + ", ".join(options)


def flag(v: Any) -> str | None:
    return None if isinstance(v, bool) else "true or false"


def text(v: Any) -> str | None:
    return None if isinstance(v, str) and v else "a non-empty string"


def name(v: Any) -> str | None:
    return None if isinstance(v, str) and NAME.fullmatch(v) else \
        "a name of letters, digits, `_` and `-` only"


def list_of(rule: Rule, min_len: int = 1, unique: bool = False) -> Rule:
    """unique: a repeat is a mistake (a split evaluated twice, a seed trained twice, a stage
    name DVC would build twice), not a weighting as in a rotation such as `traces.styles`."""
    repeats = ", without repeats" if unique else ""

    def check(v: Any) -> str | None:
        bad = not isinstance(v, list) or len(v) < min_len or any(rule(x) for x in v) or \
            (unique and len(set(v)) != len(v))  # items passed `rule`: hashable scalars
        return f"a list (at least {min_len}) of {rule(object())}{repeats}" if bad else None
    return check


def int_range(lo: int = 0) -> Rule:
    return lambda v: None if isinstance(v, list) and len(v) == 2 and all(
        _int(x) and x >= lo for x in v) and v[0] <= v[1] else f"[low, high] integers >= {lo}"


def name_pairs(v: Any) -> str | None:
    ok = isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and not any(name(x) for x in p) for p in v)
    # [a, b] twice (or as [b, a]) is the same test twice: one of them is a typo for another pair
    ok = ok and len({frozenset(p) for p in v}) == len(v)
    return None if ok else \
        "a list of [a, b] pairs of policy names, no pair twice (in either order)"


# a copy of repair_data.FAILURE_ORDER (tests/test_config.py checks they agree)
FAILURE_TYPES = ("WRONG_TARGET", "NUMBER_REUSED", "NUMBER_UNKNOWN", "NUMBER_OMITTED",
                 "PARSE_FAIL", "FORMAT_MISSING", "DIV_BY_ZERO")


def failure_mix(v: Any) -> str | None:
    ok = isinstance(v, dict) and v and set(v) <= set(FAILURE_TYPES) and all(
        _num(x) and x >= 0 for x in v.values()) and abs(sum(v.values()) - 1) < 1e-6
    return None if ok else f"a mapping of failure types ({', '.join(FAILURE_TYPES)}) to " \
        "shares >= 0 that sum to 1"


def modules(v: Any) -> str | None:
    return None if text(v) is None or list_of(text)(v) is None else \
        "a module name pattern such as all-linear, or a list of module names"


POS, COUNT, SEED = integer(1), integer(0), integer(0)
FRACTION, RATE = number(0, hi=1), number(0, strict=True)
RULES: dict[str, Rule] = {
    # sizes and counts
    "n_train": POS, "n_test": POS, "n_ood": COUNT, "n_unseen": COUNT, "select_k": POS,
    "count_train_solutions": COUNT,
    "n_problems": optional(POS), "corpus_size": POS, "n": POS, "k": POS, "base_k": POS,
    "n_attempts": POS, "n_continuations": POS, "traces_per_problem": POS, "n_boot": POS,
    "batch_size": POS, "gen_batch_size": POS, "micro_batch": optional(POS), "max_len": POS,
    "max_new_tokens": POS, "group_size": integer(2), "prompts_per_step": POS, "steps": POS,
    "max_steps": optional(POS), "epochs": optional(RATE), "ppo_epochs": POS, "log_every": POS,
    "time_budget_s": optional(RATE), "dpi": POS, "curriculum_target_bins": POS,
    "curriculum_window": POS, "curriculum_deadline": optional(POS),
    # seeds
    "seed": SEED, "init_seed": SEED, "eval_seed": SEED, "boot_seed": SEED,
    "seeds": list_of(SEED, unique=True),
    # optimisation
    "lr": RATE, "weight_decay": number(0), "grad_clip": optional(RATE), "warmup_frac": FRACTION,
    "schedule": choice("cosine", "linear", "constant"),
    # losses and RL
    "beta": RATE, "rpo_alpha": number(0), "kl_coef": number(0), "is_clip": RATE,
    "entropy_coef": number(0), "distill_coef": number(0), "rl_coef": number(0),
    "distill_temperature": RATE, "curriculum": flag, "curriculum_threshold": FRACTION,
    "zero_std_keep": number(0, True, 1),
    "replay": number(0),
    # copies of train.losses.LOSS_AGGREGATIONS, traces.STRATEGY_HINTS / STYLES and
    # model.TINY_PRESETS (tests/test_config.py checks they agree)
    "loss_agg": choice("sum", "mean"), "reward": choice("binary", "format", "shaped"),
    "rl_problems": choice("unsolved", "all"), "teacher_strategy": optional(choice("direct", "search")),
    # sampling
    "backend": choice("hf", "vllm"), "temperature": RATE, "top_p": number(0, True, 1),
    "top_k": COUNT,
    # adapters and models
    "adapter": choice("full", "lora", "dora"), "lora_r": POS, "lora_alpha": RATE,
    "lora_dropout": number(0, hi=0.99), "target_modules": modules, "base": text,
    "init": choice("base", "scratch"), "tiny_preset": choice("student", "teacher"),
    "prompt_style": choice("tiny", "chat"),
    "dtype": choice("float32", "bfloat16", "float16", "auto"), "threads": optional(POS),
    # data; n_numbers, styles and strategies are rotations: a repeat weights an item on purpose
    "n_numbers": list_of(integer(2, MAX_NUMBERS)), "ood_n_numbers": list_of(integer(2, MAX_NUMBERS)),
    "number_range": int_range(1), "target_range": int_range(0), "ood_target_range": int_range(0),
    "solutions": choice("construction", "solver"), "styles": list_of(choice("direct", "search")),
    "strategies": list_of(choice("direct", "search")), "facts_frac": FRACTION,
    "hint_frac": FRACTION, "pack": flag,
    "threshold": number(0, True, 1), "val_frac": number(0, hi=0.5), "filter": flag,
    "repair_frac": FRACTION, "repair_mix": failure_mix, "heldout_frac": number(0, hi=0.9),
    # evaluation and statistics
    "policies": list_of(name, unique=True), "shared": list_of(name, 0, unique=True),
    "first_replicate_only": list_of(name, 0, unique=True), "controls": list_of(name, 0, unique=True),
    "splits": list_of(choice("test", "ood"), unique=True), "ks": list_of(POS, unique=True),
    "budgets": list_of(POS, unique=True), "pairs": name_pairs, "exact": flag,
    "alpha": number(0, True, 0.5),
    "reference": name, "best_of_n_policy": optional(name), "require_all": flag,
    # names that become stage names, shell arguments and paths
    "sources": list_of(name, unique=True), "conditions": list_of(name, unique=True),
    "first_replicate_sources": list_of(name, 0, unique=True),
    "first_replicate_conditions": list_of(name, 0, unique=True),
    # nested blocks, checked key by key (rloo.sampler, int.rloo, pairs.base_sampler, ...)
    "sampler": None, "base_sampler": None, "rloo": None, "sft": None,
}
SECTION_RULES: dict[tuple[str, str], Rule] = {
    ("traces", "per_problem"): POS,  # traces per problem
    ("pairs", "per_problem"): POS,  # pairs per problem and source
    ("pairs", "max_per_source"): lambda v: None if v is None or v == "min" or POS(v) is None
    else "a positive integer, min (the smallest source's count) or null",
    ("dedup", "per_problem"): flag,  # compare only traces of the same problem
    ("dedup", "sources"): list_of(choice("solver", "teacher", "repair"), unique=True),
    ("int", "n_problems"): POS,  # int samples them all: null (all 32k) is not a sensible size
}
# sections whose keys are all known here: an unknown key is refused, naming the known ones
CLOSED = {"problems": ("seed", "n_train", "count_train_solutions", "n_test", "n_ood",
                       "n_unseen", "n_numbers", "number_range", "target_range", "ood_n_numbers",
                       "ood_target_range")}


def problems_in(params: dict[str, Any]) -> list[str]:
    """Every problem in `params`, as "`path`: value is bad; allowed: ..." lines."""
    return list(bad_values(params).values())


def bad_values(params: dict[str, Any]) -> dict[str, str]:
    """{dotted key: its problem} for every value no rule allows and every key no rule knows."""
    out: dict[str, str] = {}

    # not `leaves`: a mapping is one value where a rule takes it (repair_mix), a key no rule
    # knows is reported once, not per leaf under it, and `CLOSED` applies per block
    def walk(section: str, path: str, block: dict[str, Any]) -> None:
        known = CLOSED.get(path)
        for key, value in block.items():
            where = f"{path}.{key}"
            if known is not None and key not in known:
                out[where] = f"`{where}` is not a param of `{path}` (known: {', '.join(known)})"
                continue
            rule = SECTION_RULES.get((section, key), RULES.get(key, _unknown))
            if rule is _unknown:
                out[where] = f"`{where}` is not a param this pipeline reads; check the spelling"
            elif rule is None:  # a nested block
                if isinstance(value, dict):
                    walk(section, where, value)
                elif value is not None:
                    out[where] = f"`{where}` is {value!r}; allowed: a mapping of params"
            elif (why := rule(value)) is not None:
                out[where] = f"`{where}` is {value!r}; allowed: {why}"

    for section, block in params.items():
        if isinstance(block, dict):
            walk(section, section, block)
    return out


def _unknown(_: Any) -> str:
    return "a known param"


# --------------------------------------------------------------------------- nested mappings
# params.yaml (and an overrides file) as a nested mapping, its keys dotted as `-S` and dvc.yaml
# write them ("rloo.sampler.temperature"). The one walk of such trees: stage_params, overrides,
# from_section and the tests use these. A key is a path part, so it holds no "." itself.
def leaves(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"section.key": value} for every non-mapping value, depth first in the file's order;
    `prefix` goes before every key. A null is a value; an empty mapping has no leaves."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def at(tree: dict[str, Any], dotted: str) -> Any:
    """The value at the dotted key; None where a part is missing or its parent no mapping."""
    value: Any = tree
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def has(tree: dict[str, Any], dotted: str) -> bool:
    """Whether the dotted key is present (a null value counts: it overrides)."""
    *parents, last = dotted.split(".")
    block = at(tree, ".".join(parents)) if parents else tree
    return isinstance(block, dict) and last in block


def merged(base: dict[str, Any], over: dict[str, Any], null_deletes: bool = False
           ) -> dict[str, Any]:
    """`base` with `over` on top; a key holding a mapping in both is merged recursively. New
    keys follow `base`'s, in `over`'s order. A null in `over` is a value (an arm's `null`
    overrides its base's value), or with null_deletes removes the key (the smoke params drop
    e.g. a policy the smoke-sized run cannot produce; a null inside a mapping that `base`
    lacks, or holds no mapping at, is kept as it is)."""
    out = {**base}
    for k, v in over.items():
        if null_deletes and v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merged(out[k], v, null_deletes)
        else:
            out[k] = v
    return out


# --------------------------------------------------------------------------- sections
def from_section(cls, stage: str, params: dict[str, Any], path: str, inherit: str | None = None):
    """The dataclass `cls` of the params section at `path` (dotted: "int.rloo").

    `inherit`: another section whose keys `path` overrides (an arm's section lists only what
    differs from its base; int.rloo overrides rloo); nested mappings (e.g. `sampler`) are
    merged key by key.
    Missing or unknown keys, or a bad relation between values (`__post_init__`), stop
    `stage` with one StageError that lists each, naming the key and the fix."""
    built, problems = build_section(cls, params, path, inherit)
    if problems:
        raise StageError(stage, "\n  ".join(problems))
    return built


def build_section(cls, params: dict[str, Any], path: str, inherit: str | None = None,
                  construct: bool = True, reported: AbstractSet[str] = frozenset()
                  ) -> tuple[Any, list[str]]:
    """`from_section` without the raise: (the dataclass, []) or (None, every problem found).

    construct=False checks the keys only, for a section holding a value its rule refuses:
    that value is already reported, and the relations (`__post_init__`) could trip on it
    with a raw TypeError (`"x" > 16`). `reported`: dotted keys already reported (a key no
    rule knows), not listed again among the section's unknown keys."""
    paths = [p for p in (inherit, path) if p is not None]
    blocks = [_block(params, p) for p in paths]
    if absent := [p for p, b in zip(paths, blocks) if b is None]:
        return None, [f"params.yaml has no `{p}:` section; add it (see README)." for p in absent]
    block = merged(*blocks) if inherit is not None else blocks[0]
    return _build(cls, block, path, construct, reported)


def _block(params: dict[str, Any], path: str) -> dict[str, Any] | None:
    block = at(params, path)
    return block if isinstance(block, dict) else None


def _build(cls, block: dict[str, Any], path: str, construct: bool,
           reported: AbstractSet[str]) -> tuple[Any, list[str]]:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    problems = []
    unknown = set(block) - set(names)
    if new := sorted(k for k in unknown if f"{path}.{k}" not in reported):
        problems.append(f"`{path}` has unknown keys {new}; valid: {', '.join(names)}; "
                        "rename or remove them")
    if missing := [k for k in names if k not in block]:
        problems.append(f"`{path}` is missing {missing}; add them to the `{path}:` section of "
                        "params.yaml (see README)")
    values = {}
    for key, value in block.items():
        if key in hints and dataclasses.is_dataclass(hints[key]) and isinstance(value, dict):
            value, nested = _build(hints[key], value, f"{path}.{key}", construct, reported)
            problems += nested
        values[key] = value
    if problems or unknown or not construct:
        return None, problems
    try:
        return cls(**values), []
    except ValueError as exc:
        return None, [f"{exc} (fix the `{path}:` section of params.yaml)"]


@dataclass(frozen=True)
class Sampler:
    """A sampler block (`rloo.sampler`, `teacher_traces.sampler`, ...)."""
    temperature: float  # softmax temperature (> 0)
    top_p: float  # nucleus mass kept (1.0 = off)
    top_k: int  # most likely tokens kept (0 = off)
    max_new_tokens: int  # generation cap (tokens)

    def as_dict(self) -> dict[str, Any]:
        """The mapping `sampling.generate` takes."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class EvalSampler(Sampler):
    """The fixed evaluation sampler, the `sampler:` section."""
    backend: str  # hf | vllm


@dataclass(frozen=True)
class Adapter:
    """How a stage trains its init policy (`model.apply_adapter`)."""
    adapter: str  # lora | dora | full
    lora_r: int  # LoRA rank (lora / dora only)
    lora_alpha: float  # LoRA scale numerator: the update is scaled by alpha / r
    lora_dropout: float  # dropout on the LoRA input
    target_modules: str | list[str]  # peft targets (all-linear: every Linear but the head)


@dataclass(frozen=True)
class Optim:
    """The optimizer keys every training loop reads."""
    seed: int  # init of new weights, dropout, data order / sampling seeds
    lr: float  # peak AdamW learning rate
    weight_decay: float  # AdamW decay, on matrices only (not norms / biases)
    grad_clip: float | None  # global gradient-norm clip (null = off)
    log_every: int  # steps between console lines (dvclive gets every step)


@dataclass(frozen=True)
class Supervised(Optim):
    """The keys of a supervised loop over a fixed data set (train_sft, train_ipo)."""
    batch_size: int  # global sequences (pairs) per optimizer step, split across processes
    max_len: int  # tokens per sequence; longer ones are cut
    epochs: float | None  # passes over the data; max_steps caps it when both are given
    max_steps: int | None  # optimizer steps
    warmup_frac: float  # share of the steps with linear LR warm-up
    schedule: str  # LR after warm-up: cosine (to 0) | linear | constant
    time_budget_s: float | None  # wall-clock cap: stop after the step that crosses it

    def __post_init__(self):
        if self.epochs is None and self.max_steps is None:
            raise ValueError("set `epochs` or `max_steps`: both are null (with both set, "
                             "max_steps caps the epochs)")


@dataclass(frozen=True)
class SFT(Supervised, Adapter):
    """An SFT section (`sft`, `int.sft`): train_sft keys and the adapter."""
    pack: bool  # concatenate examples into max_len blocks (no padding; pre-training)


@dataclass(frozen=True)
class Base(Supervised):
    """`base`: pre-training of the tiny base on a synthetic arithmetic corpus."""
    corpus_size: int  # synthetic arithmetic documents
    facts_frac: float  # share of "a op b = c" fact lists
    pack: bool  # as SFT.pack


@dataclass(frozen=True)
class Teacher(Supervised):
    """`teacher`: the model behind teacher traces and OPD."""
    base: str  # tiny = train a tiny model | hub id | model dir (passed through)
    init: str  # base = start from the pre-trained base | scratch = random weights
    tiny_preset: str  # model.TINY_PRESETS entry for init: scratch
    init_seed: int  # weight initialisation (scratch)
    hint_frac: float  # share of prompts with a `Strategy:` hint
    pack: bool  # as SFT.pack


@dataclass(frozen=True)
class Distill(SFT):
    """`distill`: no-feedback SFT on each repair condition's successes."""
    conditions: list[str]  # one `distill@<cond>-<seed>` stage per replicate seed each
    first_replicate_conditions: list[str]  # one `distill_first@<cond>-<seed>`, first seed only

    def all_conditions(self) -> list[str]:
        return [*self.conditions, *self.first_replicate_conditions]


@dataclass(frozen=True)
class IPO(Supervised, Adapter):
    """`ipo`: IPO from the SFT policy, one run per pairs source."""
    sources: list[str]  # pairs sources: one `ipo@<source>-<seed>` stage per replicate seed each
    first_replicate_sources: list[str]  # one `ipo_first@<source>-<seed>`, first seed only

    def all_sources(self) -> list[str]:
        return [*self.sources, *self.first_replicate_sources]
    beta: float  # target margin 1 / (2 beta) on length-normalised log-probs
    val_frac: float  # seeded share of the pairs held out: the margin check's data
    rpo_alpha: float  # weight of the NLL anchor on the chosen response (0 = plain IPO)


@dataclass(frozen=True)
class RL(Optim, Adapter):
    """`rloo` (and `int.rloo` over it): train_rloo keys, the prompt pool and the adapter."""
    reward: str  # binary | format | shaped (task.REWARDS)
    steps: int  # optimizer steps (one batch of rollouts each, times ppo_epochs)
    group_size: int  # rollouts per prompt (G)
    prompts_per_step: int  # prompts per step, split across processes
    kl_coef: float  # k3 KL to the reference policy; 0 = no reference forward
    is_clip: float  # clip of the per-rollout importance weight pi / mu
    entropy_coef: float  # entropy bonus
    loss_agg: str  # sum: sequence log-prob (S4 eq. 3) | mean: per-token mean
    rl_coef: float  # lambda_RL: weight of the policy-gradient term
    ppo_epochs: int  # updates per batch of rollouts (> 1 makes the IS weight matter)
    micro_batch: int | None  # sequences per forward/backward; null = all
    zero_std_keep: float  # share of zero-std groups in the update, weighted 1 / keep; 1 = all
    curriculum: bool  # S1 Alg. 1: success-gated tiers of (operand count, target bin)
    curriculum_target_bins: int  # target-magnitude bins per operand count
    curriculum_window: int  # steps of rollout accuracy averaged before a tier unlocks
    curriculum_threshold: float  # windowed pass rate that unlocks the next tier
    curriculum_deadline: int | None  # a tier unlocks at the latest after this many steps
    n_problems: int | None  # prompt pool: the first N train problems (null = all)
    gen_batch_size: int  # sequences per generate call (speed and memory only)
    sampler: Sampler  # the rollout sampler


@dataclass(frozen=True)
class OPD(RL):
    """`opd` and its arms: RL keys plus the teacher's (on-policy distillation)."""
    distill_coef: float  # lambda_KL: weight of the forward KL to the teacher
    distill_temperature: float  # T: both distributions softened by 1/T
    teacher_strategy: str | None  # teacher prompt's hint: direct | search | null = none


# --------------------------------------------------------------------------- data and evaluation
@dataclass(frozen=True)
class Model:
    """`model`: the model every stage loads, and how it is prompted and run."""
    prompt_style: str  # tiny = compact prompt | chat = the S0 prompt as a chat turn
    base: str  # tiny = embedded Qwen2-style model (stage `base`) | hub id | model dir
    tiny_preset: str  # model.TINY_PRESETS entry of the tiny base
    seed: int  # weight initialisation of the tiny model
    dtype: str  # float32 | bfloat16 | float16 | auto
    threads: int | None  # torch intra-op threads (null = one per core)


def prompt_style(stage: str, params: dict[str, Any]) -> str:
    """`model.prompt_style`, the one `model` key most stages read."""
    return from_section(Model, stage, params, "model").prompt_style


def eval_sampler(stage: str, params: dict[str, Any]) -> dict[str, Any]:
    """The fixed evaluation sampler (`sampler:`), as the mapping `sampling.generate` takes."""
    return from_section(EvalSampler, stage, params, "sampler").as_dict()


@dataclass(frozen=True)
class Problems:
    """`problems`: the train / test / OOD problem files."""
    seed: int  # generation seed
    n_train: int  # train pool size
    count_train_solutions: int  # first N train problems get their solutions counted
    n_test: int  # held-out evaluation problems
    n_ood: int  # out-of-distribution problems
    n_unseen: int  # problems no stage trains on (the interventions' pool)
    n_numbers: list[int]  # operand counts, cycled
    number_range: list[int]  # [low, high] of each number
    target_range: list[int]  # [low, high] of in-distribution targets
    ood_n_numbers: list[int]  # operand counts of the OOD split
    ood_target_range: list[int]  # [low, high] of OOD targets


@dataclass(frozen=True)
class Traces:
    """`traces`: solver step traces and repair-format examples of the train problems."""
    seed: int  # style rotation and solution choice
    n_problems: int | None  # first N train problems (null = all)
    per_problem: int  # traces per problem
    solutions: str  # construction | solver
    styles: list[str]  # trace styles, cycled across problems
    repair_frac: float  # share of problems that also get a repair-format example
    repair_mix: dict[str, float]  # failure type -> share of the made wrong attempts


@dataclass(frozen=True)
class TeacherTraces:
    """`teacher_traces`: verification-gated teacher samples under rotated strategy hints."""
    n_problems: int | None  # first N train problems
    k: int  # samples per problem, split evenly across the strategies
    strategies: list[str]  # strategy hints, rotated
    seed: int  # sampling seed (+ strategy index)
    batch_size: int  # sequences per generate call
    sampler: Sampler  # the teacher's sampler

    def __post_init__(self):
        if self.k % len(self.strategies):
            raise ValueError(f"teacher_traces.k ({self.k}) must be a multiple of the number of "
                             f"strategies ({len(self.strategies)})")


@dataclass(frozen=True)
class Dedup:
    """`dedup`: MiniLM + FAISS near-duplicate removal, then the train / validation split."""
    sources: list[str]  # data/traces/<source>.jsonl files pooled
    threshold: float  # cosine at or above which a trace is a duplicate
    per_problem: bool  # compare only traces of the same (problem, prompt)
    val_frac: float  # validation share
    seed: int  # split seed


@dataclass(frozen=True)
class Pairs:
    """`pairs`: preference pairs per source."""
    seed: int  # pair choice and the base model's sampling seed
    n_problems: int | None  # first N train problems
    per_problem: int  # pairs per problem and source
    max_per_source: int | str | None  # cap per source: an integer, min, or null (no cap)
    base_k: int  # base-model samples per problem (the `base` source)
    base_sampler: Sampler  # the base model's sampler
    batch_size: int  # sequences per generate call of the base model's sampling


@dataclass(frozen=True)
class Diagnose:
    """`diagnose`: zero-signal diagnosis of the SFT policy, from its evaluation samples."""
    k: int  # the group size K: each prompt's evaluation samples cut into groups of K

    def __post_init__(self):
        if self.k < 2:
            raise ValueError(f"diagnose.k must be >= 2 (a group needs two samples for any "
                             f"contrast), got {self.k}")


@dataclass(frozen=True)
class Repair:
    """`repair`: feedback-conditioned repair of failed attempts."""
    n_problems: int | None  # attempt pool: the last N train problems (null = all)
    select_k: int  # attempt pool: samples per pool problem; the failed ones are the attempts
    n_attempts: int  # failed attempts repaired
    k: int  # repair samples per attempt and condition
    seed: int  # attempt choice, Fshuf derangement, sampling seed (the pool: a stream of it)
    conditions: list[str]  # F0 .. F4, Fshuf, R
    batch_size: int  # sequences per generate call


@dataclass(frozen=True)
class Interventions:
    """`int`: interventional training with the solver as the oracle."""
    n_problems: int  # first N unseen problems sampled to find unsolved ones
    select_k: int  # samples per problem that must all fail for it to count as unsolved
    k: int  # pass@K of every arm on the unsolved problems
    seed: int  # sampling seed of the K samples and the continuations
    eval_seed: int  # pass@K seed on the unsolved set
    heldout_frac: float  # share of the unsolved problems never trained on
    traces_per_problem: int  # failed traces per unsolved problem intervened on
    n_continuations: int  # continuations sampled per intervention
    filter: bool  # keep only interventions with a verified continuation
    replay: float  # SFT training examples mixed into the patch and the solver baseline, per example
    rl_problems: str  # unsolved | all
    batch_size: int  # sequences per generate call
    sft: SFT  # the patch and the solver-solution baseline
    rloo: dict[str, Any]  # overrides of `rloo` for the RL arms (built with inherit="rloo")

    def __post_init__(self):
        if self.eval_seed == self.seed:
            raise ValueError(f"int.eval_seed must differ from int.seed (both {self.seed}): on "
                             "the selection seed the SFT policy fails every unsolved problem by "
                             "construction")


@dataclass(frozen=True)
class Replicates:
    """`replicates`: the training seeds every compared policy is trained and evaluated with."""
    seeds: list[int]  # one replicate per seed (`<stage>@<seed>`); seeds move by replicates.STRIDE

    def __post_init__(self):
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"replicates.seeds must not repeat a seed, got {self.seeds}")


@dataclass(frozen=True)
class Evaluate:
    """`evaluate`: samples of every policy on the held-out splits."""
    shared: list[str]  # trained once (fixed inputs): data/models/<name>
    policies: list[str]  # trained per replicate: data/models/<name>/r<seed>, every seed
    controls: list[str]  # trained per replicate like `policies`, shown in the report's tables,
    # not in the DVC headline (a claim's control arms: int_sft, int_plain_rl)
    first_replicate_only: list[str]  # secondary policies: only the first replicate seed
    splits: list[str]  # data/problems/<split>.jsonl files
    n: int  # samples per prompt and seed
    seeds: list[int]  # sampling seeds
    reward: str  # reward column
    batch_size: int  # sequences per generate call
    ks: list[int]  # pass@k
    budgets: list[int]  # best-of-N budgets

    def __post_init__(self):
        names = [*self.shared, *self.policies, *self.controls, *self.first_replicate_only]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"evaluate lists {twice} more than once; a policy is either "
                             "shared, replicated (policies, controls) or first_replicate_only")
        # metrics.summarize can only report k <= n (samples per prompt and seed) and would skip
        # the rest without a word: the report would then lack a column the params asked for
        for key, what in (("ks", "pass@k"), ("budgets", "best-of-N")):
            values = getattr(self, key)
            if over := [v for v in values if v > self.n]:
                raise ValueError(f"evaluate.{key} {values} has {over} > evaluate.n ({self.n}): "
                                 f"{what} needs that many samples per prompt; remove {over} "
                                 f"from evaluate.{key} or raise evaluate.n")

    def replicated(self) -> list[str]:
        """Every policy trained per replicate."""
        return [*self.policies, *self.controls, *self.first_replicate_only]

    def all(self) -> list[str]:
        return [*self.shared, *self.replicated()]


@dataclass(frozen=True)
class Compare:
    """`compare`: paired tests between policies on the same problems."""
    pairs: list[list[str]] | None  # [a, b] policy pairs
    ks: list[int]  # paired outcome: solved within the first k samples
    seed: int  # the sampling seed whose samples are paired
    splits: list[str]  # splits compared
    exact: bool  # McNemar: exact binomial | continuity-corrected chi-square
    n_boot: int  # bootstrap resamples
    alpha: float  # 1 - interval coverage
    boot_seed: int  # bootstrap seed


@dataclass(frozen=True)
class Report:
    """`report`: reports/report.md and the figures."""
    require_all: bool  # fail on missing metrics files (false: "not run" rows)
    reference: str  # policy every table row is tested against
    best_of_n_policy: str | None  # S4 Table 2 policy (null = highest test pass@1)
    dpi: int  # figure resolution
