"""On-policy training: RLOO (S4 eq. 3, S1 §3.1.4) and on-policy distillation (S4 §3.3, Alg. 1).

One step (`train_rloo`):
  1. take `prompts_per_step` train problems (a seeded shuffle, or S1 Alg. 1's success-gated
     curriculum over (operand count, target bin) tiers);
  2. sample `group_size` completions per prompt from the current policy, keeping the sampler's
     per-token log-probs (the behaviour policy mu);
  3. score them with the verifier and `reward`; leave-one-out advantages per group;
  4. loss = rl_coef * RLOO policy gradient (clipped IS weight pi/mu per rollout)
            + kl_coef * k3 KL(pi || ref) - entropy_coef * H(pi)
            [+ distill_coef * forward KL(teacher^(1/T) || student^(1/T))  with a teacher: OPD]
     on the response tokens, then one AdamW step per `ppo_epochs`.

With `ppo_epochs: 1` (the default) the policy that is updated is the one that sampled: the
policy optimised is the tempered softmax(z / T) of the rollout sampler (`rollout_temperature`),
so the IS weight is 1 up to numerical noise; it departs from 1 on further epochs over the same
batch, or when the sampler truncates (top-k / top-p: mu is then the processed distribution,
see `sampling`).

Runs under `python` and `accelerate launch --num_processes N`: every process draws the step's
rollouts as one process would and trains on its share of the prompts (prompts_per_step must
divide evenly), DDP averages gradients, and
the diagnostics are reduced over processes before the main process logs them. Deterministic on
CPU for a fixed seed, and the same per step for any process count up to float rounding.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ..core.config import Replicates, from_section, seeds_key
from ..core.errors import StageError
from ..core.inputs import read_rows
from ..core.replicates import model_dir
from ..core.rl_config import INITS, RLRun
from ..data.traces import strategy_prompt
from ..model.logprobs import token_entropy, token_logprobs
from ..model.policy import n_parameters, render_prompts
from ..model.sampling import derive_seed, generate
from ..task.prompts import solve_prompt
from ..task.rewards import get_reward
from ..task.verify import verify
from . import runtime
from .losses import clipped_is_weight, forward_kl, rloo_advantages, rloo_policy_loss

# Per-step diagnostics (dvclive `train/<name>`; metrics JSON `<name>_first` / `<name>_final`).
DIAGNOSTICS = ("reward_mean", "reward_std", "zero_std_frac", "advantage_std", "response_len",
               "kl", "entropy", "is_weight_mean", "is_clip_frac", "pass_rate", "forward_kl",
               "loss", "grad_norm")


# --------------------------------------------------------------------------- problem order
def curriculum_tiers(problems: list[dict], target_bins: int) -> list[list[int]]:
    """S1 Alg. 1 tiers: problem indices by operand count, then target magnitude (equal-count
    bins within each operand count), easiest first. Empty tiers are dropped."""
    tiers = []
    for n in sorted({len(p["numbers"]) for p in problems}):
        idx = sorted((i for i, p in enumerate(problems) if len(p["numbers"]) == n),
                     key=lambda i: (problems[i]["target"], i))
        size = math.ceil(len(idx) / target_bins)
        tiers += [idx[k:k + size] for k in range(0, len(idx), size)]
    return tiers


class Curriculum:
    """Success-gated difficulty curriculum (S1 Alg. 1): batches are drawn uniformly from the
    unlocked tiers T_0..T_level; the next tier unlocks once the mean rollout accuracy of the
    last `window` steps reaches `threshold` (then the window restarts). With one target bin
    the tiers are the operand counts: the 4-number problems join the 3-number ones once the
    3-number rollouts succeed at `threshold`. `deadline`: a tier unlocks at the latest after
    that many steps at the current level, success or not, so that every run trains on every
    tier for a known share of its steps (a gate alone made the unlock a coin flip: windowed
    accuracies peaking at 0.354-0.363 against a 0.35 threshold, one replicate never
    unlocking). `unlock_steps[i]`: the first step (0-based, in update calls) that drew from
    tier i + 1; `deadline_unlocks`: how many of them the deadline forced."""

    def __init__(self, tiers: list[list[int]], window: int, threshold: float,
                 deadline: int | None = None):
        self.tiers, self.threshold, self.level, self.deadline = tiers, threshold, 0, deadline
        self.window: deque[float] = deque(maxlen=window)
        self.updates, self.unlock_steps, self.deadline_unlocks, self.since = 0, [], 0, 0

    def pool(self) -> list[int]:
        return [i for tier in self.tiers[:self.level + 1] for i in tier]

    def update(self, accuracy: float) -> bool:
        """Record one step's rollout accuracy; True when a new tier was unlocked."""
        self.window.append(accuracy)
        self.updates, self.since = self.updates + 1, self.since + 1
        if self.level == len(self.tiers) - 1:
            return False
        full = len(self.window) == self.window.maxlen
        gate = full and sum(self.window) / len(self.window) >= self.threshold
        late = self.deadline is not None and self.since >= self.deadline
        if gate or late:
            self.level += 1
            self.deadline_unlocks += not gate
            self.window.clear()
            self.since = 0
            self.unlock_steps.append(self.updates)
            return True
        return False


