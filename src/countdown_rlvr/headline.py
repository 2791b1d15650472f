"""The headline numbers: what `dvc metrics show`, `dvc metrics diff` and `dvc exp show` list.

Every stage writes two JSON files (`io.write_metrics`): reports/details/<name>.json with
everything it measured (the report and compare.md are rendered from those) and
reports/metrics/<name>.json with the few numbers picked here. Only the latter are DVC
metrics, so a comparison of two runs reads as a short table, not thousands of rows.

Each headline file holds one top-level key naming its subject, a stage or a policy, so a
metric name is unique across the repo and means one thing:

    rloo.pass@1              evaluate@rloo: test-split pass@1
    rloo.pass@1_ci_low       compare: its bootstrap interval over problems
    rloo.reward_mean_final   the rloo stage: mean reward over the last 10% of its steps
    rloo_vs_sft.p_k1         compare: paired permutation p of rloo vs sft from all samples
    rloo_vs_sft.mcnemar_p_k1 compare: McNemar p on sample 0 (S0's test)

Each function maps (stage output name, detail) to the headline. Only numbers are kept (no strings, no nulls): what a param says belongs to `dvc params diff`.
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


def subject(name: str) -> str:
    """The namespace of a stage's headline: its policy name (ipo/scripted -> ipo_scripted)."""
    return name.replace("/", "_")


# --------------------------------------------------------------------------- data stages

def problems(name: str, d: Detail) -> dict:
    return {subject(name): pick(d, ("train.count", "test.count", "ood.count"),
                             {"train.count": "train", "test.count": "test", "ood.count": "ood"})}


def traces(name: str, d: Detail) -> dict:
    return {subject(name): pick(d, ("count", "mean_chars", "repair.count"),
                                {"repair.count": "repair_examples"})}


def teacher_traces(name: str, d: Detail) -> dict:
    by_n = {f"yield_by_operands.{n}": f"yield_{n}" for n in d.get("yield_by_operands", {})}
    return {subject(name): pick(d, ("samples", "kept", "yield", *by_n), by_n)}


def dedup(name: str, d: Detail) -> dict:
    return {subject(name): pick(d, ("total", "kept", "removed", "split.train", "split.val"),
                          {"split.train": "train", "split.val": "val"})}


def pairs(name: str, d: Detail) -> dict:
    """Pairs kept per source (after pairs.max_per_source), and built before the cap."""
    sources = [s for s, v in d.items() if isinstance(v, Mapping) and "pairs" in v]
    names = {**{f"{s}.pairs": s for s in sources},
             **{f"{s}.pairs_built": f"{s}_built" for s in sources}}
    return {subject(name): pick(d, (*names, "base_sample_pass@1"), names)}


# --------------------------------------------------------------------------- training stages

def training(name: str, d: Detail) -> dict:
    """SFT-style stages (base, teacher, sft, distill/<condition>)."""
    return {subject(name): pick(d, ("examples", "loss_final", "token_acc_final", "val_loss",
                                    "val_token_acc"))}


def ipo(name: str, d: Detail) -> dict:
    return {subject(name): pick(d, ("pairs_used", "loss_final", "pref_acc_final", "margin_final",
                                    "chosen_nll_final"))}


RL_KEYS = ("pass_rate_final", "reward_mean_final", "zero_std_frac_final", "kl_final",
           "forward_kl_final", "entropy_final",
           "zero_std_groups", "groups",  # totals over the run: a two-proportion test's counts
           "tier_final", "tier_unlock_step")  # curriculum runs only


def rl(name: str, d: Detail) -> dict:
    """RLOO-style stages (rloo, opd, opd_ac): the final 10% of the run's diagnostics."""
    return {subject(name): pick(d, RL_KEYS)}


# --------------------------------------------------------------------------- research stages

def diagnose(name: str, d: Detail) -> dict:
    return {subject(name): pick(d, ("pass@1", "pass@k", "all_fail", "zero_informative",
                                 "reward_contrast"))}


def repair(name: str, d: Detail) -> dict:
    return {subject(name): {cond: pick(m, ("success_rate", "mcnemar_vs_resample.pvalue",
                                           "mcnemar_vs_F0.pvalue"),
                                       {"mcnemar_vs_resample.pvalue": "p_vs_resample",
                                        "mcnemar_vs_F0.pvalue": "p_vs_F0"})
                            for cond, m in d.get("conditions", {}).items()}}


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
    return {subject(name): out}


# --------------------------------------------------------------------------- evaluation

def _pass_keys(block: Detail) -> list[str]:
    return sorted((k for k in block if k.startswith("pass@")), key=lambda k: int(k[5:]))


def evaluation(name: str, d: Detail) -> dict:
    """evaluate@<policy>: test pass@ of the smallest and largest k, pass@1 per operand count,
    and the largest-k pass@ of every other split (e.g. OOD)."""
    out = {}
    test = d.get("test", {})
    ks = _pass_keys(test)
    if ks:
        out |= pick(test, dict.fromkeys((ks[0], ks[-1])))
        out |= {f"{ks[0]}_{sub}": v[ks[0]] for sub, v in test.items()
                if isinstance(v, Mapping) and _is_number(v.get(ks[0]))}
    for split, block in d.items():
        if split != "test" and isinstance(block, Mapping) and (ks := _pass_keys(block)):
            out |= pick(block, (ks[-1],), {ks[-1]: f"{split}_{ks[-1]}"})
    return {name.removeprefix("eval/"): out}


def comparison(name: str, d: Detail, split: str = "test") -> dict:
    """compare (no namespace of its own: its subjects are the policies and the pairs): each
    policy's bootstrap interval of pass@ at the smallest and largest k, and each pair's
    all-sample paired permutation p (`p_k<k>`, the headline test) and McNemar p on the first
    k samples of one seed (`mcnemar_p_k<k>`, S0's test) at both, plus the all-sample pass@
    difference at the smallest k with its interval."""
    out: dict[str, dict] = {}
    for policy, splits in d.get("policies", {}).items():
        block = splits.get(split, {})
        ks = _pass_keys(block)
        out[policy] = {f"{k}_{end}": block[k][end] for k in dict.fromkeys(ks[:1] + ks[-1:])
                       for end in ("ci_low", "ci_high")}
    for pair, splits in d.get("pairs", {}).items():
        block = splits.get(split, {})
        ks = sorted(block, key=lambda k: int(k[1:]))
        if not ks:
            continue
        first = block[ks[0]]
        for k in dict.fromkeys((ks[0], ks[-1])):
            out.setdefault(pair, {}).update(pick(
                block[k], ("pass_diff_pvalue", "pvalue"),
                {"pass_diff_pvalue": f"p_{k}", "pvalue": f"mcnemar_p_{k}"}))
        out[pair] |= pick(first, ("pass_diff", "pass_diff_ci_low", "pass_diff_ci_high"),
                          {key: key.replace("pass_diff", f"pass@{ks[0][1:]}_diff")
                           for key in ("pass_diff", "pass_diff_ci_low", "pass_diff_ci_high")})
    return out
