"""IPO and RLOO under `accelerate launch --num_processes 2` on CPU: the same per-step
curves as the single-process run of the same stage, up to float rounding (DDP sums the
gradients of the two halves of each batch in another order)."""

import csv
import json

import pytest
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
    pipeline.repro("ipo@scripted-0", "rloo@rloo-0")  # one process, plus every input of both
    for stage, args, name in (("ipo", ["scripted", "0"], "ipo/scripted/r0"),
                              ("rloo", ["rloo", "0"], "rloo/r0")):
        one = curves(pipeline, name)
        proc = pipeline.run(*launch_two_processes(f"stages/{stage}.py", *args))
        assert "on 2 process(es)" in proc.stdout
        assert json.loads(pipeline.read(f"reports/timings/{name}.json"))["processes"] == 2
        two = curves(pipeline, name)
        assert set(two) == set(one) and len(one["loss"]) >= 2, name
        for key in one:
            steps = range(len(one[key]))
            if key == "pref_acc":  # a step function of the margin: at a tie (step 1 scores the
                # SFT policy against itself, margin 0 up to float rounding) it is rounding's
                steps = [i for i in steps if abs(one["margin"][i]) > 1e-4]
            assert [two[key][i] for i in steps] == pytest.approx(
                [one[key][i] for i in steps], rel=1e-4, abs=1e-5), (name, key)
