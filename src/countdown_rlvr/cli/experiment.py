"""The pipeline in one table: every dvc.yaml stage, in run order. dvc.yaml is made from it.

    python -m countdown_rlvr.cli.experiment            # print dvc.yaml
    python -m countdown_rlvr.cli.experiment --write    # write it and its map, docs/dag.md
    python -m countdown_rlvr.cli.experiment --check    # exit 1 when either is stale (as
                                                       # tests/test_experiment.py checks)

A stage's entry below says what only it can say: its script (stages/<script>.py) and
arguments, its matrix, the data it reads and the files it writes. The rest is derived:

- code deps: the library files its script imports (countdown_rlvr.cli.imports), file by file;
- params: what its config is built from once overrides are resolved
  (countdown_rlvr.cli.stage_params): a section it reads whole by name (`sft`), else the keys it
  reads (`ipo.beta`, ...); over an arm matrix (rloo, opd), `${item.arm}` and the keys of the
  inherited section that no arm overrides (so `-S rloo.reward=shaped` re-runs the arms that
  read it, not an arm that sets its own).

The arms (countdown_rlvr.core.arms) make their stages: a matrix over a script's arms of every replicate
(`rloo@<arm>-1`), one per policy they start from (Arm.init: a matrix has one list of inputs,
so the arms from the early SFT checkpoint have a matrix named after the first of them), a
stage of its own for an arm of the first replicate only, their model artifacts and their
curves in `dvc plots`: the arms an evaluate list names (analysis.chains.trained_arms), so a
run drops an arm by leaving it out of those lists. A stage or path may be gated on a param
(`when`: sft's early checkpoint and its evaluation exist only with sft.early_step set).
dvc.yaml is made from params.yaml: such an edit needs `--write` (the params check says so).

Every replicated stage is a DVC matrix over the seeds of its chain (config.CHAINS): sft and
diagnose over `replicates.seeds`, the others over their chain's list (`replicates.rloo`, ...,
each a subset of it), so a seed added to one chain adds only that chain's stages; the
`_first` stages (and the first-replicate arms) run their chain's first seed only. Each
training stage has its evaluation, `evaluate_<stage>`, over the same matrix
(`ipo@easyneg-19` -> `evaluate_ipo@easyneg-19`): every policy is sampled on the seeds
of the chain that trains it. Arguments that interpolate `${item...}` are quoted: a name never
reaches the shell as code. The training stages' cmd starts with `${launcher}` instead of
`python` (params.yaml: `python`, or `accelerate launch ...` for several processes), a command
by design, which the params check keeps to plain words.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections import Counter
from dataclasses import dataclass, field, replace

import yaml

from ..analysis.chains import trained_arms
from ..core.arms import arms
from ..core.config import at, seeds_key
from ..core.io import read_params, write_text
from . import stage_map
from .imports import ROOT, closure
from .stage_params import ARMS, leaves, reads, resolved_keys

OUT = ROOT / "dvc.yaml"
WIDTH = 100  # dvc.yaml's comments are wrapped to fit (a long interpolated path cannot be)
SEED = "${item.seed}"
# what runs a training script: params.yaml's top-level `launcher` (`python`, the default, or
# `accelerate launch ...` for several processes); the other stages run with plain `python`
LAUNCHER = "${launcher}"


def seeds(chain: str) -> str:
    """A chain's seed list as dvc.yaml interpolates it: `${replicates.rloo}`."""
    return f"${{replicates.{seeds_key(chain)}}}"


def first(chain: str) -> str:
    """A chain's first seed as dvc.yaml interpolates it in a path: `${replicates.rloo.0}`."""
    return f"${{replicates.{seeds_key(chain)}.0}}"


def first_seed(chain: str) -> list[str]:
    """A chain's first seed, as a one-item matrix list: its secondary arms run it only."""
    return [first(chain)]


@dataclass(frozen=True)
class Out:
    """A dvc.yaml path with its options; `note` becomes its end-of-line comment."""
    path: str
    note: str = ""
    cache: bool = True
    persist: bool = False
    when: str = ""  # a params key: the path is listed only when its value is not null


@dataclass(frozen=True)
class Stage:
    name: str
    note: str = ""  # the comment on the stage's line
    chain: str = ""  # a replicated stage: the chain whose seeds its matrix runs over
    script: str = ""  # stages/<script>.py; default: the stage's name
    args: tuple[str, ...] = ()
    matrix: dict[str, str | list[str]] = field(default_factory=dict)
    foreach: str = ""  # a `foreach` over a list (the stage's `do:` holds the rest)
    gated: bool = False  # a root of the graph: waits for check_params
    inputs: tuple[str | Out, ...] = ()  # data deps (the code deps are derived)
    outs: tuple[str | Out, ...] = ()
    metrics: tuple[str | Out, ...] = ()
    code: tuple[str, ...] = ()  # code deps, when not the script's imports
    all_params: bool = False  # depends on all of params.yaml
    launched: bool = False  # a trainer: its cmd starts with params.yaml's `launcher` (LAUNCHER)
    when: str = ""  # a params key: the stage exists only when its value is not null


