"""What every params.yaml value may be, checked when a stage reads params (`io.load_params`).

So a bad value stops a stage before it loads a model or samples anything, with one message
that names the key, the bad value and what is allowed; not after minutes of compute, and
not as a raw TypeError.

Every params.yaml section is a frozen dataclass below (`SECTIONS`), and each field is the one
description of its key: its type, the rule its value must pass in its annotation
(`lr: Rate`, where `Rate = Annotated[float, number(0, strict=True)]`) and a one-line comment.
A key shared by several sections is a field of one base class (Optim, Supervised, Adapter,
Sampler), so it has one rule. `bad_values` walks params section by section, each key against
its section's field and a nested block (`rloo.sampler`, `int.sft`, `int.rloo`) against its
own class; a key the class lacks is refused: it is a typo, or a param this code does not read.
An arm's section (core.arms) holds only the keys it overrides, each checked against the class
of its script's section (see `bad_values` for who knows which sections are arms).

`from_section` builds a section, which also checks the relations between values of a section
(`__post_init__`, e.g. `int.eval_seed` != `int.seed`); stages check only relations across
sections and files. params.yaml is the only place values live: no field has a default.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Annotated, Any

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


# the rules most fields share, and the field types that carry them (`lr: Rate`)
POS, COUNT, SEED = integer(1), integer(0), integer(0)
FRACTION, RATE = number(0, hi=1), number(0, strict=True)
Pos = Annotated[int, POS]  # a size or count
Count = Annotated[int, COUNT]  # 0 = none
Seed = Annotated[int, SEED]
MaybePos = Annotated[int | None, optional(POS)]  # null = all, or no cap
MaybeRate = Annotated[float | None, optional(RATE)]  # null = none, or off
Rate = Annotated[float, RATE]  # a rate, temperature or scale: > 0
Share = Annotated[float, FRACTION]  # a share of 0 .. 1
PosShare = Annotated[float, number(0, True, 1)]  # > 0 and <= 1
HeldOut = Annotated[float, number(0, hi=0.5)]  # a validation share
Weight = Annotated[float, number(0)]  # a loss weight or decay: 0 = off
Flag = Annotated[bool, flag]
# names that become stage names, shell arguments and paths; a repeat would build a stage twice
Names = Annotated[list[str], list_of(name, unique=True)]
MaybeNames = Annotated[list[str], list_of(name, 0, unique=True)]  # [] = none
Ks = Annotated[list[int], list_of(POS, unique=True)]  # k values, budgets
Seeds = Annotated[list[int], list_of(SEED, unique=True)]
Splits = Annotated[list[str], list_of(choice("test", "ood"), unique=True)]
# copies of task.REWARDS, data.traces.STYLES / STRATEGY_HINTS and model.TINY_PRESETS (as
# RL.loss_agg of train.losses.LOSS_AGGREGATIONS: config reads no torch / task code, and
# tests/test_config.py checks they agree); n_numbers, styles and strategies are rotations: a
# repeat weights an item on purpose
Reward = Annotated[str, choice("binary", "format", "shaped")]
Styles = Annotated[list[str], list_of(choice("direct", "search"))]
Preset = Annotated[str, choice("student", "teacher")]
Operands = Annotated[list[int], list_of(integer(2, MAX_NUMBERS))]


def per_chain(rule: Rule) -> Rule:
    """A mapping with one value per chain (CHAINS), each passing `rule`."""
    def check(v: Any) -> str | None:
        ok = isinstance(v, dict) and set(v) == set(CHAINS) and not any(rule(x) for x in v.values())
        return None if ok else f"a mapping of every chain ({', '.join(CHAINS)}) to " \
            f"{rule(object())}"
    return check


def per_source_cap(v: Any) -> str | None:
    return None if v is None or v == "min" or POS(v) is None else \
        "a positive integer, min (the smallest source's count) or null"


@dataclass(frozen=True)
class Block:
    """The rule of a field holding a block of `cls`'s keys, checked key by key: a nested
    dataclass (`rloo.sampler`, `int.sft`), or a mapping of overrides of a section's keys
    (`int.rloo: Annotated[dict[str, Any], Block(RL)]`, built with inherit="rloo")."""
    cls: type


@functools.cache
def rules(cls) -> dict[str, Rule | Block]:
    """{field: its rule, or the Block of a nested dataclass} of the dataclass `cls`; a field
    with neither is a TypeError, so that no key goes unchecked."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, Rule | Block] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        meta = hint.__metadata__ if typing.get_origin(hint) is Annotated else ()
        if dataclasses.is_dataclass(hint):
            out[f.name] = Block(hint)
        elif len(meta) == 1 and (isinstance(meta[0], Block) or callable(meta[0])):
            out[f.name] = meta[0]
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no rule: annotate it as "
                            "Annotated[type, rule] (or an alias such as Pos), or a dataclass")
    return out