def step_problems(n: int, k: int, step: int, seed: int, pool: list[int] | None = None) -> list[int]:
    """The `k` problem indices of a step. Without a pool: consecutive slices of a stream of
    seeded permutations (every problem once per epoch). With a pool (curriculum): a uniform
    sample of it, seeded by (seed, step)."""
    if pool is not None:
        return random.Random(derive_seed(seed, step, 1)).sample(pool, min(k, len(pool)))
    out = []
    for pos in range(step * k, step * k + k):
        epoch, i = divmod(pos, n)
        perm = list(range(n))
        random.Random(derive_seed(seed, epoch, 0)).shuffle(perm)
        out.append(perm[i])
    return out


# --------------------------------------------------------------------------- batches
def pack(prompts: list[list[int]], completions: list[list[int]], pad_id: int):
    """(input_ids, attention_mask, P): rows [pad.. | prompt | completion | ..pad], every
    completion starting at column P, the layout of `generate` (left-padded prompts).

    Aligning completions at one column makes the logits of the response tokens one slice,
    [:, P-1:-1], for the student and for a teacher that sees a different prompt."""
    P, C = max(map(len, prompts)), max(map(len, completions))
    ids = torch.full((len(prompts), P + C), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for b, (p, c) in enumerate(zip(prompts, completions)):
        ids[b, P - len(p):P] = torch.tensor(p, dtype=torch.long)
        ids[b, P:P + len(c)] = torch.tensor(c, dtype=torch.long)
        attn[b, P - len(p):P + len(c)] = 1
    return ids, attn, P


def completion_logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int):
    """Logits [B, C, V] whose [:, t] predicts input_ids[:, start + t] (only these are computed:
    `logits_to_keep` skips the prompt). Position ids follow the attention mask, as in `generate`."""
    position_ids = (attention_mask.cumsum(-1) - 1).clamp_min(0)
    keep = input_ids.shape[1] - start + 1
    return model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                 logits_to_keep=keep, use_cache=False).logits[:, :-1]


class Rollouts(NamedTuple):
    """One step's rollouts as tensors: rows [pad.. | prompt | completion | ..pad] (see `pack`)."""
    input_ids: torch.Tensor  # [B, P + C]
    attention_mask: torch.Tensor  # [B, P + C]
    start: int  # P: the column of every completion's first token
    mask: torch.Tensor  # [B, C] float, 1 on completion tokens (EOS included)
    sampler_logp: torch.Tensor  # [B, C] log mu(token) as the sampler drew it, 0 on padding
    teacher: tuple | None  # (input_ids, attention_mask, start) with the teacher's prompts
    weight: torch.Tensor  # [B] row weight in the update: 0 = left out (`zero_std_weights`)


def pack_rollouts(tok, prompts: list[str], samples: list[list], device,
                  teacher_prompts: list[str] | None = None) -> Rollouts:
    """Rollouts of `samples` (per prompt, a group of `sampling.Sample`s), prompt-major."""
    G, pad_id = len(samples[0]), runtime.pad_token_id(tok)
    flat = [s for group in samples for s in group]
    completions = [s.token_ids for s in flat]  # the sampled ids, never re-tokenized text

    def rows(texts):
        prompt_ids = tok(render_prompts(tok, texts)).input_ids  # chat template if any
        ids, attn, start = pack([ids for ids in prompt_ids for _ in range(G)], completions, pad_id)
        return ids.to(device), attn.to(device), start

    input_ids, attn, start = rows(prompts)
    sampler_logp = torch.zeros(attn[:, start:].shape, device=device)
    for b, s in enumerate(flat):
        sampler_logp[b, :len(s.logprobs)] = torch.tensor(s.logprobs)
    return Rollouts(input_ids, attn, start, attn[:, start:].float(), sampler_logp,
                    rows(teacher_prompts) if teacher_prompts is not None else None,
                    torch.ones(len(flat), device=device))