def present(when: str, params: dict) -> bool:
    """Whether a `when`-gated stage or path is in dvc.yaml for `params` (dvc.yaml is made from
    params.yaml: changing such a key to or from null needs `--write`)."""
    return not when or at(params, when) is not None


def details(name: str) -> Out:
    """The stage's measurements, in git: reports/details/<name>.json."""
    return Out(f"reports/details/{name}.json", cache=False)


def timing(name: str) -> Out:
    """The stage's wall times, in git: reports/timings/<name>.json. An out (its hash in
    dvc.lock) so that `dvc exp run` commits it with the experiment; no stage reads it."""
    return Out(f"reports/timings/{name}.json", cache=False)


def model(name: str, seed: str | None = SEED) -> str:
    return f"data/models/{name}" + (f"/r{seed}" if seed else "")


def trained(name: str, logs: str = "", replicated: bool = True) -> tuple[Out, ...]:
    """What a training stage writes: the model, its per-step curves, its details and its wall
    times, under data/models/<name>, dvclive/<logs> and reports/{details,timings}/<logs>
    (logs: the name), per seed."""
    r, logs = (f"/r{SEED}" if replicated else ""), logs or name
    return (Out(model(name, SEED if replicated else None)),
            Out(f"dvclive/{logs}{r}", "per-step curves (TSV), in git for `dvc plots`",
                cache=False),
            details(f"{logs}{r}"), timing(f"{logs}{r}"))


CHECKED = Out("reports/details/check_params.json", "runs first")
TRAIN = "data/problems/train.jsonl"
TEST_SPLITS = ("data/problems/test.jsonl", "data/problems/ood.jsonl")
# the development split: a dep of an evaluation stage only when it samples a policy of
# evaluate.dev_policies (dvc.yaml is made from params.yaml: an edit of that list, written with
# `--write`, adds or drops this dep, which re-runs exactly those stages)
DEV = Out("data/problems/dev.jsonl", "evaluate.dev_policies: also sampled on the dev split")
SFT = model("sft")
SKILL_PROBLEMS = Out(TRAIN, "the skill check samples the problems after the pairs'")
BASE, TEACHER = "data/models/base", "data/models/teacher"  # shared by every replicate


# `sft` also saves its policy at sft.early_step (when set) as `sft_early`: S0's operating point
EARLY, EARLY_STEP = "sft_early", "sft.early_step"
SFT_STAGE = Stage(
    "sft", "the student, once per seed of replicates.seeds (every chain's are among them)",
    chain="sft", matrix={"seed": seeds("sft")}, args=(SEED,),
    inputs=("data/sft/train.jsonl", "data/sft/val.jsonl", BASE),
    outs=(*trained("sft"), Out(model(EARLY), "the policy at sft.early_step", when=EARLY_STEP)),
    launched=True)


def evaluation(stage: Stage, policy: str, note: str = "", matrix: dict | None = None,
               name: str = "", when: str = "") -> Stage:
    """`evaluate_<stage>` (or `evaluate_<name>`: a second policy the stage saves): the policy
    `stage` trains (`policy`, a name that may interpolate its matrix items:
    `ipo_${item.source}`) sampled over the same matrix, so on the seeds of its chain, which
    the script checks the seed against."""
    note = note or f"samples what `{stage.name}` trains, on the same seeds " \
        f"(replicates.{seeds_key(stage.chain)})"
    return Stage(f"evaluate_{name or stage.name}", note,
                 chain=stage.chain, script="evaluate", matrix=matrix or stage.matrix,
                 args=(policy, stage.chain, SEED), inputs=(*TEST_SPLITS, model(policy)),
                 outs=(f"data/eval/{policy}/r{SEED}.parquet", details(f"eval/{policy}/r{SEED}")),
                 when=when)


def with_evaluation(stage: Stage, policy: str, note: str = "") -> list[Stage]:
    """A training stage and its evaluation."""
    return [stage, evaluation(stage, policy, note)]


