"""The run's results as the report reads them: reports/details/ and dvclive/ only, per replicate.

    report_policies(...)                 -> the report's policies, in order
    expected_inputs(policies, ...)       -> {details file: stage that writes it}
    load_inputs(details, dvclive, ...)   -> Inputs

A replicated stage writes `<stage>/r<seed>.json` (and `dvclive/<run>/r<seed>/`), a shared one
`<stage>.json` (an evaluation of a shared policy: `eval/<policy>/shared.json`). `Inputs.data`
keys every file by its one-draw name (`rloo.json`, `eval/rloo.json`) and holds the FIRST
replicate's copy: the tables that show one training draw read it and say so. `Inputs.runs`
holds every replicate's copy, for what is pooled over replicates (the seed claims, the
policies table); `Inputs.compare` is compare.json whole (per-replicate and pooled results),
while `data["compare.json"]` is its first replicate's per-run block. An evaluation's
other splits (the development split `dev` of `evaluate.dev_policies`) are blocks of the same
file: `Inputs.split_of(policy, split)` gives each replicate's. Each chain has its own
seeds (`replicates.<chain>`): `Inputs.chains` holds each chain's tags, so an arm is checked,
and a claim planned, on its own chain's replicates.

Torch-free, and a leaf below report.py, figures.py and claims/ (none imports another's
inputs code), so the three never disagree on a file, a run or a panel.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.arms import ARMS
from ..core.config import CHAINS
from ..data.pairs import SOURCES as IPO_SOURCES  # the pair sources (ipo.sources)
from ..task.prompts import REPAIR_LABELS
from .chains import SFT_POLICIES, evaluation_stage
from .compare import NA  # the one "not available" cell of every table

RL_RUNS = tuple(a.name for a in ARMS if a.curves)  # runs with per-step dvclive curves, required
SECONDARY_RUNS = tuple(a.name for a in ARMS if not a.curves)  # read when present
# dvclive metric (TSV file stem, under any sub-folder such as train/) -> panel title
CURVES = {"reward_mean": "reward mean", "zero_std_frac": "fraction of zero-std groups",
          "kl": "KL to reference (k3)", "entropy": "entropy"}
REQUIRED_CURVES = ("reward_mean", "zero_std_frac", "entropy")  # kl only when rloo.kl_coef > 0
SHARED = "shared"
# read when present, never required: the secondary arms, the teacher's strategies and the
# teacher's own training (design differences)
EXTRA_INPUTS = (*(f"{run}.json" for run in SECONDARY_RUNS), "teacher_traces.json",
                "teacher.json", "pairs.json")


class MissingInputs(ValueError):
    """require_all and some measurement files are absent; .missing maps each to its stage."""

    def __init__(self, missing: dict[str, str]):
        self.missing = missing
        lines = "\n".join(f"  {path}  (stage {stage})" for path, stage in missing.items())
        super().__init__(f"{len(missing)} report input(s) missing:\n{lines}")


@dataclass
class Inputs:
    data: dict[str, Any]  # one-draw file name -> the first replicate's (or the shared) JSON
    curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]  # run -> metric -> steps, values
    missing: dict[str, str]  # file -> stage that writes it
    policies: list[str]  # report order
    stages: dict[str, str] = field(default_factory=dict)  # every expected file -> its stage
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # file -> tag -> JSON
    replicates: list[str] = field(default_factory=list)  # r<seed> tags, the first one first
    compare: dict[str, Any] | None = None  # compare.json whole
    run_curves: dict[str, dict[str, dict]] = field(default_factory=dict)  # run -> tag -> curves
    chains: dict[str, list[str]] = field(default_factory=dict)  # chain -> its r<seed> tags;
    # empty when the seed lists are not known (every chain: `replicates`)
    per_problem: dict[str, pd.DataFrame] = field(default_factory=dict)  # split -> compare's
    # per-problem records (per_problem/<split>.csv); empty in details written before them
    shared_sft: bool = False  # every replicate started from one SFT (`replicates.shared_sft`)

    def tags_of(self, chain: str) -> list[str]:
        """The replicate tags of `chain` (config.CHAINS)."""
        return list(self.chains.get(chain, self.replicates))

    def seeds_of(self, chain: str) -> list[int]:
        """The seeds of `chain`, as `replicates.<chain>` lists them."""
        return [int(t[1:]) for t in self.tags_of(chain) if t[1:].isdigit()]

    @property
    def first(self) -> str:
        """The replicate the one-draw tables show."""
        return self.replicates[0] if self.replicates else SHARED

    def split_of(self, policy: str, split: str) -> dict[str, dict]:
        """{replicate: its `split` block (pass@1, pass@16, ...)} of a policy's evaluation, for
        the replicates that sampled that split (e.g. `dev`, the development split
        `evaluate.dev_policies` adds; details written before it have none). With one SFT for
        every replicate, SFT's one draw stands in each."""
        runs = self.runs.get(f"eval/{policy}.json", {})
        out = {t: m[split] for t, m in runs.items() if isinstance(m.get(split), dict)}
        if self.shared_sft and policy in SFT_POLICIES and len(out) == 1:
            return dict.fromkeys(self.replicates, next(iter(out.values())))  # one SFT draw
        return out

    def evals(self) -> dict[str, dict]:
        """Eval details of the policies that have them (first replicate), in report order."""
        return {p: m for p in self.policies
                if (m := self.data.get(f"eval/{p}.json")) is not None and "test" in m}