class _Sums:
    """Weighted sums of the diagnostics of one step, reduced over micro-batches and processes."""

    def __init__(self):
        self.v: dict[str, list[float]] = {}

    def add(self, name: str, total: float, weight: float) -> None:
        s = self.v.setdefault(name, [0.0, 0.0])
        s[0] += float(total)
        s[1] += float(weight)

    def reduce(self, accelerator) -> dict[str, list[float]]:
        if accelerator.num_processes == 1:
            return self.v
        names = sorted(self.v)
        t = torch.tensor([self.v[n] for n in names], dtype=torch.float64, device=accelerator.device)
        t = runtime.reduce_sum(accelerator, t).cpu().tolist()
        return dict(zip(names, t))

    def means(self, accelerator) -> dict[str, float]:
        """Weighted means over every process; advantage_std from the pooled sums."""
        tot = self.reduce(accelerator)
        row = {k: s / max(w, 1e-12) for k, (s, w) in tot.items() if k not in ("adv_sum", "adv_sq")}
        (s1, n), s2 = tot["adv_sum"], tot["adv_sq"][0]
        row["advantage_std"] = math.sqrt(max(s2 - s1 * s1 / n, 0.0) / max(n - 1, 1))
        return row


def group_sums(rewards: torch.Tensor, correct: torch.Tensor, adv: torch.Tensor,
               mask: torch.Tensor, first_tier: torch.Tensor | None = None) -> _Sums:
    """The reward-side diagnostics of rewards [P, G] (S1 §3.1.4: evidence of (non-)collapse).
    first_tier [P] (bool, with a curriculum): which prompts are from its first tier; their
    pass rate and share are logged, because the pass rate of every rollout falls when harder
    tiers join the batches, whether or not the policy learns (`first_tier_rates`)."""
    sums, (P, G) = _Sums(), rewards.shape
    if first_tier is not None:
        n = first_tier.float().sum()
        sums.add("first_tier_pass_rate", correct[first_tier].sum(), n * G)
        sums.add("first_tier_share", n, P)
    sums.add("reward_mean", rewards.sum(), P * G)
    sums.add("reward_std", rewards.std(dim=1, correction=0).sum(), P)  # within-group
    sums.add("zero_std_frac", (rewards == rewards[:, :1]).all(dim=1).float().sum(), P)
    sums.add("adv_sum", adv.sum(), P * G)
    sums.add("adv_sq", (adv ** 2).sum(), P * G)
    sums.add("response_len", mask.sum(), P * G)
    sums.add("pass_rate", correct.sum(), P * G)
    return sums


def rollout_temperature(cfg: RLRun) -> float:
    """The temperature T of the rollout sampler. The policy optimised (and KL-regularised) is
    the tempered policy softmax(z / T) that drew the rollouts, so with no top-k / top-p the
    IS weight is 1 on-policy. Scoring T < 1 samples under softmax(z) instead makes every
    confident token look off-policy (pi < mu) and the per-rollout weight prod_t pi / mu swing
    from ~0 to the clip (measured at T = 0.7: rollout pass rate 0.089 -> 0.023 in 60 steps)."""
    t = float(cfg.sampler.temperature)
    return t if t > 0 else 1.0


def micro_batches(lengths: torch.Tensor, size: int | None, weight: torch.Tensor | None = None) -> list:
    """Row selections of one step's micro-batches, for completion `lengths` [B].

    One micro-batch (size null or >= B, every row weighted): every row in order, `slice(0, B)`.
    Otherwise the rows of nonzero `weight` sorted by length (longest first, stable) and cut
    into `size`-row chunks, so that each chunk is cut to its own longest completion (`_width`)
    instead of the step's: rollout lengths vary several fold, and in a mixed chunk most of
    the compute would go to padding. No row weighted: no micro-batch (nothing to update)."""
    B = len(lengths)
    if weight is None or bool((weight > 0).all()):
        if size is None or size >= B:
            return [slice(0, B)]
        rows = torch.arange(B, device=lengths.device)
    else:
        rows = (weight > 0).nonzero().squeeze(1)
    order = rows[torch.argsort(lengths[rows], descending=True, stable=True)]
    size = size or max(len(order), 1)
    return [order[i:i + size] for i in range(0, len(order), size)]


def zero_std_weights(rewards: torch.Tensor, keep: float, seed: int, step: int) -> torch.Tensor:
    """Row weights [P * G] (prompt-major) of one step's update, for rewards [P, G].

    A group whose rewards are all equal (zero std) has advantage 0 on every row: its rows add
    no policy gradient, only the KL and entropy terms. Of the Z such groups a seeded uniform
    choice of ceil(keep * Z) enters the update, each row weighted Z / ceil(keep * Z) (the
    inverse of its chance to be chosen); every other row has weight 1. The weighted loss is
    then an unbiased estimate of the whole batch's loss, at a fraction of its forward /
    backward cost when most groups are flat. keep = 1: every row, weight 1 (exact)."""
    P, G = rewards.shape
    w = torch.ones(P)
    flat = (rewards == rewards[:, :1]).all(dim=1).nonzero().flatten().tolist()
    if keep < 1 and flat:
        chosen = random.Random(derive_seed(seed, step, 2)).sample(flat, math.ceil(keep * len(flat)))
        w[flat] = 0.0
        w[chosen] = len(flat) / len(chosen)
    return w.repeat_interleave(G)