def arm_stages(script: str, note: str, key: str, inputs: tuple) -> list[Stage]:
    """The stages of `stages/<script>.py`'s arms (countdown_rlvr.core.arms), each with its
    evaluation: a matrix over its arms of every replicate (`${item.<key>}`) and the seeds of
    its chain (the chain is named as the script: `replicates.<script>`), one per policy they
    start from (Arm.init, the matrix's one list of inputs: `inputs` and that policy's model;
    Arm.stage names it), then a stage of its own for each arm of the first replicate only, on
    the chain's first seed. `note`: the comment of the matrix of the script's own arm."""
    out = []
    for stage, names in ARMS.items():
        group = [a for a in arms(script) if a.name in names]
        if not group or group[0].replicates == "first":
            continue
        init = group[0].init
        about = note if stage == script else \
            f"the {script} arms that start from the {init} policy (Arm.init; a matrix has one " \
            f"list of inputs), each its own section's keys over {script}'s"
        every = Stage(stage, about, chain=script, script=script,
                      matrix={key: list(names), "seed": seeds(script)},
                      args=(f"${{item.{key}}}", SEED), inputs=(*inputs, model(init)),
                      outs=trained(f"${{item.{key}}}"), launched=True)
        out += with_evaluation(every, f"${{item.{key}}}")
    for a in arms(script):
        if a.replicates == "first":
            out += with_evaluation(
                Stage(a.name, f"{a.about}: a secondary arm, the first seed of replicates.{script}"
                      " only", chain=script, script=script, matrix={"seed": first_seed(script)},
                      args=(ARMS[a.name][0], SEED), inputs=(*inputs, model(a.init)),
                      outs=trained(a.name), launched=True),
                a.name)
    return out


# `int` starts from each seed's SFT and RLOO policies; its policies are sampled when listed
INT = Stage(
    "int", "interventional training (S3 §4): a patch at the first wrong step, then RL on the "
    "unsolved problems", chain="int", matrix={"seed": seeds("int")}, args=(SEED,),
    inputs=("data/problems/unseen.jsonl",
            Out("data/sft/train.jsonl", "the replay mixed into the patch"),
            SFT, model("rloo")),
    outs=(f"data/int/r{SEED}", *(model(m) for m in ("int_sft", "int", "int_plain_rl",
                                                    "int_solver_sft")),
          Out(f"dvclive/int/r{SEED}", "per-step curves of its sft, rloo, plain_rl, "
              "solver_sft phases", cache=False),
          details(f"int/r{SEED}"), timing(f"int/r{SEED}")))


