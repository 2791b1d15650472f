"""The IPO loop (S1 §3.1.3) on a tiny model: it separates chosen from rejected, starts at the
closed-form zero-margin loss, is deterministic, and rejects bad configs / data."""

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import RecordingLive, config_of
from test_sft import TINY, launch_two_processes

from countdown_rlvr.core.io import StageError
from countdown_rlvr.core.ipo_config import IPO
from countdown_rlvr.model.policy import build_tiny, load_model
from countdown_rlvr.train.ipo import pair_logprobs, pair_rows, train_ipo
from countdown_rlvr.train.losses import completion_nll
from countdown_rlvr.train.sft import collate, example_row

# chosen: the sum; rejected: the same operands subtracted (a scripted-style operator flip)
PAIRS = [{"prompt": f"Numbers: {a} {b}\n", "chosen": f"<answer>{a} + {b}</answer>",
          "rejected": f"<answer>{a} - {b}</answer>"} for a in range(1, 4) for b in range(1, 4)]
CFG = {"lr": 1e-2, "batch_size": 4, "max_len": 32, "max_steps": 20, "warmup_frac": 0.1,
       "beta": 0.5, "rpo_alpha": 0.0, "seed": 0, "log_every": 5, "time_budget_s": None,
       "val_frac": 0.0}  # every pair trained on; the held-out check sets its own
# (overrides of params.yaml's `ipo` section: tests/helpers.config_of)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny(TINY, tmp_path_factory.mktemp("tiny") / "m", seed=0)


def run(tiny_dir, cfg, pairs=PAIRS):
    model, tok = load_model(str(tiny_dir))
    ref, _ = load_model(str(tiny_dir))
    ref.eval().requires_grad_(False)
    live, st = RecordingLive(), {}
    model = train_ipo(model, ref, tok, pairs, config_of(IPO, "ipo", cfg), live=live, stats=st)
    return model, ref, live, st


def test_ipo_separates_pairs_and_starts_at_zero_margin(tiny_dir, one_thread):
    model, ref, live, st = run(tiny_dir, {**CFG, "val_frac": 0.2})
    assert st["steps"] == 20 and st["stopped_by"] == "max_steps"
    # ipo.val_frac of the pairs held out: the margin on them, 0 before (policy = reference),
    # rises after (the pairs share one pattern, + preferred to -: it generalises)
    assert st["pairs_used"] + st["val_pairs"] == len(PAIRS) and st["val_pairs"] >= 1
    assert st["val_margin_before"] == 0.0 and st["val_margin_after"] > 0.1, st
    # step 1: the policy is the reference, so the margin is 0 and the loss is (1/(2 beta))^2
    assert live.curve("margin")[0] == pytest.approx(0.0, abs=1e-5)
    assert live.curve("loss")[0] == pytest.approx((1 / (2 * CFG["beta"])) ** 2, rel=1e-5)
    assert live.curve("pref_acc")[0] == pytest.approx(0.0)  # 0 is not > 0
    # training moves the margin towards its target 1/(2 beta) = 1 and ranks every pair right
    assert 0.5 < st["margin_final"] < 1.5, st
    assert st["pref_acc_final"] == 1.0 and st["loss_final"] < 0.25 * st["loss_first"], st
    assert st["chosen_reward_final"] - st["rejected_reward_final"] == pytest.approx(
        st["margin_final"], abs=1e-5)
    assert {"train/ipo", "train/chosen_reward", "train/rejected_reward", "train/lr",
            "train/grad_norm"} <= {n for _, n, _ in live.rows}
    assert live.step == 20 and not model.training
    assert all(not p.requires_grad for p in ref.parameters())  # the reference is untouched

    # the trained policy, scored afresh (eval mode, one batch), prefers chosen on every pair
    _, tok = load_model(str(tiny_dir))
    rows = pair_rows(tok, PAIRS, 32)
    after, before = (pair_logprobs(m, rows, tok.pad_token_id, 16) for m in (model, ref))
    margins = [(c - r) - (rc - rr) for (c, r), (rc, rr) in zip(after, before)]
    assert min(margins) > 0, margins