def rule_of(cls, key: str) -> Rule:
    """The rule of `cls`'s field `key` (KeyError: no such field; TypeError: a nested block,
    whose keys have the rules)."""
    rule = rules(cls)[key]
    if isinstance(rule, Block):
        raise TypeError(f"{cls.__name__}.{key} is a block of {rule.cls.__name__} keys")
    return rule


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
    arm's keys when it builds them (`build_section`)."""
    known = {**SECTIONS, **{a: SECTIONS[s] for a, s in (arms or {}).items() if a not in SECTIONS}}
    out: dict[str, str] = {}
    for section, block in params.items():
        if section not in known:
            if arms is not None:
                out[section] = (f"`{section}` is not a params section this pipeline reads; "
                                "check the spelling, or add the arm it configures to "
                                f"core.arms.ARMS (known: {', '.join(known)})")
        elif isinstance(block, dict):  # else no section: `build_section` reports it missing
            _walk(known[section], block, section, out)
    return out


def _walk(cls, block: dict[str, Any], path: str, out: dict[str, str],
          unknown: bool = True) -> None:
    """Each key of `block` (at dotted `path`) against `cls`'s field of that name, into `out`.

    Not `leaves`: a mapping is one value where a rule takes it (repair_mix), and a key the
    class lacks is reported once, not per leaf under it. unknown=False: such keys are left to
    `_build`, which lists them."""
    fields = rules(cls)
    for key, value in block.items():
        where = f"{path}.{key}"
        rule = fields.get(key)
        if rule is None:
            if unknown:
                out[where] = (f"`{where}` is not a param this pipeline reads; check the "
                              f"spelling (known in `{path}`: {', '.join(fields)})")
        elif isinstance(rule, Block):  # a nested block, checked key by key
            if isinstance(value, dict):
                _walk(rule.cls, value, where, out, unknown)
            elif value is not None:  # null: left to the stage that builds the block
                out[where] = f"`{where}` is {value!r}; allowed: a mapping of params"
        elif (why := rule(value)) is not None:
            out[where] = f"`{where}` is {value!r}; allowed: {why}"


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
    with a raw TypeError (`"x" > 16`). `reported`: dotted keys already reported (a bad value,
    a key its class lacks), not listed again.

    With `inherit`, the values `path` sets are checked against their rules here too: an arm's
    section is checked by `bad_values` only with the arm registry, which a training stage
    does not read (the params check does, and passes what it reported)."""
    paths = [p for p in (inherit, path) if p is not None]
    blocks = [_block(params, p) for p in paths]
    if absent := [p for p, b in zip(paths, blocks) if b is None]:
        return None, [f"params.yaml has no `{p}:` section; add it (see README)." for p in absent]
    if inherit is None:
        return _build(cls, blocks[0], path, construct, reported)
    bad: dict[str, str] = {}
    _walk(cls, blocks[1], path, bad, unknown=False)
    bad = {k: p for k, p in bad.items() if k not in reported}
    built, problems = _build(cls, merged(*blocks), path, construct and not bad, reported)
    return built, [*bad.values(), *problems]  # built: None when a value is bad


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
    temperature: Rate  # softmax temperature (> 0)
    top_p: PosShare  # nucleus mass kept (1.0 = off)
    top_k: Count  # most likely tokens kept (0 = off)
    max_new_tokens: Pos  # generation cap (tokens)

    def as_dict(self) -> dict[str, Any]:
        """The mapping `sampling.generate` takes."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class EvalSampler(Sampler):
    """The fixed evaluation sampler, the `sampler:` section."""
    backend: Annotated[str, choice("hf", "vllm")]  # hf | vllm