STAGES = [
    Stage("check_params", "every param checked before DVC removes any stage's outputs",
          all_params=True,
          outs=(Out("reports/details/check_params.json", "constant: passing re-runs nothing; "
                    "a failed check leaves it (and all else) in place",
                    cache=False, persist=True),)),
    Stage("problems", "train / dev / test / ood / unseen problem sets, pairwise disjoint "
          "(test: the confirmatory split, from problems.test_seed)", gated=True,
          outs=("data/problems", details("problems"))),
    Stage("base", "the base model every later stage starts from", gated=True,
          outs=trained("base", replicated=False), launched=True),
    Stage("traces", "verified solver traces of the train problems, and repair-format examples",
          inputs=(TRAIN,),
          outs=("data/traces/solver.jsonl", "data/traces/repair.jsonl", details("traces"))),
    # BASE: what `teacher.init: base` starts from; a dep under every init, since dvc.yaml is
    # made from params.yaml and `-S teacher.init=base` must then re-run on a changed base
    Stage("teacher", "the model whose samples become teacher traces and OPD targets",
          inputs=("data/traces/solver.jsonl",
                  Out(BASE, "teacher.init: base starts from it (a dep under every init)"),
                  Out(TRAIN, "teacher.rl's prompts (a dep whether or not it is set)")),
          outs=trained("teacher", replicated=False)),
    Stage("teacher_traces", "K teacher samples per train problem; the correct ones are traces",
          inputs=(TRAIN, TEACHER),
          outs=("data/traces/teacher.jsonl", "data/traces/teacher_samples.parquet",
                details("teacher_traces"))),
    Stage("dedup", "near-duplicate removal of the traces, then the train / val split of sft",
          inputs=("data/traces/solver.jsonl", "data/traces/teacher.jsonl",
                  "data/traces/repair.jsonl"),
          outs=("data/sft", details("dedup"), timing("dedup"))),
    Stage("pairs", "preference pairs from every source; `ipo.sources` chooses among them",
          inputs=(TRAIN, "data/traces/solver.jsonl", "data/traces/teacher_samples.parquet",
                  BASE),
          outs=("data/pairs", details("pairs"))),
    *with_evaluation(SFT_STAGE, "sft"),
    evaluation(SFT_STAGE, EARLY, name=EARLY, when=EARLY_STEP,
               note="samples the early checkpoint `sft` saves (sft.early_step), on the same "
               "seeds"),
    *with_evaluation(Stage(
        "ipo", "one stage per pairs source and seed of replicates.ipo: ipo@scripted-19, ...",
        chain="ipo", matrix={"source": "${ipo.sources}", "seed": seeds("ipo")},
        args=("${item.source}", SEED), inputs=("data/pairs/pairs.jsonl", SFT, SKILL_PROBLEMS),
        outs=trained("ipo_${item.source}", "ipo/${item.source}"), launched=True),
        "ipo_${item.source}"),
    *with_evaluation(Stage(
        "ipo_first", "a pairs source no seed claim uses (base): the first seed of "
        "replicates.ipo only", chain="ipo", script="ipo",
        matrix={"source": "${ipo.first_replicate_sources}", "seed": first_seed("ipo")},
        args=("${item.source}", SEED), inputs=("data/pairs/pairs.jsonl", SFT, SKILL_PROBLEMS),
        outs=trained("ipo_${item.source}", "ipo/${item.source}"), launched=True),
        "ipo_${item.source}"),
    *arm_stages("rloo", "RLOO from the SFT policy (S4 eq. 3) and its arms (an arm's section: "
                "its keys over rloo's); `dvc exp run -S rloo.reward=shaped`", "arm",
                inputs=(TRAIN,)),
    *arm_stages("opd", "on-policy distillation from the teacher (S4 §3.3) and the anti-collapse "
                "variant, both from the RLOO policy of their seed (opd.init) with the same "
                "budget", "variant", inputs=(TRAIN, TEACHER)),
    Stage("diagnose", "from the SFT policy's own evaluation samples (evaluate_sft@<seed>); a "
          "measurement only: repair samples its attempts on train problems, never on these "
          "test ones", chain="sft",
          matrix={"seed": seeds("sft")}, args=(SEED,), inputs=(f"data/eval/sft/r{SEED}.parquet",),
          outs=(details(f"diagnose/r{SEED}"), timing(f"diagnose/r{SEED}"))),
    Stage("repair", "attempts: the SFT policy's failed samples on the last repair.n_problems "
          "train problems", chain="repair", matrix={"seed": seeds("repair")}, args=(SEED,),
          inputs=(TRAIN, SFT),
          outs=(f"data/repair/r{SEED}", details(f"repair/r{SEED}"), timing(f"repair/r{SEED}"))),
    *with_evaluation(Stage(
        "distill", "one stage per repair condition and seed of replicates.repair: distill@R-19, "
        "...", chain="repair", matrix={"condition": "${distill.conditions}",
                                       "seed": seeds("repair")},
        args=("${item.condition}", SEED), inputs=(f"data/repair/r{SEED}/repairs.parquet", SFT),
        outs=trained("distill_${item.condition}", "distill/${item.condition}")),
        "distill_${item.condition}"),
    *with_evaluation(Stage(
        "distill_first", "S0 Table 3's other conditions (F1 ... Fshuf): the first seed of "
        "replicates.repair only", chain="repair", script="distill",
        matrix={"condition": "${distill.first_replicate_conditions}",
                "seed": first_seed("repair")},
        args=("${item.condition}", SEED), inputs=(f"data/repair/r{SEED}/repairs.parquet", SFT),
        outs=trained("distill_${item.condition}", "distill/${item.condition}")),
        "distill_${item.condition}"),
    INT,
    evaluation(INT, "${item.policy}", "the int stage's policies of evaluate.int_policies "
               "(opt-in: the S3 claim reads int's own problems)",
               matrix={"policy": "${evaluate.int_policies}", "seed": seeds("int")}),
    Stage("evaluate_shared", "the fixed inputs, sampled once: evaluate_shared@base, ...",
          script="evaluate", foreach="${evaluate.shared}", args=("${item}",),
          inputs=(*TEST_SPLITS, "data/models/${item}"),
          outs=("data/eval/${item}/shared.parquet", details("eval/${item}/shared"))),
    Stage("compare", "per-replicate paired effects, pooled tests whose unit is the replicate",
          inputs=(Out("data/eval", "the records of every evaluate stage"),),
          outs=(Out("reports/compare.md", cache=False),
                Out("reports/details/compare.json", "every pair, split, k and replicate",
                    cache=False),
                Out("reports/details/per_problem", "<split>.csv: correct of n and distinct "
                    "correct solutions per policy, replicate and problem", cache=False))),
    Stage("report", "the report, its figures and the headline metrics (what `dvc metrics show` "
          "/ `diff` / `dvc exp show` list)",
          inputs=(Out("reports/details", "every stage's measurements (eval/, ipo/, distill/, "
                      "compare, ...)"), Out("dvclive", "the RL per-step curves"),
                  Out("plan.yaml", "the analysis plan: each claim's delta and planned power")),
          outs=(Out("reports/report.md", cache=False), Out("reports/figures", cache=False),
                timing("report")),
          metrics=(Out("reports/metrics/eval", "<policy>.json: pass@1, pass@16, mean and SD over "
                       "replicates", cache=False),
                   Out("reports/metrics/claims", "<claim>.json: the claim's decision, effect "
                       "and p (Holm)", cache=False))),
]