def test_rpo_anchor_is_length_normalised_nll_and_run_is_deterministic(tiny_dir, one_thread):
    cfg = {**CFG, "rpo_alpha": 0.5, "max_steps": 6, "batch_size": len(PAIRS)}  # step 1: all pairs
    (m1, _, live1, _), (m2, _, live2, _) = run(tiny_dir, cfg), run(tiny_dir, cfg)
    # step 1 scores the initial model: its chosen NLL is the mean over pairs of each chosen
    # completion's per-token NLL (length-normalised), computed here one pair at a time
    model, tok = load_model(str(tiny_dir))
    per_pair = []
    for p in PAIRS:
        batch = collate([example_row(tok, p["prompt"], p["chosen"])], tok.pad_token_id)
        logits = model(input_ids=batch["input_ids"]).logits
        per_pair.append(completion_nll(logits, batch["input_ids"], batch["completion_mask"]).loss.item())
    assert live1.curve("chosen_nll")[0] == pytest.approx(sum(per_pair) / len(per_pair), rel=1e-5)
    # loss = IPO term + alpha * (mean per-token NLL of the chosen completion), every step
    for loss, ipo, nll in zip(live1.curve("loss"), live1.curve("ipo"),
                              live1.curve("chosen_nll")):
        assert loss == pytest.approx(ipo + 0.5 * nll, rel=1e-5)
    assert live1.curve("chosen_nll")[0] > 0
    assert live1.rows == live2.rows
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))


def test_ipo_rejects_bad_config_and_unusable_pairs(tiny_dir):
    with pytest.raises(StageError, match="`ipo.pack` is not a param"):  # no packing of pairs
        config_of(IPO, "ipo", {**CFG, "pack": True})
    with pytest.raises(StageError, match=r"`ipo.margin` is not a param .*\(known in `ipo`: .*beta"):
        config_of(IPO, "ipo", {**CFG, "margin": 5})
    assert config_of(IPO, "ipo", {k: v for k, v in CFG.items() if k != "beta"}).beta == 0.1  # params.yaml
    with pytest.raises(ValueError, match="no preference pairs"):
        run(tiny_dir, CFG, pairs=[])
    # a prompt that fills max_len leaves no completion token to compare: the pair is dropped
    long = [{**PAIRS[0], "prompt": "Numbers: " + "1 " * 40 + "\n"}]
    _, tok = load_model(str(tiny_dir))
    assert pair_rows(tok, long + PAIRS[:2], 32) == pair_rows(tok, PAIRS[:2], 32)
    with pytest.raises(ValueError, match="max_len=32"):
        run(tiny_dir, CFG, pairs=long)


_LAUNCHED = textwrap.dedent("""
    import json, sys
    from countdown_rlvr.model.policy import load_model
    from countdown_rlvr.train.ipo import train_ipo
    from countdown_rlvr.core.ipo_config import IPO
    from countdown_rlvr.train.runtime import is_main_process
    from helpers import config_of
    from test_ipo import CFG, PAIRS

    model, tok = load_model(sys.argv[1])
    ref, _ = load_model(sys.argv[1])
    st = {}
    train_ipo(model, ref.requires_grad_(False), tok, PAIRS[:8], config_of(IPO, "ipo", {**CFG, "max_steps": 8}),
              stats=st)
    if is_main_process():
        print("STATS" + json.dumps(st))
""")


@pytest.mark.slow
def test_two_processes_train_like_one(tiny_dir, tmp_path, one_thread):
    """batch_size is the global number of pairs: 2 processes x 2 pairs follow the 1 x 4 run.

    Each process must get whole pairs (chosen with its own rejected and reference scores).
    8 pairs: every batch, the last included, splits evenly over the processes (a last batch
    that does not is padded by accelerate, so only then would the runs differ)."""
    script = tmp_path / "launched.py"
    script.write_text(_LAUNCHED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(  # the caller's PYTHONPATH (a worktree's src) too
        [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(launch_two_processes(str(script), str(tiny_dir)), check=False,
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    two = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("STATS"))[5:])
    *_, one = run(tiny_dir, {**CFG, "max_steps": 8}, PAIRS[:8])
    assert two["processes"] == 2 and one["processes"] == 1
    for key in ("loss_first", "margin_final", "pref_acc_final", "chosen_reward_final",
                "rejected_reward_final", "chosen_nll_final"):
        assert two[key] == pytest.approx(one[key], rel=1e-3, abs=1e-4), key
