"""The params rules every stage shares, and how a section is checked and built.

A bad value stops a stage before it loads a model or samples anything, with one message that
names the key, the bad value and what is allowed; not after minutes of compute, and not as a
raw TypeError.

Every params.yaml section is a frozen dataclass, and each field is the one description of its
key: its type, the rule its value must pass in its annotation (`lr: Rate`, where
`Rate = Annotated[float, number(0, strict=True)]`) and a one-line comment. A key shared by
several sections is a field of one base class (Optim, Supervised, Adapter, Sampler), so it
has one rule. A key the class lacks is refused: it is a typo (the message offers the closest
key), or a param this code does not read.

Where the rules live: so that editing one section's rules re-runs only the stages that read
that section (dvc.yaml's code deps are the files a stage imports), this module holds the rules
several sections share, the walk and build of a section (`from_section`), and the sections
nearly every stage reads: `model`, `sampler` and `replicates` (with the claim chains). Each
other section's dataclass, with the rules only it uses, lives in a small module of its own,
imported only by the stages that read it:
train_config (the training keys every trainer shares, and `sft`), pretrain_config (`base`,
`teacher`), data_config (`problems`, `traces`, `teacher_traces`, `dedup`, `pairs`),
ipo_config, rl_config (`rloo`, `opd` and their arms), research_config (`diagnose`, `repair`,
`distill`), int_config, evaluate_config and analysis_config (`compare`, `report`). Only the
params check (cli.stage_params) reads them all, through core.sections, the map of every
section to its dataclass.

When a stage checks what: `io.load_params` checks the shared sections above; `from_section`
checks the values of the section it builds against their rules, its missing and unknown keys
and the relations between its values (`__post_init__`, e.g. `int.eval_seed` != `int.seed`);
stages check only relations across sections and files. The params check, the pipeline's
first stage, checks every section at once. params.yaml is the only place values live: no
field has a default.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
import typing
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Annotated, Any

from .errors import StageError

NAME = re.compile(r"[A-Za-z0-9_-]+")  # policy / source / condition names: they become
# shell arguments and path parts (`python stages/evaluate.py <name>`, reports/.../<name>.json)

Rule = Callable[[Any], str | None]  # None when the value is allowed, else what is allowed


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def integer(lo: int = 0, hi: int | None = None) -> Rule:
    top = "" if hi is None else f" and <= {hi}"
    return lambda v: None if is_int(v) and v >= lo and (hi is None or v <= hi) else \
        f"an integer >= {lo}{top}"


def number(lo: float = 0.0, strict: bool = False, hi: float | None = None) -> Rule:
    what = f"a number {'>' if strict else '>='} {lo:g}" + ("" if hi is None else f" and <= {hi:g}")
    return lambda v: None if is_number(v) and (v > lo if strict else v >= lo) and \
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
MaybeSeed = Annotated[int | None, optional(SEED)]  # null = none
Splits = Annotated[list[str], list_of(choice("test", "ood"), unique=True)]
# copies of task.REWARDS, data.traces.STYLES / STRATEGY_HINTS and model.TINY_PRESETS (as
# RL.loss_agg of train.losses.LOSS_AGGREGATIONS: config reads no torch / task code, and
# tests/test_config.py checks they agree); n_numbers, styles and strategies are rotations: a
# repeat weights an item on purpose
Reward = Annotated[str, choice("binary", "format", "shaped")]
Styles = Annotated[list[str], list_of(choice("direct", "search"))]
Preset = Annotated[str, choice("student", "teacher")]


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


def check_block(cls, block: dict[str, Any], path: str, out: dict[str, str]) -> None:
    """Each key of `block` (at dotted `path`) against `cls`'s field of that name, into `out`
    as {dotted key: its problem}.

    Not `leaves`: a mapping is one value where a rule takes it (repair_mix), and a key the
    class lacks is reported once, not per leaf under it, with the closest known key."""
    fields = rules(cls)
    for key, value in block.items():
        where = f"{path}.{key}"
        rule = fields.get(key)
        if rule is None:
            out[where] = (f"`{where}` is not a param this pipeline reads; "
                          f"{did_you_mean(key, fields, path + '.') or 'check the spelling '}"
                          f"(known in `{path}`: {', '.join(fields)})")
        elif isinstance(rule, Block):  # a nested block, checked key by key
            if isinstance(value, dict):
                check_block(rule.cls, value, where, out)
            elif value is not None:  # null: left to the stage that builds the block
                out[where] = f"`{where}` is {value!r}; allowed: a mapping of params"
        elif (why := rule(value)) is not None:
            out[where] = f"`{where}` is {value!r}; allowed: {why}"


def did_you_mean(key: str, known: Iterable[str], prefix: str = "") -> str:
    """"did you mean `<prefix><closest>`? " for the known name closest to a misspelt `key`
    (difflib's ratio of at least 0.6), or "" when none is that close."""
    close = difflib.get_close_matches(key, list(known), n=1)
    return f"did you mean `{prefix}{close[0]}`? " if close else ""


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
    A value its rule refuses, missing or unknown keys, or a bad relation between values
    (`__post_init__`) stop `stage` with one StageError that lists each, naming the key and
    the fix."""
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

    Every key of the block is checked against its field's rule, and a key the class lacks
    is refused (`check_block`); with `inherit`, the inherited section's keys too, named where
    they are (`rloo.lr`, not as the arm's). So a stage checks the sections it builds and no
    others; the params check has already listed every section's, and passes them as
    `reported`."""
    paths = [p for p in (inherit, path) if p is not None]
    blocks = [_block(params, p) for p in paths]
    if absent := [p for p, b in zip(paths, blocks) if b is None]:
        return None, [f"params.yaml has no `{p}:` section; add it (see README)." for p in absent]
    bad: dict[str, str] = {}
    for p, block in zip(paths, blocks):
        check_block(cls, block, p, bad)
    bad = {k: why for k, why in bad.items() if k not in reported}
    # the inherited section's keys as the merged block has them, under `path`
    skip = {*reported, *bad}
    skip |= {path + k[len(inherit):] for k in skip if inherit and _under(k, inherit)}
    block = merged(*blocks) if inherit else blocks[0]
    built, problems = _build(cls, block, path, construct and not bad, skip)
    return built, [*bad.values(), *problems]  # built: None when a value is bad


def _under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + ".")


