"""The on-policy loop: RLOO learns from contrast, flat groups give no update, diagnostics,
determinism, config errors, the success-gated curriculum, and OPD's forward KL."""

import copy
import dataclasses
import itertools

import pytest
import torch
from helpers import RecordingLive, config_of

from countdown_rlvr.core.io import StageError
from countdown_rlvr.core.rl_config import OPD, RL
from countdown_rlvr.core.sections import problems_in
from countdown_rlvr.core.train_config import SFTStage
from countdown_rlvr.model.logprobs import sequence_logprobs
from countdown_rlvr.model.policy import build_tiny, load_model
from countdown_rlvr.model.sampling import Sample
from countdown_rlvr.train.rloo import (
    DIAGNOSTICS,
    Curriculum,
    _loss,
    _Sums,
    curriculum_tiers,
    micro_batches,
    pack_rollouts,
    reference_logprobs,
    step_problems,
    train_rloo,
    zero_std_weights,
)
from countdown_rlvr.train.sft import collate, encode, train_sft

# hidden 32, one layer: ~15k parameters (as in test_sft)
TINY = {"hidden_size": 32, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1,
        "intermediate_size": 64, "max_positions": 64}
PROBLEM = {"numbers": [2, 3, 4], "target": 14}
PROMPT = "Numbers: 2 3 4 Target: 14\n"
GOOD, BAD = "<answer>2 + 3 * 4</answer>", "<answer>2 * 3 + 4</answer>"  # 14 (correct) / 10
# overrides of params.yaml's `rloo` section (tests/helpers.config_of): a few small steps
CFG = {"steps": 3, "lr": 3e-4, "group_size": 8, "prompts_per_step": 1, "kl_coef": 0.0,
       "entropy_coef": 0.0, "sampler": {"temperature": 1.0, "max_new_tokens": 16},
       "log_every": 100, "micro_batch": None, "weight_decay": 0.0, "curriculum": False,
       "curriculum_target_bins": 2, "curriculum_threshold": 0.3, "gen_batch_size": 64}


def rl(over: dict) -> RL:
    """The RL config of CFG + `over`; an OPD one (params.yaml's `opd` section) with distill keys."""
    if "distill_coef" in over:
        return config_of(OPD, "opd", {**CFG, "teacher_strategy": None, **over})
    return config_of(RL, "rloo", {**CFG, **over})


def run_rloo(model, tok, problems, over: dict, **kw):
    return train_rloo(model, tok, problems, rl(over), **kw)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny(TINY, tmp_path_factory.mktemp("tiny") / "m", seed=0)


@pytest.fixture(scope="module")
def toy_policy(tiny_dir, one_thread):
    """A policy that answers PROBLEM with GOOD or BAD about half the time each."""
    model, tok = load_model(str(tiny_dir))
    model = train_sft(model, tok, [(PROMPT, GOOD), (PROMPT, BAD)] * 4,
                      config_of(SFTStage, "sft", {"lr": 1e-2, "batch_size": 8, "max_len": 40,
                                                  "max_steps": 300, "seed": 0,
                                                  "warmup_frac": 0.0, "weight_decay": 0.0,
                                                  "time_budget_s": None, "early_step": None}))
    return model, tok


def completion_logprobs(model, tok) -> list[float]:
    rows = [encode(tok, PROMPT, c) for c in (GOOD, BAD)]
    batch = collate([(ids, [0] * n + [1] * (len(ids) - n)) for ids, n in rows], tok.pad_token_id)
    with torch.no_grad():
        return sequence_logprobs(model, batch["input_ids"], batch["attention_mask"],
                                 batch["completion_mask"]).sum.tolist()


def test_rloo_moves_probability_to_the_correct_answer(toy_policy, one_thread):
    model, tok = toy_policy
    good0, bad0 = completion_logprobs(model, tok)
    assert abs(good0 - bad0) < 0.3  # both answers are likely before RL
    st = {}
    trained = run_rloo(copy.deepcopy(model), tok, [PROBLEM], {**CFG, "steps": 10}, stats=st)
    good, bad = completion_logprobs(trained, tok)
    # mass moves from the wrong answer to the right one: the log-odds between them grow by
    # more than one nat, and the right answer's own log-prob rises
    assert (good - bad) - (good0 - bad0) > 1.0 and good > good0 + 0.1, (good0, bad0, good, bad)
    assert st["zero_std_frac_first"] == 0.0  # mixed groups: the LOO baseline has contrast
    assert st["advantage_std_first"] > 0.3
    assert st["pass_rate_final"] > st["pass_rate_first"]