def _width(ro: Rollouts, c) -> int:
    """Completion columns the rows `c` need: their longest completion (EOS included)."""
    return max(int(ro.mask[c].sum(-1).max()), 1)


@torch.no_grad()
def reference_logprobs(ref_model, ro: Rollouts, chunks: list, temperature: float) -> torch.Tensor:
    """[B, C] log-probs of the rollout tokens under the tempered reference softmax(z / T),
    computed micro-batch by micro-batch (each cut to its own width); 0 on padding."""
    out = torch.zeros_like(ro.mask)
    for c in chunks:
        L = _width(ro, c)
        cols = ro.start + L
        out[c, :L] = token_logprobs(completion_logits(ref_model, ro.input_ids[c, :cols],
                                                      ro.attention_mask[c, :cols], ro.start)
                                    / temperature, ro.input_ids[c, ro.start:cols])
    return out * ro.mask


def _loss(model, ro: Rollouts, c, adv: torch.Tensor, ref_logp, teacher, cfg: RLRun,
          sums: _Sums, batch_tokens: float | None = None) -> torch.Tensor:
    """The share of the rollouts `c` (a `micro_batches` row selection) in the loss of the whole
    batch (S4 eq. 3 / eq. 4, Alg. 1 lines 4-9): summed over the micro-batches it is that loss,
    whose policy-gradient term is a mean per sequence and whose KL / entropy / distillation
    terms are means per response token. Columns past the rows' longest completion are
    dropped: under the causal mask they change no logit of a kept position. `batch_tokens`:
    the response tokens the token means divide by (default: this process's rollouts'; under
    N processes the step's over N, so that DDP's mean of the gradients is the step's)."""
    L = _width(ro, c)
    cols = ro.start + L
    m, targets = ro.mask[c, :L], ro.input_ids[c, ro.start:cols]
    # a row's weight (`zero_std_weights`) scales its token terms; a row weighted other than 1
    # has advantage 0, so its policy-gradient term is 0 whatever the weight
    mw = m * ro.weight[c, None]
    n_tok, n_seq = mw.sum().item(), m.shape[0]
    # this micro-batch's share of the batch's sequences and of its response tokens
    seq_w = n_seq / ro.mask.shape[0]
    tok_w = n_tok / max(ro.mask.sum().item() if batch_tokens is None else batch_tokens, 1)
    logits = completion_logits(model, ro.input_ids[c, :cols], ro.attention_mask[c, :cols], ro.start)
    tempered = logits / rollout_temperature(cfg)  # the policy that sampled: softmax(z / T)
    logp = token_logprobs(tempered, targets) * m  # with grad
    ent = token_entropy(tempered if cfg.entropy_coef > 0 else tempered.detach())
    # the IS weights of the rows in the loss (a row of weight 0 adds 0 to it either way): their
    # unclipped mean is the off-policyness diagnostic
    kept = ro.weight[c] > 0
    n_kept = int(kept.sum())
    w = clipped_is_weight(logp.sum(-1), ro.sampler_logp[c, :L].sum(-1), float(cfg.is_clip),
                          mask=kept)
    # lambda_RL scales the policy-gradient term only: applied to the advantages, so that
    # the KL and entropy coefficients keep their meaning. The token-mean terms are reweighted
    # from this micro-batch's tokens to the batch's before the whole is scaled by seq_w.
    per_token = tok_w / seq_w
    loss, st = rloo_policy_loss(
        logp, mw, adv[c] * float(cfg.rl_coef), is_weight=w.weight,
        ref_logp=None if ref_logp is None else ref_logp[c, :L], entropy=ent,
        kl_coef=float(cfg.kl_coef) * per_token,
        entropy_coef=float(cfg.entropy_coef) * per_token, agg=cfg.loss_agg)
    if teacher is not None:
        t_ids, t_attn, t_start = ro.teacher
        with torch.no_grad():
            t_logits = completion_logits(teacher, t_ids[c, :t_start + L], t_attn[c, :t_start + L],
                                         t_start)
        fkl = forward_kl(t_logits, logits, mw, float(cfg.distill_temperature)).sum() / max(n_tok, 1)
        loss = loss + float(cfg.distill_coef) * per_token * fkl
        sums.add("forward_kl", fkl.item() * n_tok, n_tok)
    sums.add("entropy", st["entropy"] * n_tok, n_tok)
    if ref_logp is not None:
        sums.add("kl", st["kl"] * n_tok, n_tok)
    # every process adds every name, so that the reduction over processes lines up
    sums.add("is_weight_mean", w.mean_raw.item() * n_kept, n_kept)
    sums.add("is_clip_frac", w.clip_frac.item() * n_kept, n_kept)
    return loss * seq_w


