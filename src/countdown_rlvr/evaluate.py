"""Run a policy over the held-out problems, and compare policies pairwise (SPEC §5, §6).

    policy_ref(path)                    -> ModelRef (full model dir or peft adapter dir)
    evaluate_policy(ref, problems, ...) -> per-sample records DataFrame (RECORDS_SCHEMA)
    compare_policies(records, pairs)    -> JSON-able dict; compare_markdown(...) -> table

The records hold everything a later stage needs to re-score or pair samples without
sampling again: the problem (numbers, target), the completion text and the verdict.
Metrics are computed from them by `eval.summarize`, never from the model directly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .eval import RECORD_COLUMNS, pass_at_k, solved_within
from .io import atomic_path
from .model import REF_FILE, ModelRef, load_model, resolve_base
from .sampling import generate
from .stats import bootstrap_ci, mcnemar, pass_at_k_ci
from .task import get_reward, solve_prompt, verify

# One fixed schema: column types never depend on the content (e.g. a policy that solves
# nothing would otherwise get an all-null `expression` column of type null), so records of
# different policies and runs concatenate and compare cleanly.
RECORDS_SCHEMA = pa.schema([
    ("problem_id", pa.string()),
    ("split", pa.string()),
    ("n_numbers", pa.int64()),
    ("seed", pa.int64()),
    ("sample", pa.int64()),
    ("correct", pa.bool_()),
    ("failure", pa.string()),  # verifier failure code, null iff correct
    ("reward", pa.float64()),  # evaluate.reward applied to the verdict
    ("n_tokens", pa.int64()),  # completion tokens, the final EOS included
    ("numbers", pa.list_(pa.int64())),
    ("target", pa.int64()),
    ("completion", pa.string()),
    ("finish_reason", pa.string()),  # "stop" (EOS) or "length" (hit max_new_tokens)
    ("expression", pa.string()),  # text of the last <answer>, null when there is none
    ("value", pa.string()),  # exact value of the answer as "p" or "p/q", null if none
    ("arithmetic_errors", pa.int64()),  # wrong "a op b = c" claims in the reasoning
])
assert tuple(RECORDS_SCHEMA.names[:len(RECORD_COLUMNS)]) == RECORD_COLUMNS


# --------------------------------------------------------------------------- policies
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def policy_ref(path: str | Path) -> ModelRef:
    """The ModelRef of a policy identified by one path.

    A dir with adapter_config.json is a peft adapter: its base is the adapter config's
    `base_model_name_or_path` (a local dir, as written by our training stages, or a hub id).
    A dir with config.json is a full model (the base, or an `adapter: full` training output).
    A dir with REF.json is a pass-through base (`model.base` a hub id or another dir): it
    stands for the model it names, see `model.resolve_base`.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"policy dir {path} does not exist")
    if (path / REF_FILE).is_file():
        return ModelRef(resolve_base(path))
    adapter_cfg = path / "adapter_config.json"
    if adapter_cfg.exists():
        try:
            base = json.loads(adapter_cfg.read_text())["base_model_name_or_path"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise ValueError(f"{adapter_cfg} has no readable `base_model_name_or_path`") from exc
        if not base:
            raise ValueError(f"{adapter_cfg}: empty `base_model_name_or_path`")
        base = resolve_base(base)  # an adapter on the pass-through base dir
        # A local base that went missing would otherwise be looked up on the hub (offline
        # here) and fail obscurely. Hub ids are "name" or "org/name"; anything else is local.
        if not Path(base).exists() and not _HUB_ID.fullmatch(base):
            raise FileNotFoundError(f"adapter {path} needs its base model {base}, which is missing")
        if (Path(base) / "adapter_config.json").exists():
            raise ValueError(f"adapter {path} sits on another adapter ({base}); save the "
                             "policy merged or as an adapter on a full model")
        return ModelRef(str(base), str(path))
    if (path / "config.json").exists():
        return ModelRef(str(path))
    raise ValueError(f"{path} is neither a model dir (config.json) nor a peft adapter dir "
                     "(adapter_config.json)")


# --------------------------------------------------------------------------- evaluation
def _value_str(v) -> str | None:
    return None if v is None else str(v)  # Fraction: "7" or "7/2", exact and round-trippable


def score_samples(problem: dict[str, Any], samples: Sequence, seed: int,
                  reward_fn) -> list[dict[str, Any]]:
    """One record per sample of one problem: the verifier is the only judge."""
    rows = []
    for j, s in enumerate(samples):
        v = verify(s.text, problem["numbers"], problem["target"])
        rows.append({
            "problem_id": problem["id"], "split": problem["split"],
            "n_numbers": int(problem["n_numbers"]), "seed": int(seed), "sample": j,
            "correct": bool(v.correct), "failure": v.failure,
            "reward": float(reward_fn(v, problem["target"])), "n_tokens": int(s.n_tokens),
            "numbers": [int(x) for x in problem["numbers"]], "target": int(problem["target"]),
            "completion": s.text, "finish_reason": s.finish_reason,
            "expression": v.expression, "value": _value_str(v.value),
            "arithmetic_errors": int(v.arithmetic_errors),
        })
    return rows


def evaluate_policy(ref: ModelRef | tuple, problems: Sequence[dict[str, Any]], n: int,
                    sampler: dict[str, Any], seeds: Iterable[int], prompt_style: str,
                    reward: str = "binary", backend: str = "hf", batch_size: int = 64,
                    progress: bool = True) -> pd.DataFrame:
    """Sample `n` completions per problem for each seed and verify each one.

    `ref`: a ModelRef or an already loaded (model, tokenizer) pair. `problems`: rows of the
    problem files (id, split, numbers, target, n_numbers). Deterministic for a given
    (policy, problems, sampler, seeds, batch_size): sampling seeds each batch from
    (seed, batch index). Each split is sampled in its own call so that the test samples do
    not change when the OOD set changes size.
    """
    reward_fn = get_reward(reward)  # ValueError naming the valid rewards
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("need at least one sampling seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"sampling seeds must be distinct, got {seeds}")
    if not problems:
        raise ValueError("no problems to evaluate")
    if backend == "hf" and isinstance(ref, ModelRef):
        ref = load_model(ref.base, ref.adapter)  # load once for every seed and split
    splits = list(dict.fromkeys(p["split"] for p in problems))  # first-seen order
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        for split in splits:
            part = [p for p in problems if p["split"] == split]
            prompts = [solve_prompt(p["numbers"], p["target"], prompt_style) for p in part]
            if progress:
                print(f"  sampling {split}: {len(part)} problems x {n} samples, seed {seed}",
                      flush=True)
            out = generate(ref, prompts, n, sampler, seed, backend=backend,
                           batch_size=batch_size, progress=progress)
            for p, samples in zip(tqdm(part, desc="verify", disable=not progress), out):
                rows.extend(score_samples(p, samples, seed, reward_fn))
    return records_frame(rows)


def records_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows -> DataFrame with exactly the RECORDS_SCHEMA columns, in order."""
    return pa.Table.from_pylist(rows, schema=RECORDS_SCHEMA).to_pandas()


def write_records(df: pd.DataFrame, dest: str | Path) -> None:
    """Parquet with the fixed schema, written atomically (no half-written file on a crash)."""
    table = pa.Table.from_pandas(df[RECORDS_SCHEMA.names], schema=RECORDS_SCHEMA,
                                 preserve_index=False)
    with atomic_path(dest) as tmp:
        pq.write_table(table, tmp)


def read_records(path: str | Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


def extra_metrics(records: pd.DataFrame) -> dict[str, float]:
    """Per-sample diagnostics `eval.summarize` does not cover, on the test split."""
    test = records[records["split"] == "test"]
    return {
        "truncated": float((test["finish_reason"] == "length").mean()),  # max_new_tokens hit
        "arithmetic_errors_mean": float(test["arithmetic_errors"].mean()),
        "mean_reward": float(test["reward"].mean()),
    }


# --------------------------------------------------------------------------- comparison
def _per_problem_counts(records: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Samples and correct samples per problem, pooled over seeds (the bootstrap unit is the
    problem; more seeds are just more samples of it)."""
    g = records.groupby("problem_id")["correct"]
    return g.size().sort_index(), g.sum().astype(int).sort_index()


def policy_intervals(records: pd.DataFrame, ks: Iterable[int], n_boot: int, alpha: float,
                     seed: int) -> dict[str, dict[str, float]]:
    """pass@k with its bootstrap interval over problems, for each k <= samples per problem."""
    n, c = _per_problem_counts(records)
    group_size = _group_size(records)  # k beyond one seed's n would be extrapolation
    out = {}
    for k in ks:
        if k > group_size:
            continue
        point = float(sum(pass_at_k(int(a), int(b), k) for a, b in zip(n, c)) / len(n))
        lo, hi = pass_at_k_ci(n.to_numpy(), c.to_numpy(), k, n_boot=n_boot, alpha=alpha,
                              seed=seed)
        out[f"pass@{k}"] = {"value": point, "ci_low": lo, "ci_high": hi}
    return out


def compare_pair(rec_a: pd.DataFrame, rec_b: pd.DataFrame, ks: Iterable[int], seed: int,
                 exact: bool = True, n_boot: int = 1000, alpha: float = 0.05,
                 boot_seed: int = 0) -> dict[str, dict[str, float]]:
    """Paired comparison of two policies on the same problems, per k.

    Outcome of a problem = solved by one of samples 0..k-1 of sampling seed `seed`
    (k = 1: the pass@1 outcome of sample 0). McNemar on those paired outcomes; plus the
    paired bootstrap interval of the difference in solve rate (a - b). `pass_diff` is the
    difference in unbiased pass@k from every sample of every seed, with its paired bootstrap
    interval over problems: the same question asked of all n samples, not one (far tighter).
    """
    (n_a, c_a), (n_b, c_b) = _per_problem_counts(rec_a), _per_problem_counts(rec_b)
    out = {}
    for k in ks:
        a, b = solved_within(rec_a, k, seed), solved_within(rec_b, k, seed)
        if not a.index.equals(b.index):
            only = sorted(set(a.index) ^ set(b.index))[:5]
            raise ValueError("the two policies were evaluated on different problems "
                             f"(e.g. {only}); re-run their evaluate stages on the same problems")
        res = mcnemar(a, b, exact=exact)
        diff = a.astype(float) - b.astype(float)
        lo, hi = bootstrap_ci(diff.to_numpy(), n_boot=n_boot, alpha=alpha, seed=boot_seed)
        pass_diff = np.array([pass_at_k(int(n_a.loc[i]), int(c_a.loc[i]), k)
                              - pass_at_k(int(n_b.loc[i]), int(c_b.loc[i]), k) for i in a.index])
        p_lo, p_hi = bootstrap_ci(pass_diff, n_boot=n_boot, alpha=alpha, seed=boot_seed)
        out[f"k{k}"] = {
            "n_problems": len(a), "solved_a": float(a.mean()), "solved_b": float(b.mean()),
            "diff": float(diff.mean()), "diff_ci_low": lo, "diff_ci_high": hi,
            "a_only": res.b, "b_only": res.c, "statistic": res.statistic, "pvalue": res.pvalue,
            "pass_diff": float(pass_diff.mean()), "pass_diff_ci_low": p_lo,
            "pass_diff_ci_high": p_hi,
        }
    return out


def compare_policies(records: dict[str, pd.DataFrame], pairs: Sequence[Sequence[str]],
                     ks: Sequence[int], seed: int = 0, splits: Sequence[str] = ("test",),
                     exact: bool = True, n_boot: int = 1000, alpha: float = 0.05,
                     boot_seed: int = 0) -> dict[str, Any]:
    """The compare report: pass@k intervals for every policy in `records`, and a paired
    McNemar comparison for each [a, b] in `pairs`, per split (those present) and k."""
    for pair in pairs:
        if len(pair) != 2 or any(p not in records for p in pair):
            raise ValueError(f"pair {list(pair)} must name two of the evaluated policies "
                             f"{sorted(records)}")
    ks = [int(k) for k in ks]
    out: dict[str, Any] = {
        "settings": {"ks": ks, "seed": seed, "splits": list(splits), "exact": exact,
                     "n_boot": n_boot, "alpha": alpha, "pairs": [list(p) for p in pairs]},
        "policies": {}, "pairs": {},
    }

    def part(name: str, split: str) -> pd.DataFrame:
        return records[name][records[name]["split"] == split]

    for name in records:
        out["policies"][name] = {
            split: policy_intervals(part(name, split), ks, n_boot, alpha, boot_seed)
            for split in splits if not part(name, split).empty}
    for a, b in pairs:
        out["pairs"][pair_key(a, b)] = {
            split: compare_pair(part(a, split), part(b, split),
                                [k for k in ks if k <= _group_size(part(a, split), part(b, split))],
                                seed, exact, n_boot, alpha, boot_seed)
            for split in splits if not part(a, split).empty and not part(b, split).empty}
    return out


def pair_key(a: str, b: str) -> str:
    return f"{a}_vs_{b}"


def _group_size(*frames: pd.DataFrame) -> int:
    return min(int(f.groupby(["problem_id", "seed"]).size().min()) for f in frames)


def compare_markdown(report: dict[str, Any]) -> str:
    """Markdown tables of a compare_policies() report."""
    s = report["settings"]
    ci = f"{100 * (1 - s['alpha']):g}%"
    test = "exact binomial" if s["exact"] else "chi-square, continuity-corrected"
    lines = ["# Policy comparison", "",
             f"pass@k with {ci} bootstrap intervals over problems ({s['n_boot']} resamples).", "",
             "| policy | split | " + " | ".join(f"pass@{k}" for k in s["ks"]) + " |",
             "|---|---|" + "---|" * len(s["ks"])]
    for name, per_split in report["policies"].items():
        for split, vals in per_split.items():
            cells = [f"{v['value']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
                     if (v := vals.get(f"pass@{k}")) else "-" for k in s["ks"]]
            lines.append(f"| {name} | {split} | " + " | ".join(cells) + " |")
    lines += ["", (f"McNemar ({test}) on paired per-problem outcomes: solved within the first "
              f"k samples of seed {s['seed']} (k = 1: sample 0). a-only / b-only are the "
              "discordant counts; diff is the solve-rate difference a - b with its paired "
              f"{ci} bootstrap interval. pass@k diff is the difference in pass@k estimated from "
              f"all samples, with its paired {ci} bootstrap interval over problems."), ""]
    if not report["pairs"]:
        lines.append("No pairs configured (`compare.pairs` in params.yaml).")
    else:
        lines += [("| a | b | split | k | solved a | solved b | diff [CI] | a-only | b-only "
                  "| statistic | p | pass@k diff [CI] |"),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for a, b in s["pairs"]:
            for split, per_k in report["pairs"][pair_key(a, b)].items():
                for k, r in per_k.items():
                    lines.append(
                        f"| {a} | {b} | {split} | {k[1:]} | {r['solved_a']:.3f} | "
                        f"{r['solved_b']:.3f} | {r['diff']:+.3f} [{r['diff_ci_low']:+.3f}, "
                        f"{r['diff_ci_high']:+.3f}] | {r['a_only']} | {r['b_only']} | "
                        f"{r['statistic']:.3g} | {r['pvalue']:.3g} | {r['pass_diff']:+.3f} "
                        f"[{r['pass_diff_ci_low']:+.3f}, {r['pass_diff_ci_high']:+.3f}] |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- stage helpers
def producing_stage(path: str | Path, dvc_yaml: str | Path = "dvc.yaml") -> str | None:
    """Name of the plain dvc.yaml stage whose outs contain `path`, for error messages."""
    import yaml

    try:
        stages = (yaml.safe_load(Path(dvc_yaml).read_text()) or {}).get("stages", {})
    except (OSError, yaml.YAMLError):
        return None
    target = Path(path).as_posix().rstrip("/")
    for name, stage in stages.items():
        for out in (stage or {}).get("outs", []) if isinstance(stage, dict) else []:
            out = next(iter(out)) if isinstance(out, dict) else str(out)
            out = out.rstrip("/")
            if target == out or target.startswith(out + "/"):
                return name
    return None