# What each IPO pairs source trains on, for its model-registry entry
IPO_PAIRS = {"scripted": "scripted (solver / operator-flip) pairs",
             "easyneg": "teacher easy-negative pairs", "hardneg": "teacher near-miss pairs",
             "base": "base-model failure pairs"}


def artifacts(params: dict) -> dict[str, tuple[str, str]]:
    """The policies `params` trains on every seed of their chain, and the two shared models, as
    DVC model-registry artifacts (ARTIFACTS_NOTE): name -> (path, desc). dvc.yaml is made from
    params.yaml, so these are the default run's: every path is a model some stage writes
    (tests/test_experiment.py); an opt-in or first-replicate policy is no entry."""
    return {
        "base": ("data/models/base", "the pre-trained tiny base (shared by every replicate)"),
        "teacher": ("data/models/teacher",
                    "the frozen teacher behind teacher traces and OPD (shared)"),
        "sft": (model("sft", first("sft")), "the student after SFT on the deduplicated traces"),
        **{f"ipo_{s}": (model(f"ipo_{s}", first("ipo")),
                        f"IPO from SFT on {IPO_PAIRS.get(s, f'{s} pairs')}")
           for s in params["ipo"]["sources"]},
        **{a.name: (model(a.name, first(a.script)), a.about) for a in arms()
           if a.replicates == "all" and a.name in trained_arms(params)},
        **{f"distill_{c}": (model(f"distill_{c}", first("repair")),
                            f"self-distillation on the successful {c} repairs"
                            + (" (resample)" if c == "R" else ""))
           for c in params["distill"]["conditions"]},
        "int": (model("int", first("int")),
                "intervention patch, then RL on the unsolved problems"),
    }


def _runs(script: str | None = None, every: bool = False) -> list[str]:
    """The first replicate's dvclive runs of `script`'s arms (every script's when None): the
    report RL runs (Arm.curves), or every arm."""
    return [f"{a.name}/r{first(a.script)}" for a in arms(script) if every or a.curves]


def _logs(run: str, metric: str, params: dict) -> bool:
    """Whether the dvclive run `run` (<arm>/r<seed>) logs `metric` with `params`: the
    curriculum tier only where the arm's resolved `curriculum` is on."""
    name = run.split("/")[0]
    if metric != "tier" or name not in {a.name for a in arms()}:
        return True
    script = next(a.script for a in arms() if a.name == name)
    own = at(params, f"{name}.curriculum")
    return bool(own if own is not None else at(params, f"{script}.curriculum"))


# `dvc plots`: title -> (y label, the dvclive metric, the runs drawn); x is the optimizer step.
CURVES = {
    "RL reward mean": ("mean rollout reward", "reward_mean", _runs(every=True)),
    "RL fraction of zero-std groups": ("groups with no reward variance", "zero_std_frac",
                                       _runs()),
    "RL KL to the reference (k3)": ("per-token KL", "kl", _runs("rloo")),
    "RL curriculum tier": ("highest unlocked tier (0 = 3 numbers, 1 = 3 and 4)", "tier",
                           _runs("rloo")),
    "RL forward KL to the teacher": ("per-token forward KL", "forward_kl", _runs("opd")),
    "RL entropy": ("per-token entropy", "entropy", _runs()),
    "SFT loss": ("completion cross-entropy", "loss", ["base", "teacher", f"sft/r{first('sft')}"]),
}

HEADER = """\
# GENERATED from src/countdown_rlvr/cli/experiment.py (the stages, in run order), the stage
# scripts' imports (code deps) and countdown_rlvr.cli.stage_params (params): edit those, then run
# `python -m countdown_rlvr.cli.experiment --write`. tests/test_experiment.py checks it is current.
"""
ARTIFACTS_NOTE = """\
# The trained policies, as DVC model-registry artifacts (`dvc artifacts get`). Each model
# dir carries a README.md model card (prompt format, params, training summary). A replicated
# policy's first replicate is listed (its chain's first seed, interpolated from params.yaml);
# the others are its siblings r<seed> for the chain's other seeds.
"""
PLOTS_NOTE = """\
# `dvc plots show` / `dvc plots diff main other-branch`: every file below is in git
# (`cache: false`), so the plots render in a fresh clone without the data cache. The training
# curves are the first replicate's (each chain's first seed); reports/figures/rl_curves.png draws
# every replicate. reports/figures: the report's figures (PNG).
"""


# --------------------------------------------------------------------------- code deps