# --------------------------------------------------------------------------- training
def step_rollouts(policy, tok, chosen: list[dict], cfg: RLRun, step: int, accelerator,
                  prompt_style: str, with_teacher: bool, first_tier: set[int] | None = None):
    """Alg. 1 lines 1-2: this process's share of one step's rollouts, G per prompt, as
    (Rollouts, diagnostics sums, advantages [B] prompt-major, generated tokens).

    Every process draws and scores the step's rollouts exactly as a single process does (one
    call, one seed; the flat groups left out of the update are chosen over all of them) and
    keeps its share, so the run does not depend on the process count; the update
    (forward/backward, the memory-heavy part) is what the processes split. first_tier: the
    `id()`s of the curriculum's first-tier problems (None: no curriculum)."""
    rank, n_proc = accelerator.process_index, accelerator.num_processes
    every = [solve_prompt(p["numbers"], p["target"], prompt_style) for p in chosen]
    samples = generate((policy, tok), every, n=cfg.group_size, sampler=cfg.sampler.as_dict(),
                       seed=derive_seed(cfg.seed, step, 0), return_logprobs=True,
                       batch_size=cfg.gen_batch_size, progress=False)
    verdicts = [[verify(s.text, p["numbers"], p["target"]) for s in group]
                for p, group in zip(chosen, samples)]
    reward_fn = get_reward(cfg.reward)
    rewards = torch.tensor([[reward_fn(v, p["target"]) for v in vs]
                            for p, vs in zip(chosen, verdicts)], dtype=torch.float32)
    weight = zero_std_weights(rewards, float(cfg.zero_std_keep), cfg.seed, step)
    # this process's share: prompts rank, rank + n_proc, ...
    mine = slice(rank, None, n_proc)
    samples, prompts, verdicts, rewards = samples[mine], every[mine], verdicts[mine], rewards[mine]
    weight = weight.view(len(chosen), -1)[mine].flatten()
    n_tokens = sum(s.n_tokens for group in samples for s in group)
    correct = torch.tensor([[float(v.correct) for v in vs] for vs in verdicts])
    adv = rloo_advantages(rewards).flatten().to(accelerator.device)  # [B], prompt-major
    t_prompts = None
    if with_teacher:
        hint = cfg.teacher_strategy
        t_prompts = prompts if hint is None else [strategy_prompt(p, hint) for p in prompts]
    ro = pack_rollouts(tok, prompts, samples, accelerator.device, t_prompts)
    ro = ro._replace(weight=weight.to(accelerator.device))
    easy = None if first_tier is None else torch.tensor([id(p) in first_tier for p in chosen])[mine]
    return ro, group_sums(rewards, correct, adv.cpu(), ro.mask.cpu(), easy), adv, n_tokens


def broken_policy(policy, tok, problem: dict, prompt_style: str) -> str | None:
    """`runtime.nonfinite_policy` of `policy` on `problem`'s prompt, as the sampler sees it."""
    ids = tok(render_prompts(tok, [solve_prompt(problem["numbers"], problem["target"],
                                                prompt_style)]), return_tensors="pt").input_ids
    return runtime.nonfinite_policy(policy, ids)


def has_signal(accelerator, adv: torch.Tensor, teacher, cfg: RLRun) -> bool:
    """Whether the step has a reason to move the policy: a group whose rollouts differ in
    reward (a non-zero advantage, on any process), or a teacher to distill from. With
    neither, only the KL / entropy terms give a gradient, tiny, and AdamW rescales it to a
    learning-rate-sized step: the policy drifts with no reward at all (seen: KL to the
    reference 0.26 -> 0.8 over 60 such steps). Such a step leaves the weights as they are."""
    if teacher is not None and getattr(cfg, "distill_coef", 0) > 0:
        return True
    return runtime.reduce_sum(accelerator, (adv != 0).sum().float()).item() > 0


