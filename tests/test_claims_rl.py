"""The RL claims (analysis/claims/: s1, s4, extensions) on claim fixtures: the report fixture
(tests/fixtures/report) with the pairs of each route written over it, the early operating
point's pairs added, and the development split's blocks added to the evaluations of plain
OPD and SFT, as the compare and evaluate stages write them."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import unwrap_md
from test_report import CONFIGURED, ROOT, claim_details, claim_table, copy_fixture, render

from countdown_rlvr.analysis import claims
from countdown_rlvr.analysis.claims import SHORT, Decision
from countdown_rlvr.analysis.plan import PlanError, load_plan, parse_plan, rule_delta
from countdown_rlvr.analysis.report import note_words, premise_words
from countdown_rlvr.analysis.results import load_inputs
from countdown_rlvr.stats.crossed import crossed_test

TAGS = ("r0", "r1", "r2")
EARLY_PAIRS = (("rloo_early", "sft_early"), ("rloo_early_shaped", "sft_early"),
               ("rloo_early_shaped", "rloo_early"))


def pair_block(effects, base=0.1, n_problems=200, noise=0.005, seed=0) -> dict:
    """A compare.json pair block at one k with these per-replicate differences a − b: the
    per-replicate rows and the crossed summary of per-problem differences around them."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, noise, n_problems)  # a per-problem effect every replicate shares
    d = np.column_stack([shared + rng.normal(0, noise, n_problems) for _ in effects])
    d = d - d.mean(axis=0) + np.asarray(effects)  # each replicate's mean: its effect
    per = {t: {"n_problems": n_problems, "pass_a": base + e, "pass_b": base, "pass_diff": e,
               "pass_diff_ci_low": e - 0.01, "pass_diff_ci_high": e + 0.01,
               "pass_diff_pvalue": 0.5, "a_only": 0, "b_only": 0, "pvalue": 1.0}
           for t, e in zip(TAGS, effects, strict=True)}
    return {"crossed": dataclasses.asdict(crossed_test(d)), "per_replicate": per}


def set_pairs(root: Path, pairs: dict[tuple[str, str], dict[int, list[float]]],
              policies=()) -> None:
    """compare.json with these pairs' blocks ({(a, b): {k: effects}}) written over its own,
    and `policies` listed as evaluated (a copy of SFT's pooled block)."""
    path = root / "reports/details/compare.json"
    rep = json.loads(path.read_text())
    for p in policies:
        rep["policies"][p] = rep["policies"]["sft"]
    for (a, b), per_k in pairs.items():
        rep["pairs"][f"{a}_vs_{b}"] = {"test": {f"k{k}": pair_block(e, seed=k)
                                                for k, e in per_k.items()}}
    path.write_text(json.dumps(rep))


def with_early(root: Path, premise=(0.001, -0.001, 0.0), shaped=(0.045, 0.045, 0.046)) -> None:
    """The early operating point evaluated: sft_early, rloo_early, rloo_early_shaped and their
    pairs, with the arms' training details (rloo's: a check that passes)."""
    effects = {EARLY_PAIRS[0]: premise, EARLY_PAIRS[2]: shaped,
               EARLY_PAIRS[1]: tuple(a + b for a, b in zip(premise, shaped, strict=True))}
    set_pairs(root, {pair: {1: list(e), 16: list(e)} for pair, e in effects.items()},
              policies=("sft_early", "rloo_early", "rloo_early_shaped"))
    details = root / "reports/details"
    for arm in ("rloo_early", "rloo_early_shaped"):
        (details / arm).mkdir(exist_ok=True)
        for t in TAGS:
            (details / arm / f"{t}.json").write_text((details / f"rloo/{t}.json").read_text())


def without_early(root: Path) -> None:
    """Details from before the early operating point: no sft_early, rloo_early or
    rloo_early_shaped evaluation, training details, curves or pairs (the report fixture has
    them, as the default params evaluate them)."""
    import shutil

    early = ("sft_early", "rloo_early", "rloo_early_shaped")
    for name in early:
        for sub in (f"reports/details/eval/{name}", f"reports/details/{name}", f"dvclive/{name}"):
            shutil.rmtree(root / sub, ignore_errors=True)
    path = root / "reports/details/compare.json"
    rep = json.loads(path.read_text())
    rep["policies"] = {p: v for p, v in rep["policies"].items() if p not in early}
    rep["pairs"] = {k: v for k, v in rep["pairs"].items() if not any(e in k for e in early)}
    for r in rep.get("replicates", {}).values():
        for key in ("pairs", "policies"):
            if key in r:
                r[key] = {k: v for k, v in r[key].items() if not any(e in k for e in early)}
    path.write_text(json.dumps(rep))


