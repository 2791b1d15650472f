"""The supervised loop: completion-only loss, determinism, adapters, multi-process launch."""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import RecordingLive, config_of
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.core.io import StageError
from countdown_rlvr.core.train_config import SFTStage
from countdown_rlvr.model.policy import build_tiny, load_model, n_parameters
from countdown_rlvr.train.losses import completion_nll
from countdown_rlvr.train.runtime import apply_adapter
from countdown_rlvr.train.sft import collate, encode, train_sft

# hidden 32, one layer: ~15k parameters, builds and trains in a second or two
TINY = {"hidden_size": 32, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1,
        "intermediate_size": 64, "max_positions": 64}
TOY = [(f"Numbers: {a} {b}\n", f"<answer>{a} + {b}</answer>") for a in range(1, 5)
       for b in range(1, 5)]
# overrides of params.yaml's `sft` section (tests/helpers.config_of); no early checkpoint (the
# stage's, tested with the stage)
CFG = {"lr": 1e-2, "batch_size": 4, "max_len": 32, "max_steps": 40, "warmup_frac": 0.1,
       "seed": 0, "log_every": 5, "weight_decay": 0.0, "time_budget_s": None,
       "early_step": None}


def cfg(**overrides) -> SFTStage:
    return config_of(SFTStage, "sft", {**CFG, **overrides})


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny(TINY, tmp_path_factory.mktemp("tiny") / "m", seed=0)


def test_encode_masks_prompt_and_appends_eos(tiny_dir):
    _, tok = load_model(str(tiny_dir))
    ids, n_prompt = encode(tok, "Numbers: 1 2\n", "<answer>1 + 2</answer>")
    assert ids[:n_prompt] == tok("Numbers: 1 2\n").input_ids
    assert tok.decode(ids[n_prompt:]) == "<answer>1 + 2</answer>" + tok.eos_token
    ids, n_prompt = encode(tok, "", "1 + 2 = 3")  # pre-training: EOS as document start
    assert n_prompt == 1 and ids[0] == ids[-1] == tok.eos_token_id
    batch = collate([([5, 6, 7], [0, 1, 1]), ([5, 6, 7, 8, 9], [0, 0, 1, 1, 1])], pad_id=0)
    assert batch["completion_mask"].tolist() == [[0, 1, 1, 0, 0], [0, 0, 1, 1, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]


def test_sft_loss_only_sees_completion_tokens(tiny_dir):
    model, tok = load_model(str(tiny_dir))
    rows = [encode(tok, p, c) for p, c in TOY[:3]]
    batch = collate([(ids, [0] * n + [1] * (len(ids) - n)) for ids, n in rows], tok.pad_token_id)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    loss = completion_nll(logits, batch["input_ids"], batch["completion_mask"]).loss
    # the same number from per-example cross-entropy over completion tokens only
    terms = []
    for b, (ids, n) in enumerate(rows):
        lp = torch.log_softmax(logits[b, n - 1:len(ids) - 1], -1)
        terms.append(-lp.gather(-1, torch.tensor(ids[n:])[:, None]).squeeze(-1))
    assert loss.item() == pytest.approx(torch.cat(terms).mean().item(), rel=1e-5)
    # relabelling prompt tokens (labels only; the logits stay) leaves the loss unchanged
    relabelled = batch["input_ids"].clone()
    relabelled[batch["completion_mask"] == 0] = 7
    again = completion_nll(logits, relabelled, batch["completion_mask"]).loss
    assert again.item() == loss.item()


def test_train_sft_learns_and_is_deterministic(tiny_dir):
    weights, stats = [], []
    for _ in range(2):
        model, tok = load_model(str(tiny_dir))
        st = {}
        model = train_sft(model, tok, TOY, cfg(), stats=st)
        weights.append({k: v.clone() for k, v in model.state_dict().items()})
        stats.append(st)
    st = stats[0]
    assert st["steps"] == 40 and st["stopped_by"] == "max_steps"
    assert st["loss_final"] < 0.5 * st["loss_first"], st
    assert st["token_acc_final"] > st["token_acc_first"]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert stats[0]["loss_final"] == stats[1]["loss_final"]
    assert not model.training  # handed back ready for evaluation


def test_train_sft_time_budget_packing_and_logging(tiny_dir):
    model, tok = load_model(str(tiny_dir))
    live, st = RecordingLive(), {}
    # a budget of 0 (which the rules refuse: built past them) stops after the first step
    c = dataclasses.replace(cfg(epochs=3, pack=True, max_len=16), time_budget_s=0)
    train_sft(model, tok, [("", c) for _, c in TOY], c, live=live, stats=st)
    assert st["steps"] == 1 and st["stopped_by"] == "time_budget"
    assert st["tokens_processed"] == 4 * 16  # packed: full blocks, no padding
    assert {name for _, name, _ in live.rows} >= {"train/loss", "train/token_acc"}
    assert live.step == 1


def test_config_errors_name_the_fix():
    with pytest.raises(StageError, match=r"`sft.learning_rate` is not a param .*known in `sft`: .*lr"):
        cfg(learning_rate=1.0)
    with pytest.raises(StageError, match="epochs` or `max_steps.*fix the `sft:` section"):
        cfg(max_steps=None)
    params = {"sft": {k: v for k, v in vars(cfg()).items() if k != "lr"}}
    with pytest.raises(StageError, match="missing \\['lr'\\]; add them to the `sft:` section"):
        from countdown_rlvr.core.config import from_section
        from_section(SFTStage, "sft", params, "sft")


def test_the_sft_stage_also_saves_its_policy_at_early_step(tiny_dir, tmp_path):
    """stages/sft.py with sft.early_step: the policy after that step of the same run is saved
    as sft_early (a loadable policy, not the final weights), and the details say which step."""
    import shutil

    import yaml

    root = Path(__file__).resolve().parents[1]
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sft"].update(CFG, max_steps=4, early_step=2)
    seed = params["replicates"]["seeds"][0]  # a seed the params check accepts
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    shutil.copytree(tiny_dir, tmp_path / "data/models/base")
    for split in ("train", "val"):
        (tmp_path / f"data/sft/{split}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"data/sft/{split}.jsonl").write_text("".join(
            json.dumps({"prompt": p, "completion": c}) + "\n" for p, c in TOY))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(root / "stages/sft.py"), str(seed)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    early, _ = load_model(str(tmp_path / f"data/models/sft_early/r{seed}"))
    final, _ = load_model(str(tmp_path / f"data/models/sft/r{seed}"))
    base, _ = load_model(str(tiny_dir))
    weights = [m.state_dict() for m in (early, final, base)]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])  # not final
    assert any(not torch.equal(weights[0][k], weights[2][k]) for k in weights[0])  # trained
    details = json.loads((tmp_path / f"reports/details/sft/r{seed}.json").read_text())
    assert details["early_step"] == 2 and details["steps"] == 4