def update(accelerator, model, optimizer, ro: Rollouts, adv: torch.Tensor, ref_model, teacher,
           cfg: RLRun, sums: _Sums) -> bool:
    """Alg. 1 lines 3-11: ppo_epochs optimizer steps on one batch of rollouts, micro-batched;
    False (and the weights and optimizer state untouched, the diagnostics still measured)
    when the step has no signal (`has_signal`). Rows of weight 0 are skipped in a single
    process; under N processes every row is computed (weight 0 still leaves it out of the
    loss), because DDP needs every process to run as many backward passes."""
    moving = has_signal(accelerator, adv, teacher, cfg)
    n_proc = accelerator.num_processes
    skip = ro.weight if n_proc == 1 else None
    chunks = micro_batches(ro.mask.sum(-1), cfg.micro_batch, skip)
    # the step's response tokens per process: every process's token means share one divisor
    tokens = runtime.reduce_sum(accelerator, ro.mask.sum()).item() / n_proc
    # the reference is fixed within a step: one forward, no grad
    ref_logp = (None if ref_model is None else
                reference_logprobs(ref_model, ro, chunks, rollout_temperature(cfg)))
    for _ in range(cfg.ppo_epochs if moving else 1):
        loss = 0.0
        for c in chunks:  # gradient accumulation: the shares add up to the batch loss
            if not moving:  # the diagnostics only
                with torch.no_grad():
                    loss += _loss(model, ro, c, adv, ref_logp, teacher, cfg, sums, tokens).item()
                continue
            share = _loss(model, ro, c, adv, ref_logp, teacher, cfg, sums, tokens)
            accelerator.backward(share)
            loss += share.item()
        sums.add("loss", loss, 1)  # this epoch's batch loss (rows left out add 0)
        if not moving:
            if cfg.grad_clip:
                sums.add("grad_norm", 0.0, 1)  # no step taken
            break
        if cfg.grad_clip:
            gn = accelerator.clip_grad_norm_(model.parameters(), float(cfg.grad_clip))
            sums.add("grad_norm", float(gn), 1)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return moving


def check_run(problems: list[dict], cfg: RLRun, ref_model) -> None:
    """The mistakes `train_rloo` refuses before any model work."""
    get_reward(cfg.reward)  # ValueError listing the valid rewards
    if not problems:
        raise ValueError("no training problems")
    if cfg.kl_coef > 0 and ref_model is None:
        raise ValueError("kl_coef > 0 needs a ref_model (e.g. train.runtime.frozen_copy of the init policy)")


def make_curriculum(problems: list[dict], cfg: RLRun) -> Curriculum | None:
    """S1 Alg. 1's curriculum over `problems` when `cfg.curriculum`, else None (seeded shuffle)."""
    if not cfg.curriculum:
        return None
    return Curriculum(curriculum_tiers(problems, cfg.curriculum_target_bins),
                      cfg.curriculum_window, float(cfg.curriculum_threshold),
                      cfg.curriculum_deadline)


def choose_problems(problems: list[dict], step: int, cfg: RLRun, curriculum: Curriculum | None):
    """The step's `prompts_per_step` problems: from the unlocked tiers under a curriculum."""
    pool = curriculum.pool() if curriculum else None
    return [problems[i] for i in step_problems(len(problems), cfg.prompts_per_step, step,
                                               cfg.seed, pool)]


def _progress(row: dict[str, float]) -> dict[str, str]:
    """The progress bar's numbers."""
    return {"reward": f"{row['reward_mean']:.3f}", "pass_rate": f"{row['pass_rate']:.3f}",
            "zero_std": f"{row['zero_std_frac']:.2f}"}


def rl_summary(curve: list[dict], cfg: RLRun, curriculum: Curriculum | None, n_proc: int,
               seconds: float, gen_s: float, upd_s: float, gen_tokens: int,
               zero_groups: int) -> dict[str, Any]:
    """train_rloo's `stats`: counts and timings (gen_tokens: this process's), first / final of
    every diagnostic, and the curriculum's tier of the last step and the step each later tier
    unlocked at."""
    steps, K = len(curve), cfg.prompts_per_step
    summary: dict[str, Any] = {
        "steps": steps, "seconds": round(seconds, 2), "generate_seconds": round(gen_s, 2),
        "update_seconds": round(upd_s, 2), "processes": n_proc,
        "rollouts": steps * K * cfg.group_size,
        "generated_tokens": gen_tokens * n_proc,  # approx. on N > 1
        "generated_tokens_per_s": round(gen_tokens * n_proc / max(gen_s, 1e-9), 1),
        **runtime.first_final(curve, DIAGNOSTICS),
        "zero_std_groups": zero_groups, "groups": steps * K,
        "tier_final": int(curve[-1]["tier"]) if curriculum else None,
        "tier_unlock_steps": [s for s in curriculum.unlock_steps if s < steps] if curriculum else [],
    }
    summary["tier_unlock_step"] = (summary["tier_unlock_steps"] or [None])[0]
    summary.update(first_tier_rates(curve))
    summary["tier_deadline_unlocks"] = curriculum.deadline_unlocks if curriculum else 0
    return summary