def code_deps(script: str) -> list[str]:
    """The library files `stages/<script>.py` runs, file by file (never a folder: a folder
    dep would re-run the stage for an edit to a file it never runs)."""
    return sorted(str(p) for p in closure(ROOT / "stages" / f"{script}.py"))


def _values(value: str | list[str], params: dict) -> list[str]:
    """A matrix (or foreach) list as params makes it: `${ipo.sources}` -> its values."""
    if isinstance(value, list):
        return value
    ref = re.fullmatch(r"\$\{([\w.]+)\}", value)
    return [str(v) for v in at(params, ref.group(1)) or []] if ref else [value]


def sampled_policies(stage: Stage, params: dict) -> set[str]:
    """The policies an evaluation stage samples, its matrix (or foreach) expanded with
    `params`; none for any other stage."""
    if (stage.script or stage.name) != "evaluate":
        return set()
    items = {"${item}": _values(stage.foreach, params)} if stage.foreach else {
        f"${{item.{key}}}": _values(value, params) for key, value in stage.matrix.items()}
    names = {stage.args[0]}
    for token, values in items.items():
        if any(token in n for n in names):
            names = {n.replace(token, v) for n in names for v in values}
    return names


# what a later chain's stage reads of SFT's replicate r, and what it reads instead with one
# SFT for every replicate (`replicates.shared_sft`; dvc.yaml is made from params.yaml, so
# setting it, or back to null, needs `--write`: the params check says so)
SFT_OF_SEED = (model("sft"), model(EARLY))
SHARED_SFT = "${replicates.shared_sft}"


def _sft_input(out: Out, stage: Stage, params: dict | None) -> Out:
    """`out`, or the shared SFT's dir where `out` is a later chain's own seed's SFT dir."""
    if out.path not in SFT_OF_SEED or stage.chain in ("", "sft") or \
            not params or at(params, "replicates.shared_sft") is None:
        return out
    return replace(out, path=out.path.replace(f"/r{SEED}", f"/r{SHARED_SFT}"),
                   note=out.note or "replicates.shared_sft: every replicate starts from one SFT")


def deps(stage: Stage, params: dict | None = None) -> list[Out]:
    """The stage's deps: check_params' output (a root), its script and code, its inputs (a
    later chain's SFT: the shared one's when `replicates.shared_sft` is set), and the dev split
    for an evaluation stage that samples a policy of evaluate.dev_policies."""
    script = stage.script or stage.name
    inputs = [_sft_input(Out(i) if isinstance(i, str) else i, stage, params)
              for i in stage.inputs]
    dev = set(at(params, "evaluate.dev_policies") or []) if params else set()
    if sampled_policies(stage, params or {}) & dev:
        last_split = max(i for i, o in enumerate(inputs) if o.path in TEST_SPLITS)
        inputs.insert(last_split + 1, DEV)
    return [*([CHECKED] if stage.gated else []), Out(f"stages/{script}.py"),
            *map(Out, stage.code or code_deps(script)), *inputs]


# --------------------------------------------------------------------------- params

def _under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + ".")


def _children(params: dict, key: str) -> list[str]:
    return list(dict.fromkeys(f"{key}.{leaf[len(key) + 1:].split('.')[0]}"
                              for leaf in leaves(params, key) if leaf != key))


def _collapse(params: dict, key: str, wanted: set[str]) -> list[str]:
    """The fewest keys under `key` that cover exactly its leaves in `wanted`, in file order."""
    mine = set(leaves(params, key))
    if mine and mine <= wanted:
        return [key]
    return [k for child in _children(params, key) for k in _collapse(params, child, wanted)]