@dataclass(frozen=True)
class Adapter:
    """How a stage trains its init policy (`model.apply_adapter`)."""
    adapter: Annotated[str, choice("full", "lora", "dora")]  # lora | dora | full
    lora_r: Pos  # LoRA rank (lora / dora only)
    lora_alpha: Rate  # LoRA scale numerator: the update is scaled by alpha / r
    lora_dropout: Annotated[float, number(0, hi=0.99)]  # dropout on the LoRA input
    target_modules: Annotated[str | list[str], modules]  # peft targets; all-linear: all but head


@dataclass(frozen=True)
class Optim:
    """The optimizer keys every training loop reads."""
    seed: Seed  # init of new weights, dropout, data order / sampling seeds
    lr: Rate  # peak AdamW learning rate
    weight_decay: Weight  # AdamW decay, on matrices only (not norms / biases)
    grad_clip: MaybeRate  # global gradient-norm clip (null = off)
    log_every: Pos  # steps between console lines (dvclive gets every step)


@dataclass(frozen=True)
class Supervised(Optim):
    """The keys of a supervised loop over a fixed data set (train_sft, train_ipo)."""
    batch_size: Pos  # global sequences (pairs) per optimizer step, split across processes
    max_len: Pos  # tokens per sequence; longer ones are cut
    epochs: MaybeRate  # passes over the data; max_steps caps it when both are given
    max_steps: MaybePos  # optimizer steps
    warmup_frac: Share  # share of the steps with linear LR warm-up
    schedule: Annotated[str, choice("cosine", "linear", "constant")]  # LR after warm-up
    time_budget_s: MaybeRate  # wall-clock cap: stop after the step that crosses it

    def __post_init__(self):
        if self.epochs is None and self.max_steps is None:
            raise ValueError("set `epochs` or `max_steps`: both are null (with both set, "
                             "max_steps caps the epochs)")


@dataclass(frozen=True)
class SFT(Supervised, Adapter):
    """An SFT section (`sft`, `int.sft`): train_sft keys and the adapter."""
    pack: Flag  # concatenate examples into max_len blocks (no padding; pre-training)


@dataclass(frozen=True)
class Base(Supervised):
    """`base`: pre-training of the tiny base on a synthetic arithmetic corpus."""
    corpus_size: Pos  # synthetic arithmetic documents
    facts_frac: Share  # share of "a op b = c" fact lists
    pack: Flag  # as SFT.pack


@dataclass(frozen=True)
class Teacher(Supervised):
    """`teacher`: the model behind teacher traces and OPD."""
    base: Annotated[str, text]  # tiny = train a tiny model | hub id | model dir (passed through)
    init: Annotated[str, choice("base", "scratch")]  # the pre-trained base | random weights
    tiny_preset: Preset  # model.TINY_PRESETS entry for init: scratch
    init_seed: Seed  # weight initialisation (scratch)
    hint_frac: Share  # share of prompts with a `Strategy:` hint
    pack: Flag  # as SFT.pack


@dataclass(frozen=True)
class Distill(SFT):
    """`distill`: no-feedback SFT on each repair condition's successes."""
    conditions: Names  # one `distill@<cond>-<seed>` stage per replicate seed each
    first_replicate_conditions: MaybeNames  # one `distill_first@<cond>-<seed>`, first seed only
    skill_problems: Pos  # at most this many problems of the distilled repairs for the skill check
    skill_samples: Pos  # no-feedback samples per skill problem, SFT and distilled policy each

    def all_conditions(self) -> list[str]:
        return [*self.conditions, *self.first_replicate_conditions]