def first_tier_rates(curve: list[dict]) -> dict[str, float | None]:
    """`first_tier_pass_rate_first` / `_final`: the pass rate of the curriculum's first-tier
    rollouts over the first / last 10% of the steps (`runtime.windows`), pooled by each
    step's first-tier share (a step may draw none). The same problems' rate at both ends, so
    it can show learning where the overall rate cannot: harder tiers join the later batches.
    None without a curriculum, or with no first-tier rollout in a window."""
    def pooled(rows: list[dict]) -> float | None:
        share = sum(r.get("first_tier_share", 0.0) for r in rows)
        return sum(r["first_tier_pass_rate"] * r["first_tier_share"] for r in rows
                   if "first_tier_share" in r) / share if share else None

    first, last = runtime.windows(curve)
    return {"first_tier_pass_rate_first": pooled(first),
            "first_tier_pass_rate_final": pooled(last)}


def done_line(kind: str, summary: dict[str, Any], seconds: float, gen_s: float) -> str:
    """The run's last line (seconds unrounded, unlike the summary's)."""
    return (f"[{kind}] {summary['steps']} steps in {seconds:.1f}s (generate {gen_s:.1f}s), reward "
            f"{summary['reward_mean_first']:.3f} -> {summary['reward_mean_final']:.3f}, pass rate "
            f"{summary['pass_rate_first']:.3f} -> {summary['pass_rate_final']:.3f}, zero-std "
            f"groups {summary['zero_std_frac_final']:.2f}")


def train_rloo(model, tok, problems: list[dict], cfg: RLRun, *, ref_model=None, teacher=None,
               prompt_style: str = "tiny", live=None, stats: dict[str, Any] | None = None,
               section: str = "rloo"):
    """RLOO on `problems` (dicts with `numbers` and `target`); OPD when `teacher` is given.

    model: the policy to train (full model or peft adapter); ref_model: frozen reference for the
    k3 KL (used only when kl_coef > 0); teacher: frozen teacher sharing the tokenizer family
    (its logits are cut to the shared vocabulary; cfg is then an OPD config). live:
    dvclive.Live (main process) for `train/<diagnostic>` curves. stats: filled with first /
    final (mean over the first / last 10% of steps) of every diagnostic, steps, seconds.
    section: the params section of `cfg` (`rloo`, an arm's, `int.rloo`, `teacher.rl`), named
    when a nan / inf loss or grad norm stops the run (`runtime.check_finite`).
    Returns the trained (unwrapped) model in eval mode.
    """
    check_run(problems, cfg, ref_model)
    # the prompts of a step are the batch that processes split (each samples its share)
    accelerator = runtime.setup_run(cfg.prompts_per_step, cfg.seed)
    n_proc, kind = accelerator.num_processes, "OPD" if teacher is not None else "RLOO"
    G, K = cfg.group_size, cfg.prompts_per_step
    ref_model = ref_model if cfg.kl_coef > 0 else None  # kl_coef 0: no reference forward
    for m in (ref_model, teacher):
        if m is not None:
            m.to(accelerator.device).eval().requires_grad_(False)
    curriculum = make_curriculum(problems, cfg)
    first_tier = {id(problems[i]) for i in curriculum.tiers[0]} if curriculum else None
    model, optimizer = accelerator.prepare(model, runtime.adamw(model, cfg))
    policy = accelerator.unwrap_model(model)  # the sampler's view of the live weights
    if accelerator.is_main_process:
        print(f"[{kind}] {len(problems)} problems, {cfg.steps} steps of {K} prompts x {G} "
              f"rollouts, reward {cfg.reward}, on {n_proc} process(es)", flush=True)

    gen_s, upd_s, gen_tokens, zero_groups, still = 0.0, 0.0, 0, 0, 0
    log = runtime.StepLog(accelerator, live, cfg.steps, kind.lower(), cfg.log_every)
    model.train()
    for step in range(cfg.steps):
        chosen = choose_problems(problems, step, cfg, curriculum)
        tg = time.time()
        try:
            ro, sums, adv, n_tokens = step_rollouts(policy, tok, chosen, cfg, step, accelerator,
                                                    prompt_style, teacher is not None, first_tier)
        except RuntimeError as exc:  # a policy the last update broke fails in the sampler
            if step and (what := broken_policy(policy, tok, chosen[0], prompt_style)):
                first = (str(exc).splitlines() or [""])[0]  # the stop stays one line
                raise runtime.diverged(section, step, cfg, f"after its update {what}; "
                                       f"sampling failed: {first}") from exc
            raise
        gen_s, tu, gen_tokens = gen_s + time.time() - tg, time.time(), gen_tokens + n_tokens
        still += not update(accelerator, model, optimizer, ro, adv, ref_model, teacher, cfg, sums)
        upd_s += time.time() - tu
        row = sums.means(accelerator)  # diagnostics, over every process
        runtime.check_finite(section, step + 1, cfg, loss=row["loss"],
                             grad_norm=row.get("grad_norm") if cfg.grad_clip else None)
        zero_groups += round(row["zero_std_frac"] * K)  # a count, for two-proportion tests
        if curriculum:
            row["tier"] = float(curriculum.level)  # the tier this step's prompts came from
            curriculum.update(row["pass_rate"])  # the same value on every process: same level
        log.step(row, (*DIAGNOSTICS, "tier", "first_tier_pass_rate", "first_tier_share"),
                 _progress)
    model, seconds = log.close(accelerator, model)
    summary = rl_summary(log.curve, cfg, curriculum, n_proc, seconds, gen_s, upd_s, gen_tokens,
                         zero_groups)
    summary["no_signal_steps"] = still  # steps that left the weights as they were
    log.publish(summary, stats, done_line(kind, summary, seconds, gen_s))
    return model