def report_policies(configured=(), ipo_sources=IPO_SOURCES, distill=tuple(REPAIR_LABELS),
                    arms=None) -> list[str]:
    """The seeds' policies of this configuration, then any other configured one (e.g. a
    teacher), in params order. `int` only when configured: its test-split evaluation is
    opt-in (`evaluate.int_policies`), since the S3 claim reads the int stage's own problems;
    `sft_early` (sft.early_step) only when configured, after sft."""
    int_ = ("int",) if "int" in configured else ()
    early = ("sft_early",) if "sft_early" in configured else ()
    # `arms`: the arms this run trains (chains.trained_arms; None: every one); the others
    # render "not run"
    rl = tuple(r for r in RL_RUNS if arms is None or r in arms)
    seeds = ("base", "sft", *early, *(f"ipo_{s}" for s in ipo_sources), *rl, *int_,
             *(f"distill_{c}" for c in distill))
    return [*seeds, *(p for p in configured if p not in seeds)]


def expected_inputs(policies, ipo_sources=IPO_SOURCES, distill=tuple(REPAIR_LABELS)) -> dict[str, str]:
    """Every measurement file (one-draw name, relative to reports/details) -> its stage."""
    files = {f"eval/{p}.json": evaluation_stage(p) for p in policies}
    files["compare.json"] = "compare"
    files["sft.json"] = "sft"
    files |= {f"ipo/{s}.json": f"ipo@{s}" for s in ipo_sources}
    files |= {f"{run}.json": run for run in RL_RUNS if run in policies}
    files |= {"diagnose.json": "diagnose", "repair.json": "repair", "int.json": "int"}
    files |= {f"distill/{c}.json": f"distill@{c}" for c in distill}
    return files