def test_rloo_logs_every_diagnostic_and_is_deterministic(toy_policy, one_thread):
    model, tok = toy_policy
    cfg = {**CFG, "kl_coef": 0.05, "entropy_coef": 0.01, "reward": "shaped"}
    runs = []
    for _ in range(2):
        ref = copy.deepcopy(model).eval().requires_grad_(False)
        live, st = RecordingLive(), {}
        trained = run_rloo(copy.deepcopy(model), tok, [PROBLEM], cfg, ref_model=ref, live=live,
                             stats=st)
        runs.append((trained.state_dict(), live.rows, st))
    (w1, rows1, st), (w2, rows2, _) = runs
    assert all(torch.equal(w1[k], w2[k]) for k in w1)  # same seed: same final weights
    assert rows1 == rows2
    logged = {n for _, n, _ in rows1}
    assert logged == {f"train/{k}" for k in DIAGNOSTICS if k != "forward_kl"}  # no tier: no curriculum
    live = RecordingLive()
    live.rows = rows1
    for name in logged:
        assert len(live.curve(name.removeprefix("train/"))) == cfg["steps"]
    assert st["steps"] == 3 and st["rollouts"] == 3 * 8
    assert st["groups"] == 3 and 0 <= st["zero_std_groups"] <= 3
    assert st["tier_final"] is None and st["tier_unlock_step"] is None
    # the training forward re-scores the sampled tokens exactly as the sampler drew them
    # (temperature 1, no truncation): pi / mu = 1 on the first, on-policy step
    assert st["is_weight_mean_first"] == pytest.approx(1.0, abs=1e-4)
    assert st["is_clip_frac_first"] == 0.0
    assert st["kl_first"] == pytest.approx(0.0, abs=1e-6)  # the policy still equals the reference
    assert st["kl_final"] > 0
    assert 0 < st["reward_mean_first"] < 1 and st["response_len_first"] > 5
    assert 0 <= st["entropy_first"]
    assert st["seconds"] > 0 and st["generate_seconds"] > 0


def test_tempered_rollouts_are_scored_under_the_tempered_policy(tiny_dir, one_thread):
    """At a rollout temperature T != 1 the optimised policy is softmax(z / T), the one that
    sampled: the first (on-policy) step's IS weight is 1, and the KL to an identical
    reference is 0."""
    model, tok = load_model(tiny_dir)
    cfg = {**CFG, "steps": 1, "kl_coef": 0.05, "sampler": {**CFG["sampler"], "temperature": 0.7}}
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    st = {}
    run_rloo(copy.deepcopy(model), tok, [PROBLEM], cfg, ref_model=ref, stats=st)
    assert st["is_weight_mean_first"] == pytest.approx(1.0, abs=1e-4)
    assert st["is_clip_frac_first"] == 0.0
    assert st["kl_first"] == pytest.approx(0.0, abs=1e-6)