def _block(params: dict[str, Any], path: str) -> dict[str, Any] | None:
    block = at(params, path)
    return block if isinstance(block, dict) else None


def _build(cls, block: dict[str, Any], path: str, construct: bool,
           reported: AbstractSet[str]) -> tuple[Any, list[str]]:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    problems = []
    unknown = set(block) - set(names)  # each reported by `check_block`, as `path.key`
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


# --------------------------------------------------------------------------- the shared sections
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


# The claim chains, each trained on its own seed list (`replicates.<chain>`, a subset of
# `replicates.seeds`, SFT's, unless every chain starts from one shared SFT): sft (SFT and its
# early checkpoint, their evaluations, diagnose), ipo (ipo, ipo_first), rloo (the RLOO arms),
# opd (the OPD arms), repair (repair, distill, distill_first) and int.
# Why lists per chain: a claim is decided by its chain's replicates, and the cheap chains can
# afford more of them than the costly ones (docs/statistics.md, "Planning the next run").
CHAINS = ("sft", "ipo", "rloo", "opd", "repair", "int")

# Held-out unsolved problems a replicate needs (`unsolved_heldout` in its details): the S3
# claim's test, whose unit is the replicate, resolves an effect of S3's size with about this
# many (the committed run's pool of 400 gave 36-42). Fewer: the int arm check fails, the claim
# reads "not tested". The pool is sized for ~250: problems.n_unseen, int.n_problems. Here, not
# in int_config: the report's int check reads it without depending on the RL rules.
MIN_HELDOUT = 200

# chain -> the chain whose policy of the same seed it starts from or compares with: the
# chains train from SFT (or its early checkpoint), but the OPD arms start from the RLOO policy
# of their seed (`opd.init: rloo`) and int compares with it (`int@<seed>` reads
# data/models/rloo/r<seed>), so each chain's seeds must be among its upstream's
UPSTREAM = {"ipo": "sft", "rloo": "sft", "opd": "rloo", "repair": "sft", "int": "rloo"}


def chain_path(chain: str, shared_sft: bool = False) -> list[str]:
    """The chain and those upstream of it, up to sft (int -> [int, rloo, sft]): a seed of the
    chain must be in each of their lists. With one shared SFT (`replicates.shared_sft`), SFT
    is no chain's upstream (int -> [int, rloo]; sft -> [sft])."""
    out = [chain]
    while out[-1] in UPSTREAM and not (shared_sft and UPSTREAM[out[-1]] == "sft"):
        out.append(UPSTREAM[out[-1]])
    return out


