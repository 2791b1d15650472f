"""A run that diverges stops its stage with one line naming the params to look at, and saves
nothing: no model, no details claiming a trained policy (issue 57, item 2). Reported: `sft.lr:
1e9` passed the params check, SFT went `loss 4.780 -> nan`, saved the model and wrote
`"loss_final": NaN` (not JSON), and the evaluation died in the sampler with an index error.
"""

import copy
import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from helpers import config_of
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ipo import CFG as IPO_CFG
from test_ipo import PAIRS
from test_rloo import BAD, GOOD, PROBLEM, PROMPT
from test_rloo import CFG as RL_CFG
from test_sft import CFG as SFT_CFG
from test_sft import TINY, TOY

from countdown_rlvr.core import io
from countdown_rlvr.core.ipo_config import IPO
from countdown_rlvr.core.rl_config import RL
from countdown_rlvr.core.train_config import SFTStage
from countdown_rlvr.model.policy import build_tiny, load_model
from countdown_rlvr.train import ipo as ipo_loop
from countdown_rlvr.train import runtime
from countdown_rlvr.train import sft as sft_loop
from countdown_rlvr.train.rloo import train_rloo


def strict_json(text: str):
    """json.loads that refuses NaN / Infinity, as every strict JSON reader does."""
    def refuse(name: str):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def sft_cfg(**over) -> SFTStage:
    """test_sft's config, with values past the params rules (lr > 1, grad_clip null) allowed."""
    return dataclasses.replace(config_of(SFTStage, "sft", SFT_CFG), **over)


def one_line(err) -> str:
    text = str(err.value.code)
    assert "\n" not in text, text
    return text


# --------------------------------------------------------------------------- the check
finite = st.floats(allow_nan=False, allow_infinity=False)
broken = st.sampled_from([math.nan, math.inf, -math.inf])
CLIPPED = sft_cfg(lr=1e9, grad_clip=1.0)  # built once: reading params.yaml per example is slow


@given(loss=finite, grad_norm=st.none() | finite, step=st.integers(1, 10**6))
def test_finite_values_pass(loss, grad_norm, step):
    runtime.check_finite("sft", step, CLIPPED, loss=loss, grad_norm=grad_norm)


@given(bad=broken, other=st.none() | finite, which=st.sampled_from(["loss", "grad_norm"]),
       step=st.integers(1, 10**6), section=st.sampled_from(["sft", "rloo_shaped", "teacher.rl"]))
def test_a_nan_or_inf_loss_or_grad_norm_stops_with_one_line_naming_the_keys(
        bad, other, which, step, section):
    values = {"loss": other, "grad_norm": other, which: bad}
    with pytest.raises(runtime.NonFinite) as err:
        runtime.check_finite(section, step, CLIPPED, **values)
    text = one_line(err)
    assert text.startswith(f"[{section}] error: step {step}: training diverged ({which} is {bad}")
    assert f"lower {section}.lr (1e+09) or check {section}.grad_clip (1)" in text
    assert text.endswith("no model was saved")
    assert isinstance(err.value, io.StageError)  # a stage's one-line exit, code 1


def test_with_clipping_off_the_fix_is_to_set_it():
    with pytest.raises(runtime.NonFinite, match=r"lower base\.lr \(0\.01\) or set "
                                                r"base\.grad_clip \(null: no clipping\)"):
        runtime.check_finite("base", 3, sft_cfg(grad_clip=None), loss=math.nan, grad_norm=None)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny(TINY, tmp_path_factory.mktemp("tiny") / "m", seed=0)


def test_a_broken_policy_is_named_by_what_is_broken(tiny_dir):
    model, tok = load_model(str(tiny_dir))
    ids = tok("Numbers: 1 2\n", return_tensors="pt").input_ids
    assert runtime.nonfinite_policy(model, ids) is None
    with torch.no_grad():  # finite weights whose logits overflow: what lr 1e9 leaves
        model.model.norm.weight.mul_(1e20)
        model.lm_head.weight.mul_(1e20)
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    assert runtime.nonfinite_policy(model, ids) == "the policy's logits are nan or inf"
    name, p = next(iter(model.named_parameters()))
    with torch.no_grad():
        p[0, 0] = math.nan
    assert runtime.nonfinite_policy(model, ids) == f"weight {name} is nan or inf"


# --------------------------------------------------------------------------- the loops
def test_sft_that_diverges_saves_no_model_details_or_checkpoint(tiny_dir, tmp_path, monkeypatch):
    """fit_sft as the sft stage calls it: the loss turns nan at step 3, after the early
    checkpoint of step 2 was saved; the stage stops with one line and leaves nothing."""
    monkeypatch.chdir(tmp_path)
    calls = []

    def nan_from_step_3(*args):
        out = real(*args)
        calls.append(1)
        return out._replace(loss=out.loss * math.nan) if len(calls) >= 3 else out

    real = sft_loop.completion_nll
    monkeypatch.setattr(sft_loop, "completion_nll", nan_from_step_3)
    model, tok = load_model(str(tiny_dir))
    with pytest.raises(runtime.NonFinite) as err:
        sft_loop.fit_sft("sft/r0", model, tok, TOY, sft_cfg(max_steps=6, grad_clip=1.0),
                         "data/models/sft/r0", checkpoints={2: "data/models/sft_early/r0"})
    assert one_line(err).startswith("[sft] error: step 3: training diverged (loss is nan, "
                                    "grad_norm is nan); lower sft.lr (0.01) or check "
                                    "sft.grad_clip (1)")
    assert not Path("data/models/sft/r0").exists()
    assert not Path("data/models/sft_early/r0").exists()  # saved at step 2, then removed
    assert not Path("reports").exists()  # no details, no timing
    assert not [p for p in Path("dvclive").rglob("*") if p.is_file()]  # no curves