def test_length_sorted_micro_batches_give_the_whole_batch_gradient(tiny_dir, one_thread):
    """Micro-batches sorted by completion length and cut to their own width give the same
    reference log-probs and the same accumulated gradient as one whole-batch forward."""
    model, tok = load_model(tiny_dir)
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    with torch.no_grad():  # a reference that differs from the policy: the KL term is not 0
        for p in ref.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    g = torch.Generator().manual_seed(0)
    lengths = [[3, 12, 5, 16], [1, 9, 7, 14]]
    samples = [[Sample(text="", token_ids=torch.randint(10, model.config.vocab_size, (n,),
                                                        generator=g).tolist(),
                       n_tokens=n, finish_reason="stop", logprobs=[-2.0] * n) for n in group]
               for group in lengths]
    ro = pack_rollouts(tok, [PROMPT, "Numbers: 1 2 Target: 3\n"], samples, "cpu")
    B, T = 8, 0.7
    chunks = micro_batches(ro.mask.sum(-1), 3)
    assert [ro.mask[c].sum(-1).tolist() for c in chunks] == [[16, 14, 12], [9, 7, 5], [3, 1]]
    assert micro_batches(ro.mask.sum(-1), 8) == micro_batches(ro.mask.sum(-1), None) == [slice(0, B)]
    whole = [slice(0, B)]
    ref_whole = reference_logprobs(ref, ro, whole, T)
    assert torch.allclose(reference_logprobs(ref, ro, chunks, T), ref_whole, atol=1e-5)
    assert (ref_whole[ro.mask == 0] == 0).all() and (ref_whole[ro.mask == 1] < 0).all()
    cfg = rl({"kl_coef": 0.1, "entropy_coef": 0.01, "sampler": {"temperature": T}})
    adv = torch.randn(B, generator=g)

    def grads(selection):
        model.zero_grad()
        ref_logp = reference_logprobs(ref, ro, selection, T)
        for c in selection:
            _loss(model, ro, c, adv, ref_logp, None, cfg, _Sums()).backward()
        return [p.grad.clone() for p in model.parameters()]

    for a, b in zip(grads(whole), grads(chunks)):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)
    assert any(a.abs().sum() > 0 for a in grads(whole))


def test_zero_std_weights_choose_whole_flat_groups_at_rate_keep():
    """Informative groups always enter the update with weight 1; of the Z flat ones a seeded
    ceil(keep * Z) do, weighted Z / ceil(keep * Z), each flat group equally often."""
    rewards = torch.tensor([[0.0, 0, 0, 0], [0, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0],
                            [0, 0, 0, 0], [0.1, 0.1, 0.1, 0.1]])  # flat: groups 0, 2, 3, 4, 5
    assert torch.equal(zero_std_weights(rewards, 1.0, 0, 0), torch.ones(24))
    counts = torch.zeros(6)
    for step in range(500):
        w = zero_std_weights(rewards, 0.25, 0, step).view(6, 4)
        assert torch.equal(w, zero_std_weights(rewards, 0.25, 0, step).view(6, 4))  # seeded
        assert (w == w[:, :1]).all() and (w[1] == 1).all()  # whole groups
        kept = w[:, 0] > 0
        flat_kept = kept & (torch.arange(6) != 1)
        assert int(flat_kept.sum()) == 2 and torch.all(w[flat_kept] == 2.5)  # ceil(5 / 4) = 2
        counts += kept.float()
    assert counts[1] == 500
    assert all(abs(c - 200) < 45 for c in counts[[0, 2, 3, 4, 5]].tolist())  # 2 of 5 each step
    chunks = micro_batches(torch.tensor([3, 9, 5, 7]), 2, torch.tensor([1.0, 0, 2, 1]))
    assert [c.tolist() for c in chunks] == [[3, 2], [0]]  # weighted rows, longest first
    assert micro_batches(torch.tensor([3, 9, 5, 7]), None, torch.tensor([0.0, 0, 0, 0])) == []


def test_leaving_out_flat_groups_keeps_the_expected_gradient(tiny_dir, one_thread):
    """Averaged over every choice `zero_std_weights` can make, the gradient of the weighted
    update equals the whole batch's (KL and entropy terms on, a reference that differs): the
    subsampled loss is unbiased, and each choice forwards only the rows it keeps."""
    model, tok = load_model(tiny_dir)
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    g = torch.Generator().manual_seed(0)
    lengths = [[3, 12, 5, 16], [1, 9, 7, 14], [4, 6, 2, 8]]
    samples = [[Sample(text="", token_ids=torch.randint(10, model.config.vocab_size, (n,),
                                                        generator=g).tolist(),
                       n_tokens=n, finish_reason="stop", logprobs=[-2.0] * n) for n in group]
               for group in lengths]
    ro = pack_rollouts(tok, [PROMPT, PROMPT, PROMPT], samples, "cpu")
    adv = torch.cat([torch.zeros(4), torch.randn(4, generator=g), torch.zeros(4)])  # 0, 2 flat
    cfg = rl({"kl_coef": 0.1, "entropy_coef": 0.01, "micro_batch": 3})

    def grads(weight):
        r = ro._replace(weight=weight)
        chunks = micro_batches(r.mask.sum(-1), 3, weight)
        model.zero_grad()
        ref_logp = reference_logprobs(ref, r, chunks, 1.0)
        for c in chunks:
            _loss(model, r, c, adv, ref_logp, None, cfg, _Sums()).backward()
        return [p.grad.clone() for p in model.parameters()], sum(len(c) for c in chunks)

    full, n_full = grads(torch.ones(12))
    one, two = torch.tensor([2.0] * 4 + [1] * 4 + [0] * 4), torch.tensor([0.0] * 4 + [1] * 8)
    two[8:] = 2.0
    (ga, na), (gb, nb) = grads(one), grads(two)  # keep 0.5 of 2 flat groups: one each, x2
    assert (n_full, na, nb) == (12, 8, 8)
    for f, a, b in zip(full, ga, gb):
        assert torch.allclose(f, (a + b) / 2, rtol=1e-4, atol=1e-6)
    assert any(not torch.allclose(f, a, rtol=1e-4, atol=1e-6) for f, a in zip(full, ga))