# --------------------------------------------------------------------------- stage side
# reports/timings/<stage>.json keys of an RL stage (runtime.TIMING_KEYS: a supervised one)
RL_TIMING_KEYS = ("seconds", "generate_seconds", "update_seconds", "processes",
                  "generated_tokens", "generated_tokens_per_s")


def init_dir(stage: str, init: str, replicate: int, params: dict[str, Any]) -> str:
    """The model dir the RL arm `stage` starts from: its `init` policy's (`<stage>.init`) of the
    same replicate seed, which the chain that trains that policy must have (`opd.init: rloo`:
    replicate r of OPD starts from replicate r of RLOO), or from SFT (or its early checkpoint)
    the shared SFT's when `replicates.shared_sft` is set. Checked before any model loads."""
    if init == stage:
        raise StageError(stage, f"`{stage}.init` is {init!r}, its own policy; an arm starts "
                                "from another's: set it to one of "
                                f"{', '.join(i for i in INITS if i != stage)}")
    rep = from_section(Replicates, stage, params, "replicates")
    seeds = rep.of(INITS[init])
    if INITS[init] == "sft":  # its seed's SFT, or the shared one
        replicate = rep.sft_seed(replicate)
    if replicate not in seeds:
        key = f"replicates.{seeds_key(INITS[init])}"
        raise StageError(stage, f"`{stage}.init` is {init!r}, which {key} {seeds} does not "
                                f"train for replicate {replicate}; add {replicate} to {key} "
                                "or start the arm from another policy")
    return model_dir(init, replicate)


def first_problems(stage: str, path: str | Path, n: int | None, params: dict) -> list[dict]:
    """The first `n` problems of a problems file (all when null): the generator already
    shuffled them, so the first N are a seeded random subset. The file is checked against
    `params` first (core.inputs: its rows, keys and count)."""
    return read_rows(stage, path, params)[:n]


def fit_rl_and_save(stage: str, model, tok, problems: list[dict], cfg: RLRun, out_dir: str | Path,
                    *, ref_model=None, teacher=None, prompt_style: str = "tiny",
                    extra_metrics: dict[str, Any] | None = None, section: str = "rloo"):
    """train_rloo with dvclive/<stage> curves; saves to `out_dir`, writes the metrics.
    section: as train_rloo (an arm's section)."""
    def train(live, stats):
        return train_rloo(model, tok, problems, cfg, ref_model=ref_model, teacher=teacher,
                          prompt_style=prompt_style, live=live, stats=stats, section=section)

    def metrics(model, stats: dict[str, Any]) -> dict[str, Any]:
        diag = {k: (None if v is None else round(v, 6)) for k, v in stats.items()
                if k.endswith(("_first", "_final"))}
        return {**(extra_metrics or {}), "reward": cfg.reward, "steps": stats["steps"],
                "rollouts": stats["rollouts"], "group_size": cfg.group_size,
                "prompts_per_step": cfg.prompts_per_step, "n_problems": len(problems),
                "n_params": n_parameters(model), **diag,
                **{k: stats[k] for k in ("zero_std_groups", "groups", "tier_unlock_step",
                                         "tier_unlock_steps", "tier_deadline_unlocks",
                                         "no_signal_steps")}}

    return runtime.fit_and_save(stage, tok, out_dir, train, metrics, RL_TIMING_KEYS, config=cfg)[0]