def with_dev(root: Path, opd=(0.26, 0.62), sft=(0.25, 0.72), spread=0.004) -> None:
    """A `dev` block (pass@1, pass@16) in each replicate's evaluation of plain OPD and SFT."""
    for policy, (p1, p16) in (("opd", opd), ("sft", sft)):
        for i, t in enumerate(TAGS):
            path = root / f"reports/details/eval/{policy}/{t}.json"
            m = json.loads(path.read_text())
            jitter = spread * (i - 1) * (1 if policy == "opd" else -1)
            m["dev"] = {**m["test"], "pass@1": p1 + jitter, "pass@16": p16 + jitter}
            path.write_text(json.dumps(m))


def evaluate(root: Path, plan=None) -> dict[str, claims.Claim]:
    inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
    return {c.name: c for c in claims.evaluate(inp, plan)}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The fixture with every new row's inputs, rendered."""
    root = copy_fixture(tmp_path_factory.mktemp("rl"))
    with_early(root)
    with_dev(root)
    render(root, require_all=True)
    return root, unwrap_md((root / "reports/report.md").read_text())


def test_the_new_rows_are_in_the_report_in_their_families(rendered):
    """Every new claim has a row in the table, the findings and the forest plot, in its
    family; the shaped rows say which operating point they are at."""
    root, md = rendered
    rows = claim_table(md)
    for name in ("shaped_premise_early", "shaped_early", "opd_beats_rloo", "opd_collapses"):
        assert SHORT[name] in rows and f"**{SHORT[name]}**" in md
    assert rows[SHORT["opd_collapses"]][1] == "extension"
    # each in the family plan.yaml declared: below 80% planned power (or one draw, or not run)
    # is exploratory
    plan = load_plan(ROOT / "plan.yaml")
    for name in ("shaped_premise_early", "shaped_early", "opd_anti_collapse", "opd_beats_rloo"):
        assert rows[SHORT[name]][1] == plan.of(name).family, name
    assert rows[SHORT["opd_anti_collapse"]][1] == "seed"
    assert rows[SHORT["opd_beats_rloo"]][1] == rows[SHORT["shaped_early"]][1] == "exploratory"
    assert "this run's SFT" in SHORT["shaped"] and "early SFT (S0's)" in SHORT["shaped_early"]
    assert all(len(line) <= 200 for line in md.splitlines() if line.startswith("|"))
    names = list(rows)
    assert names.index(SHORT["shaped_premise_early"]) == names.index(SHORT["shaped_early"]) - 1
    early = claim_details(md, SHORT["shaped_early"])
    assert "from an early SFT checkpoint" in early["Claim"]
    assert early["Decision"].startswith("reproduced; premise (its own row): equivalent, "
                                        "binary RLOO − early SFT pass@1")
    assert (root / "reports/figures/claims.png").stat().st_size > 5000


def test_shaped_at_s0s_point_reproduced_smaller_or_not_testable(tmp_path):
    """shaped_early: a gain well above its delta (0.024) is reproduced; a gain of ~0.001 with
    a tight interval is smaller than the seed's; without the early policies (older details)
    both early rows have no decision and say why, and the other rows do not move."""
    root = copy_fixture(tmp_path)
    without_early(root)
    before = evaluate(root)
    for name in ("shaped_premise_early", "shaped_early"):
        c = before[name]
        assert c.decision == Decision.NOT_TESTABLE and not c.tested
        assert c.why_not.startswith("sft_early, rloo_early")
        assert "not evaluated in this run" in c.why_not
    plan = load_plan()
    assert before["shaped_early"].delta == plan.of("shaped_early").delta == 0.024
    assert before["shaped_early"].seed_scaled == pytest.approx((0.120 - 0.088) / 0.088 * 0.133)
    with_early(root)
    found = evaluate(root)
    assert found["shaped_early"].decision == Decision.REPRODUCED
    assert found["shaped_early"].effect == pytest.approx(np.mean((0.045, 0.045, 0.046)))
    assert found["shaped_premise_early"].decision == Decision.EQUIVALENT
    assert found["shaped_early"].chain == found["shaped_premise_early"].chain == "rloo"
    with_early(root, shaped=(0.001, 0.0015, 0.0005))
    assert evaluate(root)["shaped_early"].decision == Decision.SMALLER
    # this run's SFT point is the fixture's own, untouched by the early pairs
    assert (found["shaped"].pvalue, found["shaped"].decision) == (before["shaped"].pvalue,
                                                                  before["shaped"].decision)


