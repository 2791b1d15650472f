"""Arm checks: did the arm a claim rests on move at all?

A claim about what a method does says nothing when the arm that runs the method did not
train: "shaped beats binary" is not tested by two runs whose rollouts never improved, and an
inconclusive verdict there would read as evidence about the method. So every claim-bearing
arm has one stated check, measured in every replicate on data other than the test split (its
training or validation numbers, from the stage's details), and a claim whose arm fails it in
any replicate is "not tested", not inconclusive. A key the stage does not write (yet) is
"not measured", which is also not tested, with that reason.

Moving is not always enough: where the quantity a method optimises can move while the skill
the seed's claim is about does not, the check asks about the skill too, on train problems
(IPO keeps SFT's pass@1 within `ipo.skill_margin`; self-distillation solves the problems of
its training repairs more often than SFT).

    check(arm, runs, tags) -> ArmCheck    one arm, every replicate
    summarize(checks)      -> status, reason

Pure functions of the details' dicts (results.Inputs.runs), no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..core.arms import ARMS
from ..core.config import MIN_HELDOUT

PASS, FAIL, NOT_MEASURED = "pass", "fail", "not measured"
UNLOCK_BY = 0.75  # the curriculum's first unlock must come before this share of the steps
# IPO may raise its margin by pushing both answers down (likelihood displacement): a policy
# whose chosen answers fell this far below SFT's, in mean log-prob per token, no longer
# writes them (a 60-token answer at -0.5 nats/token is e^-30 as likely as under SFT)
CHOSEN_DROP = 0.5
# The interventions, judged as S3 judges its patch (docs/defaults.md#int). S3 Table 1 (§4.2):
# its patch (prefix + intervention, filtered) gets a correct rollout on 202 of its 235 hard
# problems, the unpatched base on 98, a 2.06x lift in the problems RL can get reward on. The
# check asks half that gain, 1.53x: on RL's ~50 problems, where the unpatched policy solves
# 4-8, a patch as good as S3's measures below its 2.06x about half the time (S3 gives no
# sample count or interval there); the patch variant S3 finds hurts RL's exploration,
# cloning the completion too (111 of 235, 1.13x), still fails it.
S3_PATCH_LIFT = 202 / 98
PATCH_LIFT = 1 + (S3_PATCH_LIFT - 1) / 2


def _num(m: Mapping, key: str) -> float | None:
    v = m.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def forward_kl_falls(m: Mapping) -> bool | None:
    """OPD: the student's forward KL to the teacher on its training rollouts falls."""
    first, final = _num(m, "forward_kl_first"), _num(m, "forward_kl_final")
    return None if first is None or final is None else final < first


def margin_rises(m: Mapping) -> bool | None:
    """IPO: the preference margin on held-out pairs rises over training, the chosen answers
    stay likely (their mean per-token log-prob, training pairs, final log window, falls less
    than CHOSEN_DROP nats below SFT's), and the policy keeps SFT's skill: its pass@1 on train
    problems no pair came from is at least (1 - skill_margin) of SFT's on the same problems
    and sampling seed (`ipo.skill_margin`, written with the numbers).

    Why the skill condition: the margin and the chosen answers' log-prob are the quantities
    IPO optimises, so both can move the right way while the policy solves less (the seed's
    IPO policies are its best; in this pipeline's runs IPO has halved SFT's pass@16). A claim
    comparing pairs sources says something about preference learning only if its arms still
    solve the task."""
    before, after = _num(m, "val_margin_before"), _num(m, "val_margin_after")
    chosen = _num(m, "chosen_reward_final")  # mean log pi(c) - log ref(c), per token
    sft, ipo, margin = _num(m, "skill_sft"), _num(m, "skill_ipo"), _num(m, "skill_margin")
    if None in (before, after, chosen, sft, ipo, margin):
        return None
    return after > before and chosen > -CHOSEN_DROP and ipo >= (1 - margin) * sft


def _at(m: Mapping, *keys: str) -> float | None:
    """The number at a nested key path of the details (None if any level is missing)."""
    for key in keys[:-1]:
        m = m.get(key)
        if not isinstance(m, Mapping):
            return None
    return _num(m, keys[-1])