def param_keys(stage: Stage, params: dict) -> list[tuple[str, str]]:
    """The stage's `params:` as (key, comment line before it or ""), from what
    countdown_rlvr.cli.stage_params resolves for each of its arms."""
    if stage.all_params:
        return [("params.yaml", "")]
    every = ARMS.get(stage.name, ())  # an arm matrix lists those of them the run trains
    arm_key = next((k for k, v in stage.matrix.items()
                    if every and isinstance(v, list) and v and set(v) <= set(every)), None)
    arms = tuple(stage.matrix[arm_key]) if arm_key else every or (None,)
    resolved = {arm: resolved_keys(params, stage.name, arm) for arm in arms}
    out: list[tuple[str, str]] = []

    def add(keys: list[str], note: str = "") -> None:
        for key in keys:
            if not any(_under(key, k) for k, _ in out):  # `int.rloo`: listed within `int`
                out.append((key, note))
                note = ""

    for entries in zip(*(reads(stage.name, arm) for arm in arms)):
        if isinstance(entries[0], str):  # a key or a section, read as is
            add([entries[0]])
            continue
        own = [_collapse(params, e.path, {k for k in resolved[arm] if _under(k, e.path)})
               for e, arm in zip(entries, arms)]
        if arm_key:  # one list for every arm: each must read its own section whole
            if any(o != [e.path] for o, e in zip(own, entries)):
                raise ValueError(f"{stage.name}: an arm reads part of its section, which one "
                                 "dvc.yaml list for every arm cannot say")
            add([f"${{item.{arm_key}}}"], f"the arm's own section ({', '.join(arms)})")
        else:
            path, mine = entries[0].path, resolved[arms[0]]
            skipped = [c.rpartition(".")[2] for c in _children(params, path)
                       if not any(_under(k, c) for k in mine)]
            add(own[0], f"all of {path} but {', '.join(skipped)}: adding to those re-runs no "
                "other stage" if skipped else "")
        inheriting = {arm: e for e, arm in zip(entries, arms) if e.inherit}
        inherited = {frozenset(k for k in resolved[arm] if _under(k, e.inherit))
                     for arm, e in inheriting.items()}
        if len(inherited) > 1:
            raise ValueError(f"{stage.name}: its arms inherit different keys, which one "
                             "dvc.yaml list for every arm cannot say")
        if inherited:
            base = next(iter(inheriting.values())).inherit
            names = " and ".join(e.path for e in inheriting.values())
            add(_collapse(params, base, set(next(iter(inherited)))),
                f"the {base} keys {names} {'do' if len(inheriting) > 1 else 'does'} not "
                "override")
    return out


# --------------------------------------------------------------------------- dvc.yaml text

def _flow(values: list[str]) -> str:
    """A flow list, `['${replicates.seeds.0}']` (quoted where YAML needs it)."""
    return yaml.safe_dump(values, default_flow_style=True, width=10**6).strip()


def _wrap(text: str, width: int) -> list[str]:
    """Words filled into lines of at most `width` (a `code span` is never split)."""
    lines: list[str] = []
    for word in re.findall(r"`[^`]*`\S*|\S+", text):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _comment(line: str, note: str, width: int = WIDTH) -> list[str]:
    """`line` with `note` as its end-of-line comment, wrapped onto aligned comment lines."""
    if not note:
        return [line]
    col = len(line) + 2
    first, *rest = _wrap(note, max(width - col - 2, 30))
    return [f"{line}  # {first}", *(" " * col + f"# {p}" for p in rest)]


def _above(note: str, pad: str) -> list[str]:
    """`note` as whole comment lines, indented by `pad`."""
    return [f"{pad}# {line}" for line in _wrap(note, WIDTH - len(pad) - 2)] if note else []


def _paths(entries: list[Out], pad: str) -> list[str]:
    lines = []
    for e in entries:
        opts = ["cache: false"] * (not e.cache) + ["persist: true"] * e.persist
        line = f"{pad}- {e.path}{':' if opts else ''}"
        if len(line) + 4 + len(e.note) <= WIDTH:
            lines += _comment(line, e.note)
        else:  # a long path: the note goes above it
            lines += [*_above(e.note, pad), line]
        lines += [f"{pad}    {o}" for o in opts]
    return lines


def _param_lines(keys: list[tuple[str, str]], pad: str) -> list[str]:
    lines = []
    for key, note in keys:
        lines += _above(note, pad)
        lines.append(f"{pad}- {key}:  # all of it" if key == "params.yaml" else f"{pad}- {key}")
    return lines


def _sections(stage: Stage, params: dict) -> dict[str, list]:
    """The stage's lists, by dvc.yaml field: what anchors may share."""
    out = {"deps": deps(stage, params), "params": param_keys(stage, params),
           "outs": [o for o in (Out(o) if isinstance(o, str) else o for o in stage.outs)
                    if present(o.when, params)],
           "metrics": [Out(m) if isinstance(m, str) else m for m in stage.metrics]}
    return {k: v for k, v in out.items() if v}


def _stage_lines(stage: Stage, sections: dict[str, list], shared: dict, anchors: dict
                 ) -> list[str]:
    """One stage; a list another stage repeats is written once, as a YAML anchor (`&ipo_deps`)
    the other names (`*ipo_deps  # as ipo`)."""
    lines = _comment(f"  {stage.name}:", stage.note)
    pad = "    "
    if stage.foreach:
        lines += [f"{pad}foreach: {stage.foreach}", f"{pad}do:"]
        pad += "  "
    if stage.matrix:
        lines.append(f"{pad}matrix:")
        lines += [f"{pad}  {k}: {_flow(v) if isinstance(v, list) else v}"
                  for k, v in stage.matrix.items()]
    args = [f"'{a}'" if "${" in a else a for a in stage.args]
    script = f"stages/{stage.script or stage.name}.py"
    run = LAUNCHER if stage.launched else "python"
    lines.append(f"{pad}cmd: " + " ".join([run, script, *args]))
    for name, entries in sections.items():
        key = (name, repr(entries))
        if key in anchors:  # written before: name it
            first = anchors[key]
            lines.append(f"{pad}{name}: *{first}_{name}  # as {first}")
            continue
        head = f"{pad}{name}:"
        if shared.get(key, 0) > 1:
            anchors[key] = stage.name
            head += f" &{stage.name}_{name}"
        lines.append(head)
        write = _param_lines if name == "params" else _paths
        lines += write(entries, pad + "  ")
    return lines