def test_the_early_premise_is_contradicted_when_binary_learns_there(tmp_path):
    """Binary RLOO well above the early SFT: the premise (binary flat-lines) is contradicted,
    and the shaped row says it asks about a binary arm that learns."""
    root = copy_fixture(tmp_path)
    with_early(root, premise=(0.10, 0.10, 0.101))
    found = evaluate(root)
    assert found["shaped_premise_early"].decision == Decision.CONTRADICTED
    assert "a binary arm that learns" in premise_words(found["shaped_early"], found,
                                                       load_plan().alpha)


def test_opd_beats_rloo_needs_both_gains(tmp_path):
    """S4's two gains decided together: both up, reproduced (each part's p in the contrasts);
    pass@16 significantly down, contradicted; pass@1 up alone is not enough."""
    root = copy_fixture(tmp_path)
    up = [0.05, 0.05, 0.051]
    set_pairs(root, {("opd", "rloo"): {1: up, 16: up}})
    c = evaluate(root)["opd_beats_rloo"]
    assert c.decision == Decision.REPRODUCED and c.family == claims.EXPLORATORY  # plan.yaml
    assert [p.label for p in c.parts] == ["pass@1 diff", "pass@16 diff"]
    assert c.effect == pytest.approx(np.mean(up)) and c.unit == "pass@1 difference"
    cp = load_plan().of("opd_beats_rloo")
    assert (c.delta, c.seed_scaled) == (cp.delta, cp.scaled)
    assert cp.delta_k == pytest.approx(rule_delta(0.5, 0.740, 0.780, cp.level_k), abs=5e-4)
    set_pairs(root, {("opd", "rloo"): {1: up, 16: [-0.05, -0.05, -0.051]}})
    assert evaluate(root)["opd_beats_rloo"].decision == Decision.CONTRADICTED
    set_pairs(root, {("opd", "rloo"): {1: up, 16: [0.01, -0.01, 0.0]}})
    c = evaluate(root)["opd_beats_rloo"]
    assert c.decision not in (Decision.REPRODUCED, Decision.REPRODUCED_SMALLER)
    assert c.pvalue == max(p.test.pvalue for p in c.parts)


def test_collapse_as_s4_defines_it_held_or_not_and_anti_collapse_tested_either_way(tmp_path):
    """The precondition on the dev split: OPD's pass@16 below SFT's with its pass@1 not
    below: held (reproduced); OPD's pass@16 above SFT's: not held (contradicted); no dev
    block: not testable. The anti-collapse row's decision and p never move, and its note
    states the precondition's outcome."""
    root = copy_fixture(tmp_path)
    none = evaluate(root)
    col = none["opd_collapses"]
    assert col.decision == Decision.NOT_TESTABLE and "no `dev` block" in col.why_not
    assert "precondition (plain OPD collapsed on the dev split, its own extension row): not " \
           "testable" in note_words(none["opd_anti_collapse"], none)
    with_dev(root)
    held = evaluate(root)
    col = held["opd_collapses"]
    assert col.family == claims.EXTENSION and col.decision == Decision.REPRODUCED
    assert col.effect == pytest.approx(0.62 - 0.72) and col.unit == "dev pass@16 difference"
    assert "precondition (plain OPD collapsed on the dev split, its own extension row): " \
           "reproduced, dev pass@16 difference OPD − SFT -0.100" in note_words(
               held["opd_anti_collapse"], held)
    with_dev(root, opd=(0.26, 0.80))
    not_held = evaluate(root)
    assert not_held["opd_collapses"].decision == Decision.CONTRADICTED
    # pass@16 below SFT's but pass@1 well below too: not collapse as S4 defines it
    with_dev(root, opd=(0.10, 0.62))
    assert evaluate(root)["opd_collapses"].decision == Decision.CONTRADICTED
    ac = [found["opd_anti_collapse"] for found in (none, held, not_held)]
    assert ac[0].tested and ac[0].family == claims.SEED
    assert len({(c.decision, c.pvalue, c.adjusted) for c in ac}) == 1
    assert col.name not in {c.name for c, _ in claims.family(held.values(), claims.SEED)}