def test_a_real_blow_up_is_caught_by_the_sft_loop(tiny_dir):
    """No patching: lr 1e9 (which the params rule now refuses) turns the loss nan."""
    model, tok = load_model(str(tiny_dir))
    with pytest.raises(runtime.NonFinite) as err:
        sft_loop.train_sft(model, tok, TOY, sft_cfg(lr=1e9, grad_clip=None), section="distill")
    assert "training diverged (loss is nan" in one_line(err) and \
        "lower distill.lr (1e+09) or set distill.grad_clip" in one_line(err)


def test_rloo_stops_at_the_update_that_broke_the_policy(tiny_dir):
    """RL's loss and grad norm are measured before the update; the next rollouts come first,
    where the sampler failed on the broken policy with a bare index error. Now: one line."""
    model, tok = load_model(str(tiny_dir))
    model = sft_loop.train_sft(model, tok, [(PROMPT, GOOD), (PROMPT, BAD)] * 4, sft_cfg(
        batch_size=8, max_len=40, max_steps=300, warmup_frac=0.0))  # rewards that differ
    for clip, fix in ((None, "set rloo_shaped.grad_clip"), (1.0, "check rloo_shaped.grad_clip (1)")):
        cfg = dataclasses.replace(config_of(RL, "rloo", {**RL_CFG, "steps": 4}), lr=1e9,
                                  grad_clip=clip)
        with pytest.raises(runtime.NonFinite) as err:
            train_rloo(copy.deepcopy(model), tok, [PROBLEM], cfg, section="rloo_shaped")
        text = one_line(err)
        assert text.startswith("[rloo_shaped] error: step 1: training diverged (after its update")
        assert f"lower rloo_shaped.lr (1e+09) or {fix}" in text


def test_ipo_that_diverges_stops(tiny_dir, monkeypatch):
    real = ipo_loop.ipo_loss

    def inf_loss(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(loss=out.loss * math.inf)

    monkeypatch.setattr(ipo_loop, "ipo_loss", inf_loss)
    model, tok = load_model(str(tiny_dir))
    ref, _ = load_model(str(tiny_dir))
    with pytest.raises(runtime.NonFinite) as err:
        ipo_loop.train_ipo(model, ref.requires_grad_(False), tok, PAIRS,
                           config_of(IPO, "ipo", IPO_CFG))
    assert one_line(err).startswith("[ipo] error: step 1: training diverged (loss is inf")


# --------------------------------------------------------------------------- strict JSON
def test_details_are_strict_json_and_a_nan_is_refused_naming_its_key(tmp_path):
    good = {"loss_final": 0.25, "curve": [1.0, 2], "n": 3, "none": None}
    io.write_json(tmp_path / "good.json", good)
    assert strict_json((tmp_path / "good.json").read_text()) == good
    with pytest.raises(ValueError, match=r"bad\.json: loss_final, curve\.1 is nan or inf"):
        io.write_json(tmp_path / "bad.json", {**good, "loss_final": math.nan,
                                              "curve": [1.0, math.inf]})
    assert not (tmp_path / "bad.json").exists()  # nothing half-written


@settings(max_examples=40, deadline=None)  # a file per example: disk time varies
@given(st.recursive(st.none() | st.booleans() | st.integers() | finite | st.text(),
                    lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids),
                    max_leaves=20))
def test_every_finite_value_round_trips_through_a_strict_parser(tmp_path_factory, obj):
    path = tmp_path_factory.mktemp("json") / "d.json"
    io.write_json(path, obj)
    assert strict_json(path.read_text()) == obj


@pytest.mark.slow
def test_a_smoke_stage_writes_strict_json_and_lr_1e9_never_trains(pipeline):
    """The sft chain at smoke size: every details (and timing) file parses strictly; then
    `sft.lr: 1e9` stops at the params check, before DVC removes any output."""
    pipeline.repro("sft")
    written = sorted((pipeline.path / "reports").rglob("*.json"))
    assert any("details/sft/" in p.as_posix() for p in written), written
    for path in written:
        strict_json(path.read_text())
    before = pipeline.read("data/models/sft/r0/model.safetensors")
    pipeline.set_params({"sft": {"lr": 1e9}})
    proc = pipeline.repro("sft", check=False)
    assert proc.returncode != 0
    assert "`sft.lr` is 1000000000.0; allowed: a number > 0 and <= 1" in proc.stderr
    assert pipeline.read("data/models/sft/r0/model.safetensors") == before