@dataclass(frozen=True)
class IPO(Supervised, Adapter):
    """`ipo`: IPO from the SFT policy, one run per pairs source."""
    sources: Names  # pairs sources: one `ipo@<source>-<seed>` stage per replicate seed each
    first_replicate_sources: MaybeNames  # one `ipo_first@<source>-<seed>`, first seed only

    def all_sources(self) -> list[str]:
        return [*self.sources, *self.first_replicate_sources]
    beta: Rate  # target margin 1 / (2 beta) on length-normalised log-probs
    val_frac: HeldOut  # seeded share of the pairs held out: the margin check's data
    rpo_alpha: Weight  # weight of the NLL anchor on the chosen response (0 = plain IPO)
    skill_problems: Pos  # train problems after pairs.n_problems' (not trained on) for the skill check
    skill_samples: Pos  # samples per skill problem, SFT and IPO policy each (evaluation sampler)
    skill_margin: Share  # relative pass@1 drop from SFT allowed by the skill check (0.25 = 25%)


@dataclass(frozen=True)
class RL(Optim, Adapter):
    """`rloo` (and `int.rloo` over it): train_rloo keys, the prompt pool and the adapter."""
    reward: Reward  # binary | format | shaped (task.REWARDS)
    steps: Pos  # optimizer steps (one batch of rollouts each, times ppo_epochs)
    group_size: Annotated[int, integer(2)]  # rollouts per prompt (G)
    prompts_per_step: Pos  # prompts per step, split across processes
    kl_coef: Weight  # k3 KL to the reference policy; 0 = no reference forward
    is_clip: Rate  # clip of the per-rollout importance weight pi / mu
    entropy_coef: Weight  # entropy bonus
    loss_agg: Annotated[str, choice("sum", "mean")]  # sequence log-prob (S4 eq. 3) | per token
    rl_coef: Weight  # lambda_RL: weight of the policy-gradient term
    ppo_epochs: Pos  # updates per batch of rollouts (> 1 makes the IS weight matter)
    micro_batch: MaybePos  # sequences per forward/backward; null = all
    zero_std_keep: PosShare  # share of zero-std groups in the update, weighted 1 / keep; 1 = all
    curriculum: Flag  # S1 Alg. 1: success-gated tiers of (operand count, target bin)
    curriculum_target_bins: Pos  # target-magnitude bins per operand count
    curriculum_window: Pos  # steps of rollout accuracy averaged before a tier unlocks
    curriculum_threshold: Share  # windowed pass rate that unlocks the next tier
    curriculum_deadline: MaybePos  # a tier unlocks at the latest after this many steps
    n_problems: MaybePos  # prompt pool: the first N train problems (null = all)
    gen_batch_size: Pos  # sequences per generate call (speed and memory only)
    sampler: Sampler  # the rollout sampler


@dataclass(frozen=True)
class OPD(RL):
    """`opd` and its arms: RL keys plus the teacher's (on-policy distillation)."""
    distill_coef: Weight  # lambda_KL: weight of the forward KL to the teacher
    distill_temperature: Rate  # T: both distributions softened by 1/T
    teacher_strategy: Annotated[str | None, optional(choice("direct", "search"))]  # null: no hint


# --------------------------------------------------------------------------- data and evaluation
@dataclass(frozen=True)
class Model:
    """`model`: the model every stage loads, and how it is prompted and run."""
    prompt_style: Annotated[str, choice("tiny", "chat")]  # compact | the S0 prompt as a chat turn
    base: Annotated[str, text]  # tiny = embedded Qwen2-style model (stage `base`) | hub id | dir
    tiny_preset: Preset  # model.TINY_PRESETS entry of the tiny base
    seed: Seed  # weight initialisation of the tiny model
    dtype: Annotated[str, choice("float32", "bfloat16", "float16", "auto")]
    threads: MaybePos  # torch intra-op threads (null = one per core)


def prompt_style(stage: str, params: dict[str, Any]) -> str:
    """`model.prompt_style`, the one `model` key most stages read."""
    return from_section(Model, stage, params, "model").prompt_style


def eval_sampler(stage: str, params: dict[str, Any]) -> dict[str, Any]:
    """The fixed evaluation sampler (`sampler:`), as the mapping `sampling.generate` takes."""
    return from_section(EvalSampler, stage, params, "sampler").as_dict()