def patch_lifts(m: Mapping) -> bool | None:
    """Interventions, S3's measures of its patch (S3 §4.2-4.3, Table 1, Fig. 8a):
    lift: before RL, the patched policy (int_sft) solves at least PATCH_LIFT times as many of
    RL's problems within `int.k` samples as the unpatched SFT policy on the same problems and
    sampling seed (and at least one; S3 Table 1's "Nonzero Acc.", patch against base);
    reward where plain RL has none: RL from the patch starts with a higher training pass rate
    than the same RL from the unpatched policy (S3 §4.3: the patch exists so that rollouts
    get reward on problems the base cannot solve), and that rate rises (S3 Fig. 8a: RL from
    the patch raises its training reward, RL from the base does not);
    and at least MIN_HELDOUT unsolved problems were held out, the problems the claim's test
    reads (with fewer it cannot resolve S3 Table 2's held-out effect: an inconclusive verdict
    would read as evidence).

    Why not a share solved: S3 sets none, and its own patch (per-sample accuracy 7.71%, Table
    1) solves at most 1 - (1 - 0.0771)^8 = 47% of its problems at K = 8."""
    patched = _at(m, "pass_at_k", "int_sft", "pass@k")  # before RL, RL's problems
    unpatched = _at(m, "pass_at_k", "sft", "pass@k")
    start, final = _at(m, "rloo", "pass_rate_first"), _at(m, "rloo", "pass_rate_final")
    plain, held = _at(m, "plain_rl", "pass_rate_first"), _num(m, "unsolved_heldout")
    if None in (patched, unpatched, start, final, plain, held):
        return None
    lifted = patched > 0 and patched >= PATCH_LIFT * unpatched
    return lifted and start > plain and final > start and held >= MIN_HELDOUT


def rollouts_rise(m: Mapping) -> bool | None:
    """RLOO: the training rollouts' pass rate rises, and with a curriculum its first tier
    unlock comes before UNLOCK_BY of the steps (a run stuck on its first tier trained on
    part of the task only). With a curriculum the rate compared is the first tier's: every
    rollout's rate falls when the harder tiers join the batches, learning or not (a student
    that unlocks the 4-number tier at step 8 ends below its 3-number start)."""
    if "curriculum" not in m:
        return None
    which = "first_tier_pass_rate" if m["curriculum"] else "pass_rate"
    first, final = _num(m, f"{which}_first"), _num(m, f"{which}_final")
    if first is None or final is None:
        return None
    if not m["curriculum"]:
        return final > first
    steps = _num(m, "steps")
    if "tier_unlock_step" not in m or steps is None:
        return None
    unlock = _num(m, "tier_unlock_step")  # null: never unlocked
    return final > first and unlock is not None and unlock < UNLOCK_BY * steps


def trained_on_signal(m: Mapping) -> bool | None:
    """RLOO where learning is in question (the early arms: binary RLOO at S0's operating point
    is expected to flat-line): the run could have learned, without asking that it did. Some
    rollout group had reward variance (a non-zero advantage: a reward wired wrong, or a policy
    that never solves or never fails, gives none), and the policy moved from its init (its k3
    KL to that frozen init is above 0 at the end; a run whose weights never changed has 0).
    A flat reward curve passes; a run that could not have moved it fails. Not measured
    without the KL (kl_coef 0: no reference forward)."""
    groups, flat = _num(m, "groups"), _num(m, "zero_std_groups")
    kl = _num(m, "kl_final")
    if None in (groups, flat, kl):
        return None
    return flat < groups and kl > 0


def distilled(m: Mapping) -> bool | None:
    """Self-distillation: it trained (there were successful samples), its loss fell, and the
    distilled policy solves the problems of its training repairs more often than SFT does,
    both sampled without feedback (pass@1, same problems and sampling seed).

    Why the skill condition: a falling loss says the policy fitted the repaired completions,
    not that it can now find them itself; S0's claim is that the repairs are internalized,
    which on these very problems means a no-feedback pass@1 above SFT's."""
    if m.get("trained") is False:
        return False
    first, final = _num(m, "loss_first"), _num(m, "loss_final")
    sft, mine = _num(m, "skill_sft"), _num(m, "skill_distilled")
    if m.get("trained") is None or None in (first, final, sft, mine):
        return None
    return final < first and mine > sft