def test_flat_reward_groups_give_zero_std_and_no_update(tiny_dir, one_thread):
    """An untrained model never writes an answer: every binary reward is 0, every group is
    flat, every advantage is exactly 0, and (with no KL / entropy term) nothing moves."""
    model, tok = load_model(str(tiny_dir))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    problems = [{"numbers": [1, 2, 3], "target": 6}, {"numbers": [1, 2, 3], "target": 9},
                {"numbers": [1, 2, 3, 4], "target": 24}, {"numbers": [2, 3, 4, 5], "target": 70}]
    cfg = {**CFG, "steps": 4, "group_size": 4, "prompts_per_step": 2, "lr": 1e-2,
           "reward": "binary", "curriculum": True, "curriculum_window": 1,
           "curriculum_threshold": 0.0, "curriculum_target_bins": 1}
    live, st = RecordingLive(), {}
    model = run_rloo(model, tok, problems, cfg, live=live, stats=st)
    assert live.curve("zero_std_frac") == [1.0] * 4
    assert live.curve("reward_std") == [0.0] * 4 and live.curve("advantage_std") == [0.0] * 4
    assert live.curve("reward_mean") == [0.0] * 4 and live.curve("pass_rate") == [0.0] * 4
    assert st["zero_std_frac_final"] == 1.0
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    # threshold 0, window 1: a tier unlocks after every step, up to the 2 operand-count tiers
    assert live.curve("tier") == [0.0, 1.0, 1.0, 1.0]
    assert st["tier_final"] == 1 and st["tier_unlock_step"] == 1 and st["tier_unlock_steps"] == [1]
    assert (st["zero_std_groups"], st["groups"]) == (4 * 2, 4 * 2)  # every group flat
    # the first tier's share: all of step 0's prompts, then a draw from both tiers
    shares = live.curve("first_tier_share")
    assert shares[0] == 1.0 and all(x in (0.0, 0.5, 1.0) for x in shares)
    assert st["first_tier_pass_rate_first"] == 0.0


def test_the_first_tiers_pass_rate_is_pooled_by_its_share_of_each_step():
    """group_sums logs the first tier's pass rate and share; first_tier_rates pools the first
    and last 10% of steps by share, so a step that drew no first-tier prompt counts for
    nothing (its rate, 0 / 0, is not a 0)."""
    from countdown_rlvr.train.rloo import first_tier_rates, group_sums

    correct = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    sums = group_sums(correct, correct, torch.zeros(8), torch.ones(8, 3),
                      torch.tensor([True, False]))
    row = {k: s / w for k, (s, w) in sums.v.items() if k.startswith("first_tier")}
    assert row == {"first_tier_pass_rate": 0.5, "first_tier_share": 0.5}
    curve = [{"first_tier_pass_rate": 0.2, "first_tier_share": 1.0},
             {"first_tier_pass_rate": 0.0, "first_tier_share": 0.0}] * 5 + \
            [{"first_tier_pass_rate": 0.6, "first_tier_share": 0.25},
             {"first_tier_pass_rate": 0.4, "first_tier_share": 0.75}] * 5
    assert first_tier_rates(curve) == {"first_tier_pass_rate_first": pytest.approx(0.2),
                                       "first_tier_pass_rate_final": pytest.approx(0.45)}
    assert first_tier_rates([{"pass_rate": 0.3}] * 20) == {
        "first_tier_pass_rate_first": None, "first_tier_pass_rate_final": None}