@dataclass(frozen=True)
class Problems:
    """`problems`: the train / test / OOD problem files."""
    seed: Seed  # generation seed
    n_train: Pos  # train pool size
    count_train_solutions: Count  # first N train problems get their solutions counted
    n_test: Pos  # held-out evaluation problems
    n_ood: Count  # out-of-distribution problems
    n_unseen: Count  # problems no stage trains on (the interventions' pool)
    n_numbers: Operands  # operand counts, cycled
    number_range: Annotated[list[int], int_range(1)]  # [low, high] of each number
    target_range: Annotated[list[int], int_range(0)]  # [low, high] of in-distribution targets
    ood_n_numbers: Operands  # operand counts of the OOD split
    ood_target_range: Annotated[list[int], int_range(0)]  # [low, high] of OOD targets


@dataclass(frozen=True)
class Traces:
    """`traces`: solver step traces and repair-format examples of the train problems."""
    seed: Seed  # style rotation and solution choice
    n_problems: MaybePos  # first N train problems (null = all)
    per_problem: Pos  # traces per problem
    solutions: Annotated[str, choice("construction", "solver")]  # construction | solver
    styles: Styles  # trace styles, cycled across problems
    repair_frac: Share  # share of problems that also get a repair-format example
    repair_mix: Annotated[dict[str, float], failure_mix]  # failure type -> share of made attempts


@dataclass(frozen=True)
class TeacherTraces:
    """`teacher_traces`: verification-gated teacher samples under rotated strategy hints."""
    n_problems: MaybePos  # first N train problems
    k: Pos  # samples per problem, split evenly across the strategies
    strategies: Styles  # strategy hints, rotated
    seed: Seed  # sampling seed (+ strategy index)
    batch_size: Pos  # sequences per generate call
    sampler: Sampler  # the teacher's sampler

    def __post_init__(self):
        if self.k % len(self.strategies):
            raise ValueError(f"teacher_traces.k ({self.k}) must be a multiple of the number of "
                             f"strategies ({len(self.strategies)})")


@dataclass(frozen=True)
class Dedup:
    """`dedup`: MiniLM + FAISS near-duplicate removal, then the train / validation split."""
    # data/traces/<source>.jsonl files pooled
    sources: Annotated[list[str], list_of(choice("solver", "teacher", "repair"), unique=True)]
    threshold: PosShare  # cosine at or above which a trace is a duplicate
    per_problem: Flag  # compare only traces of the same (problem, prompt)
    val_frac: HeldOut  # validation share
    seed: Seed  # split seed


@dataclass(frozen=True)
class Pairs:
    """`pairs`: preference pairs per source."""
    seed: Seed  # pair choice and the base model's sampling seed
    n_problems: MaybePos  # first N train problems
    per_problem: Pos  # pairs per problem and source
    max_per_source: Annotated[int | str | None, per_source_cap]  # cap per source (null = none)
    base_k: Pos  # base-model samples per problem (the `base` source)
    base_sampler: Sampler  # the base model's sampler
    batch_size: Pos  # sequences per generate call of the base model's sampling


@dataclass(frozen=True)
class Diagnose:
    """`diagnose`: zero-signal diagnosis of the SFT policy, from its evaluation samples."""
    k: Pos  # the group size K: each prompt's evaluation samples cut into groups of K

    def __post_init__(self):
        if self.k < 2:
            raise ValueError(f"diagnose.k must be >= 2 (a group needs two samples for any "
                             f"contrast), got {self.k}")


@dataclass(frozen=True)
class Repair:
    """`repair`: feedback-conditioned repair of failed attempts."""
    n_problems: MaybePos  # attempt pool: the last N train problems (null = all)
    select_k: Pos  # attempt pool: samples per pool problem; the failed ones are the attempts
    n_attempts: Pos  # failed attempts repaired
    k: Pos  # repair samples per attempt and condition
    seed: Seed  # attempt choice, Fshuf derangement, sampling seed (the pool: a stream of it)
    conditions: Names  # F0 .. F4, Fshuf, R
    batch_size: Pos  # sequences per generate call