class _Dumper(yaml.SafeDumper):
    """Block style with list items indented under their key, as in the stages above."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _dump(key: str, value) -> str:
    return yaml.dump({key: value}, Dumper=_Dumper, sort_keys=False, width=WIDTH,
                     allow_unicode=True)


def stage_arms(name: str, params: dict) -> tuple[str, ...]:
    """The arms of an arm's stage (stage_params.ARMS) that `params` trains
    (chains.trained_arms); () for a stage that is no arm's."""
    return tuple(a for a in ARMS.get(name, ()) if a in trained_arms(params))


def for_params(stage: Stage, params: dict) -> Stage | None:
    """The stage as `params` runs it: absent (None) when its `when` key is null or it trains
    (or samples) only arms no evaluate list names; an arms matrix keeps the arms it trains."""
    if not present(stage.when, params):
        return None
    name = stage.name.removeprefix("evaluate_") if stage.script == "evaluate" else stage.name
    if name not in ARMS:
        return stage
    kept = stage_arms(name, params)
    if not kept:
        return None
    every = list(ARMS[name])
    return replace(stage, matrix={k: list(kept) if v == every else v
                                  for k, v in stage.matrix.items()})


def generate(params: dict | None = None) -> str:
    """dvc.yaml's text for `params` (params.yaml's, unchecked, when None)."""
    if params is None:
        params = read_params(ROOT / "params.yaml")
    stages = [s for stage in STAGES if (s := for_params(stage, params))]
    sections = [_sections(stage, params) for stage in stages]
    shared = Counter((name, repr(entries)) for s in sections for name, entries in s.items())
    lines, anchors = ["stages:"], {}
    for stage, its in zip(stages, sections):
        lines += _stage_lines(stage, its, shared, anchors)
    registry = {name: {"path": path, "type": "model", "desc": desc}
                for name, (path, desc) in artifacts(params).items()}
    dropped = {a.name for a in arms()} - set(trained_arms(params))  # arms this run leaves out
    ys = {title: {f"dvclive/{run}/plots/metrics/train/{metric}.tsv": metric for run in runs
                  if run.split("/")[0] not in dropped and _logs(run, metric, params)}
          for title, (_, metric, runs) in CURVES.items()}
    plots = [{title: {"x": "step", "x_label": "optimizer step", "y_label": label,
                      "y": ys[title]}}
             for title, (label, _, _) in CURVES.items() if ys[title]]
    return "\n".join([HEADER + "\n".join(lines), "", ARTIFACTS_NOTE + _dump("artifacts", registry),
                      PLOTS_NOTE + _dump("plots", ["reports/figures", *plots])])


def _map() -> str:
    """docs/dag.md as `countdown-rlvr dag` makes it from OUT (from OUT's directory: DVC names
    the stages relative to the working directory)."""
    with contextlib.chdir(OUT.parent):
        return stage_map.make(".")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m countdown_rlvr.cli.experiment",
                                 description="Print dvc.yaml as the experiment table makes it.")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true",
                      help=f"write it to {OUT.name}, then the stage map {stage_map.OUT} "
                      "(`countdown-rlvr dag`) from it: all an edit of the table changes")
    mode.add_argument("--check", action="store_true",
                      help=f"exit 1 when the committed {OUT.name} or {stage_map.OUT} differs")
    args = ap.parse_args(argv)
    text = generate()
    dag = OUT.parent / stage_map.OUT  # the map DVC draws from OUT, beside it
    if args.write:
        write_text(OUT, text)  # atomic: a temporary file, then a rename
        write_text(dag, _map())  # the map of the file just written
        print(f"wrote {OUT.name}: {len(STAGES)} stages, and {stage_map.OUT}")
    elif args.check:
        stale = None
        if not OUT.is_file() or OUT.read_text() != text:
            stale = OUT.name
        elif not dag.is_file() or dag.read_text() != _map():  # drawn from OUT: checked after it
            stale = stage_map.OUT
        if stale:
            print(f"{stale} is not what experiment.py makes: run `python -m "
                  "countdown_rlvr.cli.experiment --write`", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