def test_unknown_reward_and_bad_config_fail_before_any_model_work():
    # bad values: refused by the params check (the rules on rl_config.RL's fields), naming the key
    bad = problems_in({"rloo": {"reward": "bogus", "group_size": 1, "loss_agg": "tokens",
                                "sampler": {"temp": 1.0}}})
    assert any("`rloo.reward` is 'bogus'; allowed: one of binary, format, shaped" in b for b in bad)
    assert any("`rloo.group_size` is 1; allowed: an integer >= 2" in b for b in bad)
    assert any("`rloo.loss_agg` is 'tokens'; allowed: one of sum, mean" in b for b in bad)
    assert any("`rloo.sampler.temp` is not a param" in b for b in bad)
    # and when the stage builds its config, with unknown and missing keys, naming the fix
    with pytest.raises(StageError, match=r"`rloo.temperature` is not a param this pipeline "
                                         r"reads; .*\(known in `rloo`: .*reward"):
        rl({"temperature": 1.3})
    with pytest.raises(StageError, match=r"`rloo.distill_coef` is not a param"):  # OPD keys only
        config_of(RL, "rloo", {"distill_coef": 0.5})
    with pytest.raises(StageError, match=r"`rloo.sampler.temp` is not a param"):
        rl({"sampler": {"temp": 1.0}})
    # opd_ac lists only what differs from opd: the rest is inherited
    opd, ac = config_of(OPD, "opd"), config_of(OPD, "opd_ac", inherit="opd")
    assert ac.entropy_coef == 10 * opd.entropy_coef and ac.steps == opd.steps
    # the loop's own check, for a config built past the rules (dataclasses.replace)
    with pytest.raises(ValueError, match="unknown reward 'bogus'.*binary, format, shaped"):
        train_rloo(None, None, [PROBLEM], dataclasses.replace(rl({}), reward="bogus"))
    with pytest.raises(ValueError, match="needs a ref_model"):
        run_rloo(None, None, [PROBLEM], {"kl_coef": 0.1})


def test_curriculum_tiers_gate_and_problem_order():
    problems = [{"numbers": [1] * n, "target": t} for n, t in
                [(4, 50), (3, 90), (3, 10), (4, 20), (3, 40), (4, 80)]]
    tiers = curriculum_tiers(problems, target_bins=2)
    # operand count first, then target magnitude (equal-count bins)
    assert tiers == [[2, 4], [1], [3, 0], [5]]
    cur = Curriculum(tiers, window=2, threshold=0.5)
    assert cur.pool() == [2, 4]
    assert not cur.update(0.9)  # window not full yet
    assert not cur.update(0.0)  # mean 0.45 < 0.5
    assert cur.update(1.0) and cur.level == 1 and cur.pool() == [2, 4, 1]  # mean 0.5
    assert not cur.update(1.0)  # the window restarted
    for _ in range(6):
        cur.update(1.0)
    assert cur.level == 3  # capped at the last tier
    assert cur.unlock_steps == [3, 5, 7]  # the first step drawn from tiers 1, 2, 3
    # a curriculum batch comes from the pool only; seeded
    for step in range(5):
        batch = step_problems(6, 2, step, seed=0, pool=[2, 4, 1])
        assert set(batch) <= {2, 4, 1} and len(set(batch)) == 2
        assert batch == step_problems(6, 2, step, seed=0, pool=[2, 4, 1])
    # without a curriculum: every problem once per epoch, a new order each epoch
    epochs = [[i for s in range(3 * e, 3 * e + 3) for i in step_problems(6, 2, s, seed=0)]
              for e in range(2)]
    assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(6))
    assert epochs[0] != epochs[1]
    assert step_problems(6, 2, 0, seed=1) != step_problems(6, 2, 0, seed=0) or \
        step_problems(6, 2, 1, seed=1) != step_problems(6, 2, 1, seed=0)


