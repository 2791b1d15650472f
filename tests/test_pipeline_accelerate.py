"""IPO and RLOO under `accelerate launch --num_processes 2` on CPU, started by `dvc repro`
through params.yaml's `launcher`: the same per-step curves as the single-process run of the
same stage, up to float rounding (DDP sums the gradients of the two halves of each batch in
another order)."""

import csv
import json
import shlex

import pytest
import yaml
from test_sft import launch_two_processes

pytestmark = pytest.mark.slow

TIMING = ("seconds", "time", "per_s", "gen_s", "upd_s")  # wall-clock columns vary run to run


def curves(pipe, name: str) -> dict[str, list[float]]:
    """{metric: per-step values} of a stage's dvclive curves."""
    out = {}
    for f in sorted((pipe.path / f"dvclive/{name}/plots/metrics/train").glob("*.tsv")):
        if not any(t in f.stem for t in TIMING):
            with f.open() as fh:
                out[f.stem] = [float(row[f.stem]) for row in csv.DictReader(fh, delimiter="\t")]
    return out


def test_ipo_and_rloo_under_two_processes_match_one_process(pipeline):
    targets = ("ipo@scripted-0", "rloo@rloo-0")
    pipeline.repro(*targets)  # `launcher: python`: one process, plus every input of both
    names = {"ipo@scripted-0": "ipo/scripted/r0", "rloo@rloo-0": "rloo/r0"}
    one = {target: curves(pipeline, name) for target, name in names.items()}
    launcher = shlex.join(launch_two_processes())
    pipeline.set_params({"launcher": launcher})
    # the launcher is in every training stage's cmd: --single-item re-runs these two only, on
    # the inputs the one-process run used (base and sft would re-run under two processes too)
    proc = pipeline.run("dvc", "repro", "--single-item", *targets)
    assert proc.stdout.count("on 2 process(es)") == 2, proc.stdout[-3000:]
    lock = yaml.safe_load(pipeline.read("dvc.lock"))["stages"]
    for target, name in names.items():
        assert lock[target]["cmd"].startswith(launcher + " stages/")  # what DVC records
        assert json.loads(pipeline.read(f"reports/timings/{name}.json"))["processes"] == 2
        two = curves(pipeline, name)
        single = one[target]
        assert set(two) == set(single) and len(single["loss"]) >= 2, name
        for key in single:
            steps = range(len(single[key]))
            if key == "pref_acc":  # a step function of the margin: at a tie (step 1 scores the
                # SFT policy against itself, margin 0 up to float rounding) it is rounding's
                steps = [i for i in steps if abs(single["margin"][i]) > 1e-4]
            assert [two[key][i] for i in steps] == pytest.approx(
                [single[key][i] for i in steps], rel=1e-4, abs=1e-5), (name, key)