def read_curves(run_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The CURVES metrics dvclive wrote under run_dir/plots/metrics (one TSV per metric,
    columns `step` and the metric's leaf name; nested names become sub-folders)."""
    out = {}
    for tsv in sorted((run_dir / "plots" / "metrics").rglob("*.tsv")):
        if tsv.stem in CURVES and tsv.stem not in out:  # sorted: train/kl before zz/kl
            with open(tsv, newline="") as fh:
                rows = list(csv.DictReader(fh, delimiter="\t"))
            out[tsv.stem] = (np.array([int(r["step"]) for r in rows]),
                             np.array([float(r[tsv.stem]) for r in rows]))
    return out


def _tags(details: Path, replicates) -> tuple[list[str], dict[str, list[str]]]:
    """(every replicate tag, {chain: its tags}): r<seed> for `replicates` (params order: a
    mapping {chain: seeds} as Replicates.chains() gives, or one list for every chain), else the
    tags on disk (and no chain's own)."""
    if isinstance(replicates, dict):
        chains = {c: [f"r{s}" for s in replicates[c]] for c in CHAINS if c in replicates}
        if "sft" not in chains:
            return [f"r{s}" for s in dict.fromkeys(
                s for seeds in replicates.values() if isinstance(seeds, list) for s in seeds)], \
                chains
        # SFT's, then (with one shared SFT) the other chains' in seed order
        sft = chains["sft"]
        rest = sorted({t for tags in chains.values() for t in tags} - set(sft),
                      key=lambda t: int(t[1:]))
        return [*sft, *rest], chains
    if replicates:
        return [f"r{s}" for s in replicates], {}
    found = {p.stem for p in details.rglob("r*.json") if p.stem[1:].isdigit()}
    return sorted(found, key=lambda t: int(t[1:])), {}


def _read_runs(details: Path, rel: str, tags: list[str]) -> dict[str, Any]:
    """tag -> JSON of one-draw file `rel`: <rel>/<tag>.json per replicate, <rel>/shared.json,
    or `rel` itself for a stage run once."""
    base = details / rel.removesuffix(".json")
    runs = {t: json.loads(f.read_text()) for t in [*tags, SHARED]
            if (f := base / f"{t}.json").is_file()}
    if not runs and (details / rel).is_file():
        runs[SHARED] = json.loads((details / rel).read_text())
    return runs


def load_inputs(details_dir: str | Path, dvclive_dir: str | Path, configured=(),
                ipo_sources=IPO_SOURCES, distill=tuple(REPAIR_LABELS),
                replicates=None, shared_sft: bool = False, arms=None) -> Inputs:
    """Read whatever exists of the report's inputs; record the expected ones that are absent.

    Expected: the files of this configuration (configured policies, `ipo_sources`, `distill`
    conditions) and the RLOO curves of REQUIRED_CURVES, in the first replicate at least (a
    policy evaluated for the first replicate only is complete with it). `replicates`: the
    seeds of each chain ({chain: seeds}, `replicates` of params.yaml: the SFT seeds are the
    union unless `shared_sft`: every replicate started from one SFT), or one list for every
    chain; None reads the tags found on disk. `arms`: the RL arms this run trains
    (chains.trained_arms; None: every arm), the others' rows read "not run".
    """
    details, dvclive_dir = Path(details_dir), Path(dvclive_dir)
    tags, chains = _tags(details, replicates)
    policies = report_policies(configured, ipo_sources, distill, arms)
    stages = expected_inputs(policies, ipo_sources, distill)
    optional = expected_inputs(report_policies(configured, arms=arms), IPO_SOURCES,
                               tuple(REPAIR_LABELS))
    optional |= dict.fromkeys(EXTRA_INPUTS, "")
    runs = {rel: r for rel in {**optional, **stages} if (r := _read_runs(details, rel, tags))}
    compare = runs.pop("compare.json", {}).get(SHARED)
    first = tags[0] if tags else SHARED
    data = {rel: r.get(first, r.get(SHARED, next(iter(r.values())))) for rel, r in runs.items()}
    if compare is not None:
        per_run = compare.get("replicates", {})
        data["compare.json"] = per_run.get(first) or next(iter(per_run.values()), compare)
    run_curves = {run: {t: c for t in tags if (c := read_curves(dvclive_dir / run / t))}
                  for run in RL_RUNS}
    curves = {run: by_tag.get(first) or next(iter(by_tag.values()))
              for run, by_tag in run_curves.items() if by_tag}
    missing = {(details / rel).as_posix(): stage
               for rel, stage in stages.items() if rel not in data}
    rloo_first = (chains.get("rloo") or tags or [SHARED])[0]
    missing |= {(dvclive_dir / f"rloo/{rloo_first}/plots/metrics" / f"**/{m}.tsv").as_posix():
                "rloo" for m in REQUIRED_CURVES
                if "rloo" in policies and m not in curves.get("rloo", {})}
    per_problem = {f.stem: pd.read_csv(f, dtype={"problem_id": str, "replicate": str})
                   for f in sorted((details / "per_problem").glob("*.csv"))}
    return Inputs(data, curves, missing, policies, stages, runs, tags, compare,
                  {r: c for r, c in run_curves.items() if c}, chains, per_problem, shared_sft)


# --------------------------------------------------------------------------- formatting

def fmt(x, nd: int = 3) -> str:
    if x is None:
        return NA
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def get(d: dict | None, *path, default=None):
    """d[path[0]][path[1]]..., `default` where any step is missing."""
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d