def test_apply_adapter_trainable_counts(tiny_dir):
    # Per layer (in -> out): q 32->32, k 32->16, v 32->16, o 32->32, gate/up 32->64, down 64->32.
    # LoRA adds r * (in + out) per matrix; DoRA also a magnitude vector of size `out`.
    r = 4
    lora = r * (64 + 48 + 48 + 64 + 96 + 96 + 96)
    dora = lora + (32 + 16 + 16 + 32 + 64 + 64 + 32)

    def trainable(m):
        return sum(p.numel() for p in m.parameters() if p.requires_grad)

    for adapter, expected in (("lora", lora), ("dora", dora)):
        model, _ = load_model(str(tiny_dir))
        assert trainable(apply_adapter(model, adapter, r, 8, 0.0, "all-linear")) == expected
    model, _ = load_model(str(tiny_dir))
    assert trainable(apply_adapter(model, "full", r, 8, 0.0, "all-linear")) == n_parameters(model)
    with pytest.raises(ValueError, match="valid: lora, dora, full"):
        apply_adapter(model, "reft", r, 8, 0.0, "all-linear")


_LAUNCHED = textwrap.dedent("""
    import sys
    from countdown_rlvr.model.policy import load_model
    from countdown_rlvr.train.runtime import is_main_process
    from countdown_rlvr.train.sft import train_sft
    from test_sft import TOY, cfg

    model, tok = load_model(sys.argv[1])
    st = {}
    model = train_sft(model, tok, TOY, cfg(max_steps=10), stats=st)
    assert st["processes"] == 2, st
    if is_main_process():  # only rank 0 writes
        model.save_pretrained(sys.argv[2])
        tok.save_pretrained(sys.argv[2])
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_processes(*script_and_args: str) -> list[str]:
    """`accelerate launch` argv for two CPU processes on this machine."""
    cli = Path(sys.executable).parent / "accelerate"
    return [str(cli) if cli.exists() else "accelerate", "launch", "--multi_gpu",
            "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
            "--dynamo_backend", "no", "--main_process_port", str(_free_port()), *script_and_args]


@pytest.mark.slow
def test_accelerate_launch_two_processes(tiny_dir, tmp_path):
    """Two CPU processes in one gloo group, then reload what rank 0 saved.

    `--multi_gpu` is what starts N processes (torchrun) on a CPU-only machine too: the
    trainer then asks accelerate for CPU, which makes them a gloo group. (`--cpu` alone
    starts a single process unless an MPI hostfile is given.)
    """
    script = tmp_path / "launched.py"
    script.write_text(_LAUNCHED)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(  # the caller's PYTHONPATH (a worktree's src) too
        [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(launch_two_processes(str(script), str(tiny_dir), str(out)),
                          check=False, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "on 2 process(es)" in proc.stdout
    model, tok = load_model(str(out))
    ids = tok(TOY[0][0], return_tensors="pt").input_ids
    assert model(input_ids=ids).logits.shape[-1] == len(tok)


@pytest.mark.slow
def test_sft_stage_under_accelerate_two_processes(pipeline):
    """The real `sft` stage on smoke params, launched as two CPU processes in a pipeline copy."""
    pipeline.repro("dedup")  # the stage's inputs: data/sft and data/models/base
    proc = pipeline.run(*launch_two_processes("stages/sft.py", "0"))  # replicate seed 0
    assert "on 2 process(es)" in proc.stdout
    assert json.loads(pipeline.read("reports/timings/sft/r0.json"))["processes"] == 2
    metrics = json.loads(pipeline.read("reports/details/sft/r0.json"))
    assert metrics["steps"] == metrics["planned_steps"] == 4, metrics  # global batch: same steps
    assert metrics["val_examples"] > 0 and 0 < metrics["val_loss"] < 20
    assert 0 <= metrics["val_token_acc"] <= 1
    model, tok = load_model(str(pipeline.path / "data/models/sft/r0"))
    ids = tok(TOY[0][0], return_tensors="pt").input_ids
    assert model(input_ids=ids).logits.shape[-1] == len(tok)


def test_resolve_base_follows_ref_json(tmp_path, tiny_dir):
    from countdown_rlvr.model.policy import resolve_base

    (tmp_path / "REF.json").write_text('{"base": "Qwen/Qwen2.5-0.5B"}')
    assert resolve_base(tmp_path) == "Qwen/Qwen2.5-0.5B"  # pass-through base stage
    assert resolve_base(tiny_dir) == str(tiny_dir)  # a real model dir is itself


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 200), min_size=1, max_size=300), st.integers(1, 16),
       st.integers(0, 5))
def test_length_grouping_is_a_seeded_permutation_with_less_padding(lengths, bs, seed):
    from countdown_rlvr.train.runtime import SeededShuffle

    n = len(lengths)
    grouped = list(SeededShuffle(n, seed, lengths, bs, window=4))
    assert sorted(grouped) == list(range(n))  # every example once per epoch
    assert grouped == list(SeededShuffle(n, seed, lengths, bs, window=4))

    def padded(order):  # tokens after padding each consecutive batch to its longest row
        return sum(len(b) * max(lengths[i] for i in b)
                   for b in (order[j:j + bs] for j in range(0, n, bs)))
    if n % bs:  # a short last batch: sorting puts the longest rows in full batches, which
        return  # can pad more than chance does ([1] * 6 + [2], bs 4: 11 vs 10 tokens)
    # the same permutation's windows, each cut into batches in sorted order: never more padding
    assert padded(grouped) <= padded(list(SeededShuffle(n, seed)))
    if n <= 4 * bs:  # one window: exactly the padding of the fully sorted order
        assert padded(grouped) == padded(sorted(range(n), key=lambda i: -lengths[i]))


@pytest.mark.parametrize("n,bs,batches", [(31, 16, 2), (5, 16, 1), (32, 16, 2), (33, 16, 3)])
def test_no_example_is_dropped_in_an_epoch(n, bs, batches):
    """Self-distillation trains on a few dozen successful repairs: the last, partial batch
    of every epoch is kept, so each example is seen once per epoch."""
    from accelerate import Accelerator

    from countdown_rlvr.train.runtime import epochs, prepare_loop

    cfg = config_of(SFTStage, "sft", {"batch_size": bs, "max_steps": None, "epochs": 2})
    items = list(range(n))
    model = torch.nn.Linear(2, 2)
    _, loop = prepare_loop(Accelerator(cpu=True), model, items, cfg,
                           collate_fn=lambda rows: torch.tensor(rows))
    assert len(loop.loader) == batches and loop.total == 2 * batches
    it = epochs(loop)
    seen = torch.cat([next(it) for _ in range(batches)]).tolist()
    assert sorted(seen) == items  # one epoch: every example exactly once