@dataclass(frozen=True)
class Interventions:
    """`int`: interventional training with the solver as the oracle."""
    n_problems: Pos  # first N unseen problems sampled to find unsolved ones
    select_k: Pos  # samples per problem that must all fail for it to count as unsolved
    k: Pos  # pass@K of every arm on the unsolved problems
    seed: Seed  # sampling seed of the K samples and the continuations
    eval_seed: Seed  # pass@K seed on the unsolved set
    heldout_frac: Annotated[float, number(0, hi=0.9)]  # share of the unsolved never trained on
    traces_per_problem: Pos  # failed traces per unsolved problem intervened on
    n_continuations: Pos  # continuations sampled per intervention
    filter: Flag  # keep only interventions with a verified continuation
    replay: Weight  # SFT examples mixed into the patch and the solver baseline, per example
    rl_problems: Annotated[str, choice("unsolved", "all")]  # unsolved | all
    batch_size: Pos  # sequences per generate call
    sft: SFT  # the patch and the solver-solution baseline
    # overrides of `rloo` for the RL arms (built with inherit="rloo"), checked as RL keys
    rloo: Annotated[dict[str, Any], Block(RL)]

    def __post_init__(self):
        if self.eval_seed == self.seed:
            raise ValueError(f"int.eval_seed must differ from int.seed (both {self.seed}): on "
                             "the selection seed the SFT policy fails every unsolved problem by "
                             "construction")


# The claim chains, each trained from SFT on its own seed list (`replicates.<chain>`, a subset
# of `replicates.seeds`, SFT's): sft (SFT, its evaluation, diagnose), ipo (ipo, ipo_first),
# rloo (the RLOO arms), opd (the OPD arms), repair (repair, distill, distill_first) and int.
# Why lists per chain: a claim is decided by its chain's replicates, and the cheap chains can
# afford more of them than the costly ones (docs/statistics.md, "Planning the next run").
CHAINS = ("sft", "ipo", "rloo", "opd", "repair", "int")
# chain -> the chain whose policy of the same seed it starts from or compares with: every
# chain trains from SFT, and int also compares with the RLOO policy of its seed (`int@<seed>`
# reads data/models/rloo/r<seed>), so each chain's seeds must be among its upstream's
UPSTREAM = {"ipo": "sft", "rloo": "sft", "opd": "sft", "repair": "sft", "int": "rloo"}


def chain_path(chain: str) -> list[str]:
    """The chain and those upstream of it, up to sft (int -> [int, rloo, sft]): a seed of the
    chain must be in each of their lists."""
    out = [chain]
    while out[-1] in UPSTREAM:
        out.append(UPSTREAM[out[-1]])
    return out


def seeds_key(chain: str) -> str:
    """The `replicates` key of a chain's seeds: `seeds` (SFT's, the union) or the chain's."""
    return "seeds" if chain == "sft" else chain