def seeds_key(chain: str) -> str:
    """The `replicates` key of a chain's seeds: `seeds` (SFT's, the union) or the chain's."""
    return "seeds" if chain == "sft" else chain


@dataclass(frozen=True)
class Replicates:
    """`replicates`: the training seeds each chain is trained and evaluated with."""
    seeds: Seeds  # SFT's (sft, its evaluation, diagnose): every chain's are among these, unless
    # the SFT is shared
    ipo: Seeds  # `ipo@<source>-<seed>`; `ipo_first` takes the first
    rloo: Seeds  # the RLOO arms (`rloo@<arm>-<seed>`); a first-replicate arm takes the first
    opd: Seeds  # the OPD arms (`opd@<variant>-<seed>`); each also in `rloo` (their init)
    repair: Seeds  # `repair@<seed>` and `distill@<condition>-<seed>`; `distill_first`: the first
    int: Seeds  # `int@<seed>`; each also in `rloo` (int compares with RLOO's policy)
    # null: replicate r of every chain starts from SFT r (the SFT draw is part of the unit);
    # a seed, `seeds`' only one: every chain starts from that one SFT (sft@<seed>), so a
    # replicate is a draw of what is trained after SFT, given one SFT, as S3 and S4 ran theirs
    shared_sft: MaybeSeed = None

    def __post_init__(self):
        problems = []
        if self.shared_sft is not None and self.seeds != [self.shared_sft]:
            problems.append(f"replicates.shared_sft is {self.shared_sft}, but replicates.seeds "
                            f"is {self.seeds}; with one SFT for every replicate set seeds to "
                            f"[{self.shared_sft}] (sft@{self.shared_sft} trains it), or set "
                            "shared_sft to null")
        for chain in CHAINS:
            key, seeds = seeds_key(chain), self.of(chain)
            if twice := sorted({s for s in seeds if seeds.count(s) > 1}):
                problems.append(f"replicates.{key} repeats seed(s) {twice} ({seeds}); list each "
                                "seed once (a seed trains one replicate)")
            up = UPSTREAM.get(chain)
            if up is None or (up == "sft" and self.shared_sft is not None):
                continue  # with a shared SFT, a chain's seeds need no SFT of their own
            if missing := [s for s in seeds if s not in self.of(up)]:
                what, it = (f"seed {missing[0]}", "it") if len(missing) == 1 else \
                    (f"seeds {missing}", "them")
                why = "SFT trains it first" if up == "sft" else \
                    f"`{chain}@<seed>` reads the {up} policy of its seed"
                problems.append(f"replicates.{key} has {what} not in replicates.{seeds_key(up)}; "
                                f"add {it} to replicates.{seeds_key(up)} ({why}) or drop {it}")
        if problems:
            raise ValueError("; ".join(problems))

    def sft_seed(self, replicate: int) -> int:
        """The SFT replicate that replicate `replicate` of a chain starts from: its own, or the
        shared one (`shared_sft`)."""
        return replicate if self.shared_sft is None else self.shared_sft

    def of(self, chain: str) -> list[int]:
        """The seeds of `chain` (one of CHAINS)."""
        if chain not in CHAINS:
            raise KeyError(f"unknown chain {chain!r}; chains: {', '.join(CHAINS)}")
        return getattr(self, seeds_key(chain))

    def chains(self) -> dict[str, list[int]]:
        """{chain: its seeds}, in CHAINS order."""
        return {chain: self.of(chain) for chain in CHAINS}


# the sections every stage may read as it starts (`io.load_params` checks them: a model
# stage's run settings read `model` and `sampler` as they are) -> their dataclasses; every
# other section is checked by the stage that builds it, and by the params check
SHARED: dict[str, type] = {"replicates": Replicates, "sampler": EvalSampler, "model": Model}


def shared_problems(params: dict[str, Any]) -> list[str]:
    """Every problem of the shared sections' values in `params`, as "`path`: ..." lines."""
    out: dict[str, str] = {}
    for section, cls in SHARED.items():
        if isinstance(block := params.get(section), dict):  # else: reported when built
            check_block(cls, block, section, out)
    return list(out.values())
