"""What every params.yaml value may be, checked when a stage reads params (`io.load_params`).

So a bad value stops a stage before it loads a model or samples anything, with one message
that names the key, the bad value and what is allowed; not after minutes of compute, and
not as a raw TypeError. A rule applies to every key of that name, in any section and at
any depth (so `rloo.sampler.temperature` and `int.rloo.lr` are checked too); `SECTION_RULES`
holds the few names whose meaning depends on the section. A key no rule knows is refused:
it is a typo, or a param this code does not read.

Stages still check the relations between values (e.g. `int.eval_seed` != `int.seed`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

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


def list_of(rule: Rule, min_len: int = 1) -> Rule:
    def check(v: Any) -> str | None:
        bad = not isinstance(v, list) or len(v) < min_len or any(rule(x) for x in v)
        return f"a list (at least {min_len}) of {rule(object())}" if bad else None
    return check


def int_range(lo: int = 0) -> Rule:
    return lambda v: None if isinstance(v, list) and len(v) == 2 and all(
        _int(x) and x >= lo for x in v) and v[0] <= v[1] else f"[low, high] integers >= {lo}"


def name_pairs(v: Any) -> str | None:
    return None if isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and not any(name(x) for x in p) for p in v) else \
        "a list of [a, b] pairs of policy names"


def policy_dirs(v: Any) -> str | None:
    return None if isinstance(v, dict) and v and all(
        name(k) is None and isinstance(d, str) and d for k, d in v.items()) else \
        "a mapping {policy name: model dir}, names of letters, digits, `_` and `-` only"


def modules(v: Any) -> str | None:
    return None if text(v) is None or list_of(text)(v) is None else \
        "a module name pattern such as all-linear, or a list of module names"


POS, COUNT, SEED = integer(1), integer(0), integer(0)
FRACTION, RATE = number(0, hi=1), number(0, strict=True)
RULES: dict[str, Rule] = {
    # sizes and counts
    "n_train": POS, "n_test": POS, "n_ood": COUNT, "count_train_solutions": COUNT,
    "n_problems": optional(POS), "corpus_size": POS, "n": POS, "k": POS, "base_k": POS,
    "n_attempts": POS, "n_continuations": POS, "traces_per_problem": POS, "n_boot": POS,
    "batch_size": POS, "gen_batch_size": POS, "micro_batch": optional(POS), "max_len": POS,
    "max_new_tokens": POS, "group_size": integer(2), "prompts_per_step": POS, "steps": POS,
    "max_steps": optional(POS), "epochs": optional(RATE), "ppo_epochs": POS, "log_every": POS,
    "time_budget_s": optional(RATE), "dpi": POS, "curriculum_target_bins": POS,
    "curriculum_window": POS,
    # seeds
    "seed": SEED, "init_seed": SEED, "eval_seed": SEED, "boot_seed": SEED,
    "seeds": list_of(SEED),
    # optimisation
    "lr": RATE, "weight_decay": number(0), "grad_clip": optional(RATE), "warmup_frac": FRACTION,
    "schedule": choice("cosine", "linear", "constant"),
    # losses and RL
    "beta": RATE, "rpo_alpha": number(0), "kl_coef": number(0), "is_clip": RATE,
    "entropy_coef": number(0), "distill_coef": number(0), "rl_coef": number(0),
    "distill_temperature": RATE, "curriculum": flag, "curriculum_threshold": FRACTION,
    "loss_agg": text, "reward": choice("binary", "format", "shaped"),
    "rl_problems": choice("unsolved", "all"), "teacher_strategy": optional(text),
    # sampling
    "backend": choice("hf", "vllm"), "temperature": RATE, "top_p": number(0, True, 1),
    "top_k": COUNT,
    # adapters and models
    "adapter": choice("full", "lora", "dora"), "lora_r": POS, "lora_alpha": RATE,
    "lora_dropout": number(0, hi=0.99), "target_modules": modules, "base": text,
    "init": choice("base", "scratch"), "tiny_preset": text, "prompt_style": choice("tiny", "chat"),
    "dtype": choice("float32", "bfloat16", "float16", "auto"), "threads": optional(POS),
    # data
    "n_numbers": list_of(integer(2, MAX_NUMBERS)), "ood_n_numbers": list_of(integer(2, MAX_NUMBERS)),
    "number_range": int_range(1), "target_range": int_range(0), "ood_target_range": int_range(0),
    "solutions": choice("construction", "solver"), "styles": list_of(choice("direct", "search")),
    "strategies": list_of(text), "facts_frac": FRACTION, "hint_frac": FRACTION, "pack": flag,
    "threshold": number(0, True, 1), "val_frac": number(0, hi=0.5), "filter": flag,
    "repair_frac": FRACTION, "heldout_frac": number(0, hi=0.9),
    # evaluation and statistics
    "policies": policy_dirs, "splits": list_of(choice("test", "ood")), "ks": list_of(POS),
    "budgets": list_of(POS), "pairs": name_pairs, "exact": flag, "alpha": number(0, True, 0.5),
    "reference": name, "best_of_n_policy": optional(name), "require_all": flag,
    # names that become stage names, shell arguments and paths
    "sources": list_of(name), "conditions": list_of(name),
    # nested blocks, checked key by key (rloo.sampler, int.rloo, pairs.base_sampler, ...)
    "sampler": None, "base_sampler": None, "rloo": None, "sft": None,
}
SECTION_RULES: dict[tuple[str, str], Rule] = {
    ("traces", "per_problem"): POS,  # traces per problem
    ("pairs", "per_problem"): POS,  # pairs per problem and source
    ("pairs", "max_per_source"): lambda v: None if v is None or v == "min" or POS(v) is None
    else "a positive integer, min (the smallest source's count) or null",
    ("dedup", "per_problem"): flag,  # compare only traces of the same problem
    ("dedup", "sources"): list_of(choice("solver", "teacher", "repair")),
}
# sections whose keys are all known here: an unknown key is refused, naming the known ones
CLOSED = {"problems": ("seed", "n_train", "count_train_solutions", "n_test", "n_ood",
                       "n_numbers", "number_range", "target_range", "ood_n_numbers",
                       "ood_target_range")}


def problems_in(params: dict[str, Any]) -> list[str]:
    """Every problem in `params`, as "`path`: value is bad; allowed: ..." lines."""
    out = []

    def walk(section: str, path: str, block: dict[str, Any]) -> None:
        known = CLOSED.get(path)
        for key, value in block.items():
            where = f"{path}.{key}"
            if known is not None and key not in known:
                out.append(f"`{where}` is not a param of `{path}` (known: {', '.join(known)})")
                continue
            rule = SECTION_RULES.get((section, key), RULES.get(key, _unknown))
            if rule is _unknown:
                out.append(f"`{where}` is not a param this pipeline reads; check the spelling")
            elif rule is None:  # a nested block
                if isinstance(value, dict):
                    walk(section, where, value)
                elif value is not None:
                    out.append(f"`{where}` is {value!r}; allowed: a mapping of params")
            elif (why := rule(value)) is not None:
                out.append(f"`{where}` is {value!r}; allowed: {why}")

    for section, block in params.items():
        if isinstance(block, dict):
            walk(section, section, block)
    return out


def _unknown(_: Any) -> str:
    return "a known param"