@dataclass(frozen=True)
class Replicates:
    """`replicates`: the training seeds each chain is trained and evaluated with."""
    seeds: Seeds  # SFT's (sft, its evaluation, diagnose): every chain's seeds are among these
    ipo: Seeds  # `ipo@<source>-<seed>`; `ipo_first` takes the first
    rloo: Seeds  # the RLOO arms (`rloo@<arm>-<seed>`); a first-replicate arm takes the first
    opd: Seeds  # the OPD arms (`opd@<variant>-<seed>`)
    repair: Seeds  # `repair@<seed>` and `distill@<condition>-<seed>`; `distill_first`: the first
    int: Seeds  # `int@<seed>`; each also in `rloo` (int compares with RLOO's policy)

    def __post_init__(self):
        problems = []
        for chain in CHAINS:
            key, seeds = seeds_key(chain), self.of(chain)
            if twice := sorted({s for s in seeds if seeds.count(s) > 1}):
                problems.append(f"replicates.{key} repeats seed(s) {twice} ({seeds}); list each "
                                "seed once (a seed trains one replicate)")
            up = UPSTREAM.get(chain)
            if up is None:
                continue
            if missing := [s for s in seeds if s not in self.of(up)]:
                what, it = (f"seed {missing[0]}", "it") if len(missing) == 1 else \
                    (f"seeds {missing}", "them")
                why = "SFT trains it first" if up == "sft" else \
                    f"`{chain}@<seed>` reads the {up} policy of its seed"
                problems.append(f"replicates.{key} has {what} not in replicates.{seeds_key(up)}; "
                                f"add {it} to replicates.{seeds_key(up)} ({why}) or drop {it}")
        if problems:
            raise ValueError("; ".join(problems))

    def of(self, chain: str) -> list[int]:
        """The seeds of `chain` (one of CHAINS)."""
        if chain not in CHAINS:
            raise KeyError(f"unknown chain {chain!r}; chains: {', '.join(CHAINS)}")
        return getattr(self, seeds_key(chain))

    def chains(self) -> dict[str, list[int]]:
        """{chain: its seeds}, in CHAINS order."""
        return {chain: self.of(chain) for chain in CHAINS}


@dataclass(frozen=True)
class Evaluate:
    """`evaluate`: samples of every policy on the held-out splits.

    Which replicated policies are sampled follows from the stages that train them (each
    training stage has its evaluation, `evaluate_<stage>`, over the same matrix); the lists
    below say which of them compare, the report and the headline read (and `int_policies`,
    which of the int stage's policies are sampled at all)."""
    shared: MaybeNames  # trained once (fixed inputs): data/models/<name>
    policies: Names  # trained per replicate: data/models/<name>/r<seed>, every seed of its chain
    controls: MaybeNames  # trained per replicate like `policies`, shown in the report's tables,
    # not in the DVC headline (a claim's control arms: int_sft, int_plain_rl)
    first_replicate_only: MaybeNames  # secondary policies: only its chain's first seed
    int_policies: MaybeNames  # the int stage's policies sampled on the test split (opt-in)
    splits: Splits  # data/problems/<split>.jsonl files
    n: Pos  # samples per prompt and seed
    seeds: Seeds  # sampling seeds
    reward: Reward  # reward column
    batch_size: Pos  # sequences per generate call
    ks: Ks  # pass@k
    budgets: Ks  # best-of-N budgets

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
    pairs: Annotated[list[list[str]] | None, name_pairs]  # [a, b] policy pairs
    ks: Ks  # paired outcome: solved within the first k samples
    seed: Seed  # the sampling seed whose samples are paired
    splits: Splits  # splits compared
    exact: Flag  # McNemar: exact binomial | continuity-corrected chi-square
    n_boot: Pos  # bootstrap resamples
    alpha: Annotated[float, number(0, True, 0.5)]  # 1 - interval coverage
    boot_seed: Seed  # bootstrap seed


@dataclass(frozen=True)
class Report:
    """`report`: reports/report.md and the figures."""
    require_all: Flag  # fail on missing metrics files (false: "not run" rows)
    reference: Annotated[str, name]  # policy every table row is tested against
    best_of_n_policy: Annotated[str | None, optional(name)]  # S4 Table 2's; null = best pass@1
    dpi: Pos  # figure resolution
    # CPU minutes one more replicate of each chain costs (its stages and its evaluations)
    chain_minutes: Annotated[dict[str, float], per_chain(RATE)]


# every params.yaml section but the arms' (core.arms: each overrides its script's section, and
# only the params check reads that registry) -> its dataclass; `bad_values` walks params by it
SECTIONS: dict[str, type] = {
    "replicates": Replicates, "problems": Problems, "traces": Traces, "sampler": EvalSampler,
    "evaluate": Evaluate, "compare": Compare, "dedup": Dedup, "model": Model, "base": Base,
    "teacher": Teacher, "teacher_traces": TeacherTraces, "pairs": Pairs, "sft": SFT, "ipo": IPO,
    "rloo": RL, "opd": OPD, "diagnose": Diagnose, "repair": Repair, "distill": Distill,
    "int": Interventions, "report": Report,
}