@dataclass(frozen=True)
class Check:
    file: str  # the arm's one-draw details file (results.Inputs.runs key)
    words: str  # the check, as the report states it
    test: Callable[[Mapping], bool | None]  # None: not measured


SIGNAL_WORDS = ("some rollout group had reward variance and the policy moved from its init "
                "(final KL to it > 0); a flat reward passes")
RLOO_WORDS = ("training rollout pass rate rises (with a curriculum: its first tier's), "
              f"curriculum unlocks before {UNLOCK_BY:.0%} of the steps")
IPO_WORDS = (f"preference margin on held-out pairs rises, chosen answers lose < {CHOSEN_DROP} "
             "nats/token vs SFT, pass@1 on train problems it did not train on >= (1 - "
             "ipo.skill_margin) x SFT's")
DISTILL_WORDS = ("trained, its loss fell, and it solves the problems of its training repairs "
                 "without feedback more often than SFT (pass@1)")
INT_WORDS = (f"before RL the patch solves >= {PATCH_LIFT:.2f}x the unpatched policy's share of "
             f"RL's problems (S3 Table 1: {S3_PATCH_LIFT:.2f}x), RL from it starts above plain "
             f"RL's training pass rate and rises (S3 Fig. 8a), and >= {MIN_HELDOUT} unsolved "
             "problems are held out")
# an arm's check (arms.ARMS: Arm.check), by its function's name -> (words, function)
ARM_CHECKS: dict[str, tuple[str, Callable[[Mapping], bool | None]]] = {
    "forward_kl_falls": ("forward KL to the teacher falls", forward_kl_falls),
    "rollouts_rise": (RLOO_WORDS, rollouts_rise),
    "trained_on_signal": (SIGNAL_WORDS, trained_on_signal),
}
CHECKS: dict[str, Check] = {
    **{a.name: Check(f"{a.name}.json", *ARM_CHECKS[a.check]) for a in ARMS if a.check},
    "int": Check("int.json", INT_WORDS, patch_lifts),
    "distill_R": Check("distill/R.json", DISTILL_WORDS, distilled),
    **{f"ipo_{s}": Check(f"ipo/{s}.json", IPO_WORDS, margin_rises)
       for s in ("scripted", "easyneg", "hardneg", "base")},
}


@dataclass(frozen=True)
class ArmCheck:
    arm: str
    words: str
    per_replicate: dict[str, str]  # tag -> PASS | FAIL | NOT_MEASURED

    @property
    def status(self) -> str:
        """FAIL if any replicate fails (the arm did not move there), else NOT_MEASURED if any
        replicate lacks the numbers, else PASS."""
        states = set(self.per_replicate.values()) or {NOT_MEASURED}
        return FAIL if FAIL in states else NOT_MEASURED if NOT_MEASURED in states else PASS

    def tags(self, state: str) -> list[str]:
        return [t for t, s in self.per_replicate.items() if s == state]

    def cell(self) -> str:
        return (f"{self.arm} ({self.words}): "
                + ", ".join(f"{t} {s}" for t, s in self.per_replicate.items()))


def check(arm: str, runs: Mapping[str, Mapping], tags: Sequence[str]) -> ArmCheck:
    """`arm`'s check in every replicate `tags` (a replicate without the file: not measured)."""
    spec = CHECKS[arm]
    out = {}
    for t in tags:
        m = runs.get(t)
        ok = None if m is None else spec.test(m)
        out[t] = NOT_MEASURED if ok is None else PASS if ok else FAIL
    return ArmCheck(arm, spec.words, out)


def summarize(checks: Sequence[ArmCheck]) -> tuple[str, str | None]:
    """The claim's status from its arms' checks and, unless PASS, why it is not tested."""
    failed = [c for c in checks if c.status == FAIL]
    if failed:
        return FAIL, "; ".join(f"{c.arm} failed its check ({c.words}, fails in "
                               f"{', '.join(c.tags(FAIL))})" for c in failed)
    missing = [c for c in checks if c.status == NOT_MEASURED]
    if missing:
        return NOT_MEASURED, "; ".join(f"{c.words} not measured ({c.arm}: "
                                       f"{', '.join(c.tags(NOT_MEASURED))})" for c in missing)
    return PASS, None
