"""The headline numbers: what `dvc metrics show`, `dvc metrics diff` and `dvc exp show` list.

Every stage writes two JSON files (`io.write_metrics`): reports/details/<name>.json with
everything it measured (the report and compare.md are rendered from those) and
reports/metrics/<name>.json with the few numbers picked here. Only the latter are DVC
metrics, so a comparison of two runs reads as a short table, not thousands of rows.

Files of one kind share their keys and the file's path names its subject (a policy, a stage,
a replicate), so `dvc metrics show reports/metrics/eval` prints one row per policy and
`dvc metrics show reports/metrics/rloo` one row per replicate:

    reports/metrics/eval/rloo.json   pass@1, pass@1_sd, pass@16, pass@16_sd, ood_pass@16,
                                     ood_pass@16_sd, replicates: test pass@k as the mean over
                                     replicates and its across-replicate SD (compare)
    reports/metrics/rloo/r0.json     reward_mean_final, zero_std_frac_final, ...: replicate 0's
                                     rloo stage
    reports/metrics/compare.json     rloo_vs_sft.pass@1_diff, rloo_vs_sft.p_k1, ...: the
                                     pooled (replicate-unit) effect and p of every pair

Each function maps (stage output name, detail) to the headline. Only numbers are kept (no
strings, no nulls): what a param says belongs to `dvc params diff`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Detail = Mapping[str, Any]


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def pick(detail: Detail, keys: Iterable[str], rename: Mapping[str, str] | None = None) -> dict:
    """The listed keys of `detail` whose values are numbers (dotted keys reach into nested
    blocks), under their `rename`d names."""
    rename = rename or {}
    out = {}
    for key in keys:
        value: Any = detail
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if _is_number(value):
            out[rename.get(key, key)] = value
    return out


# --------------------------------------------------------------------------- data stages

def problems(name: str, d: Detail) -> dict:
    return pick(d, ("train.count", "test.count", "ood.count"),
                             {"train.count": "train", "test.count": "test", "ood.count": "ood"})


def traces(name: str, d: Detail) -> dict:
    return pick(d, ("count", "mean_chars", "repair.count"),
                                {"repair.count": "repair_examples"})


def teacher_traces(name: str, d: Detail) -> dict:
    by_n = {f"yield_by_operands.{n}": f"yield_{n}" for n in d.get("yield_by_operands", {})}
    return pick(d, ("samples", "kept", "yield", *by_n), by_n)


def dedup(name: str, d: Detail) -> dict:
    return pick(d, ("total", "kept", "removed", "split.train", "split.val"),
                          {"split.train": "train", "split.val": "val"})


def pairs(name: str, d: Detail) -> dict:
    """Pairs kept per source (after pairs.max_per_source), and built before the cap."""
    sources = [s for s, v in d.items() if isinstance(v, Mapping) and "pairs" in v]
    names = {**{f"{s}.pairs": s for s in sources},
             **{f"{s}.pairs_built": f"{s}_built" for s in sources}}
    return pick(d, (*names, "base_sample_pass@1"), names)


# --------------------------------------------------------------------------- training stages

def training(name: str, d: Detail) -> dict:
    """SFT-style stages (base, teacher, sft, distill/<condition>)."""
    return pick(d, ("examples", "loss_final", "token_acc_final", "val_loss",
                                    "val_token_acc"))


def ipo(name: str, d: Detail) -> dict:
    return pick(d, ("pairs_used", "loss_final", "pref_acc_final", "margin_final",
                                    "chosen_nll_final"))


RL_KEYS = ("pass_rate_final", "reward_mean_final", "zero_std_frac_final", "kl_final",
           "forward_kl_final", "entropy_final",
           "zero_std_groups", "groups",  # totals over the run: a two-proportion test's counts
           "tier_final", "tier_unlock_step")  # curriculum runs only


def rl(name: str, d: Detail) -> dict:
    """RLOO-style stages (rloo, opd, opd_ac): the final 10% of the run's diagnostics."""
    return pick(d, RL_KEYS)


# --------------------------------------------------------------------------- research stages

def diagnose(name: str, d: Detail) -> dict:
    return pick(d, ("pass@1", "pass@k", "all_fail", "zero_informative", "reward_contrast"))


def repair(name: str, d: Detail) -> dict:
    return {cond: pick(m, ("success_rate", "mcnemar_vs_resample.pvalue", "mcnemar_vs_F0.pvalue"),
                       {"mcnemar_vs_resample.pvalue": "p_vs_resample",
                        "mcnemar_vs_F0.pvalue": "p_vs_F0"})
            for cond, m in d.get("conditions", {}).items()}


def interventions(name: str, d: Detail) -> dict:
    """The `int` stage: pass@k on the problems the SFT policy never solved, per policy, and
    McNemar p of the intervention policy against each."""
    out = pick(d, ("unsolved", "interventions.kept", "rloo.zero_std_frac_final"),
               {"interventions.kept": "interventions_kept",
                "rloo.zero_std_frac_final": "rl_zero_std_frac_final"})
    out["unsolved_pass@k"] = {p: v["pass@k"] for p, v in d.get("pass_at_k", {}).items()
                              if _is_number(v.get("pass@k"))}
    out["p_int_vs"] = {key.removeprefix("int_vs_"): t["pvalue"]
                       for key, t in d.get("mcnemar", {}).items()}
    # the held-out unsolved problems: never trained on by any arm
    out["heldout_pass@k"] = {p: v["pass@k"] for p, v in d.get("heldout_pass_at_k", {}).items()
                             if _is_number(v.get("pass@k"))}
    out["heldout_p_int_vs"] = {key.removeprefix("int_vs_"): t["pvalue"]
                               for key, t in d.get("heldout_mcnemar", {}).items()}
    return out


# --------------------------------------------------------------------------- evaluation

def _ks(block: Detail) -> list[str]:
    return sorted((k for k in block if k.startswith("pass@")), key=lambda k: int(k[5:]))


def policy(pooled: Detail) -> dict:
    """reports/metrics/eval/<policy>.json, from compare's pooled block of one policy: test
    pass@ at the smallest and largest k (mean over replicates, and the across-replicate SD),
    the same at the largest k of every other split (ood_pass@16), and the replicate count.
    The same keys for every policy (a shared policy's SD is absent: one draw)."""
    out: dict[str, Any] = {}
    n = 0
    for split, block in pooled.items():
        ks = _ks(block)
        chosen = dict.fromkeys((ks[0], ks[-1])) if split == "test" else dict.fromkeys(ks[-1:])
        prefix = "" if split == "test" else f"{split}_"
        for k in chosen:
            out |= pick(block[k], ("mean", "sd"), {"mean": f"{prefix}{k}",
                                                   "sd": f"{prefix}{k}_sd"})
            n = max(n, block[k]["n"])
    out["replicates"] = n
    return out


def comparison(name: str, d: Detail, split: str = "test") -> dict:
    """compare.json: each pair's pooled (replicate-unit) pass@ difference and its t-test p at
    the smallest and largest k: `<a>_vs_<b>.pass@1_diff`, `<a>_vs_<b>.p_k1`, ..."""
    out: dict[str, dict] = {}
    for pair, splits in d.get("pairs", {}).items():
        block = splits.get(split, {})
        ks = sorted(block, key=lambda k: int(k[1:]))
        for k in dict.fromkeys(ks[:1] + ks[-1:]):
            out.setdefault(pair, {}).update(pick(
                block[k]["pooled"], ("mean", "pvalue"),
                {"mean": f"pass@{k[1:]}_diff", "pvalue": f"p_{k}"}))
    return out