def test_the_four_number_tier_unlocks_once_three_number_success_crosses_tau():
    """One target bin (the default): tier 0 = 3-number problems, tier 1 adds the 4-number
    ones; the unlock waits for a full window whose mean rollout accuracy reaches tau."""
    problems = [{"numbers": [1] * n, "target": t} for n, t in [(3, 5), (4, 6), (3, 7), (4, 8)]]
    tiers = curriculum_tiers(problems, target_bins=1)
    assert tiers == [[0, 2], [1, 3]]
    cur = Curriculum(tiers, window=8, threshold=0.35)
    accuracy = [0.18, 0.2, 0.25, 0.3, 0.3, 0.3, 0.35, 0.4,  # mean 0.285: stays on tier 0
                0.3, 0.3, 0.3, 0.6]  # the window slides: its mean first reaches 0.35 at step 11
    levels = []
    for a in accuracy:
        levels.append(cur.level)
        cur.update(a)
    assert levels == [0] * 12 and cur.level == 1 and cur.unlock_steps == [12]
    assert sorted(cur.pool()) == [0, 1, 2, 3]  # 3- and 4-number problems mixed
    assert not cur.update(1.0) and cur.level == 1  # no tier beyond the last


def test_the_deadline_unlocks_a_tier_that_success_did_not():
    """A gate the rollouts never reach still unlocks after `deadline` steps at a tier, and the
    window restarts; success before the deadline unlocks as without one."""
    tiers = [[0], [1], [2]]
    cur = Curriculum(tiers, window=2, threshold=0.9, deadline=3)
    for _ in range(7):
        cur.update(0.0)
    assert cur.unlock_steps == [3, 6] and cur.deadline_unlocks == 2 and cur.level == 2
    early = Curriculum(tiers, window=2, threshold=0.5, deadline=5)
    for a in (0.6, 0.6):
        early.update(a)
    assert early.unlock_steps == [2] and early.deadline_unlocks == 0


@pytest.mark.parametrize("over", [{"kl_coef": 0.5, "entropy_coef": 0.5},
                                  {"kl_coef": 0.0, "entropy_coef": 0.5, "ppo_epochs": 2}])
def test_a_step_with_no_advantage_leaves_the_weights_unchanged(tiny_dir, one_thread, over):
    """Every group flat (an untrained model never answers: binary reward 0 everywhere), with
    KL and entropy terms that would give a gradient: the weights do not move, and the
    diagnostics (KL, entropy) are still measured and logged for every step."""
    model, tok = load_model(str(tiny_dir))
    ref = copy.deepcopy(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    problems = [{"numbers": [1, 2, 3], "target": 6}, {"numbers": [2, 3, 4, 5], "target": 70}]
    live, st = RecordingLive(), {}
    model = run_rloo(model, tok, problems, {"steps": 3, "group_size": 4, "prompts_per_step": 2,
                                            "lr": 1e-2, "reward": "binary", **over},
                     ref_model=ref, live=live, stats=st)
    assert live.curve("advantage_std") == [0.0] * 3
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert st["no_signal_steps"] == 3
    assert len(live.curve("entropy")) == 3 and all(e > 0 for e in live.curve("entropy"))
    assert len(live.curve("kl")) == (3 if over["kl_coef"] else 0)


def test_opd_forward_kl_is_zero_for_the_student_itself_and_falls_toward_a_teacher(
        toy_policy, tiny_dir, one_thread):
    model, tok = toy_policy
    cfg = {**CFG, "steps": 1, "distill_coef": 0.5, "rl_coef": 0.5, "distill_temperature": 1.0}
    live, st = RecordingLive(), {}
    run_rloo(copy.deepcopy(model), tok, [PROBLEM], cfg, teacher=copy.deepcopy(model),
               live=live, stats=st)
    assert st["forward_kl_first"] == pytest.approx(0.0, abs=1e-6)
    assert len(live.curve("forward_kl")) == 1

    # a different teacher (the untrained model: near uniform), distillation only, T = 1.3:
    # the student moves toward it, so the forward KL falls step by step
    teacher, _ = load_model(str(tiny_dir))
    cfg = {**CFG, "steps": 4, "lr": 3e-3, "distill_coef": 1.0, "rl_coef": 0.0,
           "distill_temperature": 1.3}
    live, st = RecordingLive(), {}
    run_rloo(copy.deepcopy(model), tok, [PROBLEM], cfg, teacher=teacher, live=live, stats=st)
    kl = live.curve("forward_kl")
    assert kl[0] > 0.5 and all(b < a for a, b in itertools.pairwise(kl)), kl