def test_the_plan_checks_the_second_quantitys_delta():
    """delta_k follows the one rule as delta does; a second quantity needs both its seed
    numbers and its level; no claim of the plan is missing from it; the shipped plan was
    written before its run, plans at least 4 replicates for every seed-family claim, at its
    power, and declares every row below it exploratory; a planned power is given exactly where
    the claim has a seed effect on this scale, a pilot and two replicates or more (one draw has
    no spread to test)."""
    plan = load_plan(ROOT / "plan.yaml")
    assert {fn.__name__ for fn in claims.CLAIMS} == set(plan.claims)
    assert plan.written_before_run
    seed = [cp for cp in plan.claims.values() if cp.family == "seed"]
    assert seed and all(cp.replicates >= 4 and cp.planned_power >= plan.power for cp in seed)
    assert all(cp.family == "exploratory" for cp in plan.claims.values()
               if cp.planned_power is not None and cp.planned_power < plan.power)
    # a row added without a pilot says so in its variance and has no planned power yet
    variance = {n: c.get("variance") for n, c in
                yaml.safe_load((ROOT / "plan.yaml").read_text())["claims"].items()}
    assert {n for n, cp in plan.claims.items() if cp.planned_power is not None} == {
        n for n, cp in plan.claims.items() if cp.scaled is not None
        and variance[n] != "no pilot" and cp.replicates >= 2}
    assert all(0 <= cp.planned_power <= 1 for cp in plan.claims.values()
               if cp.planned_power is not None)
    raw = yaml.safe_load((ROOT / "plan.yaml").read_text())
    raw["claims"]["opd_beats_rloo"]["delta_k"] = 0.04
    with pytest.raises(PlanError, match=r"claims.opd_beats_rloo: delta_k 0.04 breaks the rule"):
        parse_plan(raw)
    raw = yaml.safe_load((ROOT / "plan.yaml").read_text())
    del raw["claims"]["opd_beats_rloo"]["level_k"]
    with pytest.raises(PlanError, match=r"needs both `seed_k` \(from, to\) and `level_k`"):
        parse_plan(raw)
    raw = yaml.safe_load((ROOT / "plan.yaml").read_text())
    raw["claims"]["shaped_early"]["delta"] = 0.081
    with pytest.raises(PlanError, match=r"claims.shaped_early: delta 0.081 breaks the rule"):
        parse_plan(raw)


def test_a_first_replicate_arm_is_checked_in_the_seed_it_ran_only(tmp_path):
    """The shaped arms train on their chain's first seed only (core/arms.py): their check reads
    that replicate, so the other seeds' missing runs are not "not measured" (the S3/S4 run's
    report said so of r12-r18 and left the shaped rows untested)."""
    import shutil

    root = copy_fixture(tmp_path)
    for arm in ("rloo_shaped", "rloo_early_shaped"):
        for tag in ("r1", "r2"):  # what a first-replicate arm leaves: no later seed's run
            shutil.rmtree(root / "reports/details" / arm / tag, ignore_errors=True)
            (root / "reports/details" / arm / f"{tag}.json").unlink(missing_ok=True)
    found = evaluate(root)
    for name, arm in (("shaped", "rloo_shaped"), ("shaped_early", "rloo_early_shaped")):
        check = next(a for a in found[name].arm_checks if a.arm == arm)
        assert list(check.per_replicate) == ["r0"], name
        assert "not measured" not in (found[name].check_why or ""), name
    rloo = next(a for a in found["shaped"].arm_checks if a.arm == "rloo")  # every replicate
    assert list(rloo.per_replicate) == ["r0", "r1", "r2"]
