"""Shared fixtures. `pipeline` runs the real `dvc repro` in a temporary copy of the repo
with the smoke-sized overrides of `params.smoke.yaml` merged into `params.yaml`."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from countdown_rlvr.cli.experiment import generate
from countdown_rlvr.core.config import merged

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Smoke-sized models gain nothing from a second thread, and OpenMP spin-waits stall when
# test processes share the cores (measured: a smoke pipeline test 2 min vs 8.5 min). Set
# before torch is imported, so it holds for the tests and the stages they start.
os.environ.setdefault("OMP_NUM_THREADS", "1")


# The module whose two tests share one two-replicate smoke run (~20 min on a slow 2-core kind).
LONGEST_MODULE = "test_pipeline_dvc.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first: the shared-run module, then every module with a slow test, then the
    rest (a stable sort: each module keeps its order). Under `pytest -n 2` each worker takes
    whole modules in this order (pyproject's addopts), so the run does not end on one long
    module while the other worker idles (measured: 37 min with that module last, on a Zen 2)."""
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (item.path.name != LONGEST_MODULE, item.path not in slow_modules))


# Every RL arm (core/arms.py) in the smoke run's lists: the default run leaves some out to fit
# its time (params.yaml's evaluate lists), the end-to-end tests run them all.
EVERY_ARM = {"evaluate": {
    "policies": ["sft", "sft_early", "ipo_scripted", "rloo", "rloo_early", "opd", "opd_ac",
                 "distill_R", "int"],
    "first_replicate_only": ["rloo_shaped", "rloo_early_shaped", "rloo_nocurr", "ipo_base"]}}


# params.yaml's evaluate lists and pairs with every RL arm (core/arms.py) in them, as 85a584b's
# defaults were: the tests of the graph's arm stages read a graph that has them all, where the
# committed run leaves the early, shaped and no-curriculum arms out to fit its time.
EVERY_ARM_DEFAULT = {
    "evaluate": {"policies": ["sft", "sft_early", "ipo_scripted", "ipo_easyneg", "rloo",
                              "rloo_early", "opd", "opd_ac", "distill_R"],
                 "first_replicate_only": ["rloo_shaped", "rloo_early_shaped", "rloo_nocurr"]},
    "compare": {"pairs": [["sft", "base"], ["teacher", "sft"], ["ipo_scripted", "sft"],
                          ["ipo_easyneg", "sft"], ["ipo_easyneg", "ipo_scripted"],
                          ["rloo", "sft"], ["rloo_shaped", "sft"], ["rloo_shaped", "rloo"],
                          ["rloo", "rloo_nocurr"], ["rloo_early", "sft_early"],
                          ["rloo_early_shaped", "sft_early"], ["rloo_early_shaped", "rloo_early"],
                          ["opd", "sft"], ["opd_ac", "sft"], ["opd", "rloo"], ["opd_ac", "opd"],
                          ["distill_R", "sft"]]}}


def with_every_arm(params: dict | None = None) -> dict:
    """params.yaml's params (or `params`) with every RL arm trained: EVERY_ARM_DEFAULT on top."""
    if params is None:
        params = yaml.safe_load((ROOT / "params.yaml").read_text())
    return merged(params, copy.deepcopy(EVERY_ARM_DEFAULT))  # a test may edit its lists


def merge(base: dict, override: dict) -> dict:
    """Recursive dict merge; an override value of null is a value (`replicates.shared_sft:
    null`: each replicate its own SFT)."""
    return merged(base, override)


class Pipeline:
    def __init__(self, path: Path):
        self.path = path

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        # the stages run `python ...`: make that the interpreter running the tests
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        proc = subprocess.run(args, cwd=self.path, env=env, capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        return proc

    def repro(self, *targets: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("dvc", "repro", *targets, check=check)

    def set_params(self, override: dict) -> None:
        p = self.path / "params.yaml"
        p.write_text(yaml.safe_dump(merge(yaml.safe_load(p.read_text()), override), sort_keys=False))

    def write_dvc_yaml(self) -> None:
        """dvc.yaml made anew from the copy's params.yaml (`experiment --write`), for params
        that change the graph (`replicates.shared_sft`)."""
        params = yaml.safe_load((self.path / "params.yaml").read_text())
        (self.path / "dvc.yaml").write_text(generate(params))

    def read(self, rel: str) -> bytes:
        return (self.path / rel).read_bytes()


def make_pipeline(dest: Path) -> Pipeline:
    """A fresh git + DVC copy of the repo's tracked pipeline files, smoke-sized."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", "params.yaml", "params.smoke.yaml", "plan.yaml", ".dvcignore",
                 ".gitignore"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, dest / name)
    for name in ("stages", "src"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    pipe = Pipeline(dest)
    pipe.set_params(yaml.safe_load((ROOT / "params.smoke.yaml").read_text()))
    pipe.set_params(EVERY_ARM)
    # each replicate its own SFT (the smoke file shares one, as the default run): a test that
    # adds a seed gets another SFT draw; dvc.yaml made anew for that graph
    pipe.set_params({"replicates": {"shared_sft": None}})
    pipe.write_dvc_yaml()
    pipe.run("git", "init", "-q")
    pipe.run("dvc", "init", "-q")
    pipe.run("git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    pipe.run("git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return pipe


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matmuls gain nothing from a second thread, and OpenMP spin-waits collapse when
    other processes share the 2 cores (measured: 0.05 s vs 0.3-4.8 s for one generate call)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# Qwen's chat format (im_start / im_end turns), the shape of every Qwen2.5 tokenizer's template.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.fixture(scope="session")
def hub_model(tmp_path_factory) -> Path:
    """A hub-shaped local model: what `save_pretrained` of a Qwen2.5 checkpoint looks like
    (Qwen2 architecture, a tokenizer with im_start/im_end special tokens and a chat
    template), small and random, built here so nothing is downloaded."""
    import torch
    from transformers import Qwen2ForCausalLM

    from countdown_rlvr.model.policy import TINY_PRESETS, build_tokenizer, tiny_config

    tok = build_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHAT_TEMPLATE
    cfg = tiny_config(**TINY_PRESETS["student"], vocab_size=len(tok))
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    out = tmp_path_factory.mktemp("hub") / "Qwen2-tiny-chat"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture
def pipeline(tmp_path: Path) -> Pipeline:
    return make_pipeline(tmp_path / "repo")
