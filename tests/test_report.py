"""The report stage: figures and report.md from a fixture of measurement files of three
replicates (tests/fixtures/report, written by its make_fixture.py with the real producers)."""

import importlib.util
import json
import re
import runpy
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import with_every_arm
from helpers import unrun_marks, unwrap_md

from countdown_rlvr.analysis.compare import PER_PROBLEM_COLUMNS
from countdown_rlvr.analysis.report import (
    F0_LABEL,
    FIGURES,
    IPO_SOURCES,
    MissingInputs,
    load_inputs,
    needed_words,
    render_report,
    report_policies,
)
from countdown_rlvr.core.config import CHAINS
from countdown_rlvr.task.prompts import REPAIR_LABELS

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "report"
TABLES = ("S4 Table 1", "S4 Table 2", "S1 Table 1", "S0 Table 2", "S0 Table 3")


def copy_fixture(dest: Path) -> Path:
    for sub in ("reports", "dvclive"):
        shutil.copytree(FIXTURE / sub, dest / sub)
    return dest


CONFIGURED = report_policies(("teacher", "rloo_shaped", "rloo_nocurr"))


def render(root: Path, **kw):
    kw.setdefault("configured", CONFIGURED)
    return render_report(root / "reports/details", root / "dvclive", root / "reports/report.md",
                         root / "reports/figures", **kw)


def metrics(rel: str) -> dict:
    return json.loads((FIXTURE / "reports/details" / rel).read_text())


def pooled(policy: str, k: int) -> dict:
    return metrics("compare.json")["policies"][policy]["test"][f"pass@{k}"]


def table_rows(md: str, title: str) -> list[list[str]]:
    """Cells of the first table after the heading that contains `title`."""
    section = md[md.index(title):]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("| ---"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif rows and not line.startswith("|"):
            break
    return rows[1:]  # without the header


CLAIMS_TABLE = "## Claims vs this run"


def claim_table(md: str) -> dict[str, list[str]]:
    """The short claims table, by claim (claims.SHORT)."""
    return {r[0]: r for r in table_rows(md, CLAIMS_TABLE)}


def claim_details(md: str, short: str) -> dict[str, str]:
    """A claim's section of "Claims in detail": {bullet title: its text}."""
    section = md[md.index(f"### {short}\n"):]
    out = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("- **"):
            break
        title, _, text = line[4:].partition("**")
        out[title] = text.lstrip(":").strip()
    return out


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    root = copy_fixture(tmp_path_factory.mktemp("complete"))
    render(root, require_all=True)
    return root, unwrap_md((root / "reports/report.md").read_text())


def test_every_figure_is_written_and_embedded(complete):
    root, md = complete
    for name in FIGURES:
        png = root / "reports/figures" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert png.stat().st_size > 5000, f"{name} looks empty"
        assert f"](figures/{name}.png)" in md
    assert sorted(p.name for p in (root / "reports/figures").iterdir()) == \
        sorted(f"{n}.png" for n in FIGURES)


def test_every_table_is_filled_from_the_metrics(complete):
    _, md = complete
    assert not unrun_marks(md) and "Incomplete run" not in md
    for title in TABLES:
        assert re.search(rf"^## .*\({title}\)$", md, re.MULTILINE), title
        rows = table_rows(md, title)
        assert rows and all(all(cell for cell in row) for row in rows), title
    # S4 Table 1: one row per non-distill policy, pooled over replicates from compare.json
    rows = {r[0]: r for r in table_rows(md, "S4 Table 1")}
    assert set(rows) == {p for p in CONFIGURED if not p.startswith("distill_")}
    v = pooled("rloo", 1)
    assert rows["rloo"][1] == "3" and rows["base"][1] == "shared" and rows["ipo_base"][1] == "1"
    assert rows["rloo"][2] == f"{v['mean']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
    assert v["mean"] == pytest.approx(np.mean(list(v["per_replicate"].values())))
    assert rows["rloo"][4] == ", ".join(f"{t} {x:.3f}" for t, x in v["per_replicate"].items())
    # the same contrast, the same test as the claims: the crossed problems x replicates model
    d = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k1"]["crossed"]
    assert rows["rloo"][6] == f"{d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
    assert rows["sft"][6] == "ref." and rows["base"][6].startswith("-")
    assert rows["rloo"][7] == f"{d['pvalue']:.3g}"
    assert rows["ipo_base"][7] == "–"  # one replicate: nothing to pool
    # S0 Table 2: every condition and F0, McNemar against R-resample and F0 from repair.json
    rows = {r[0]: r for r in table_rows(md, "S0 Table 2")}
    assert set(rows) == {F0_LABEL, *REPAIR_LABELS.values()}
    conds = metrics("repair/r0.json")["conditions"]
    f3 = conds["F3"]
    assert rows["F3 localized"][1] == f"{f3['success_rate']:.4f}"
    mc, m0 = f3["mcnemar_vs_resample"], f3["mcnemar_vs_F0"]
    assert rows["F3 localized"][6:] == [f"{mc['b']} / {mc['c']}", f"{mc['pvalue']:.3g}",
                                        f"{m0['b']} / {m0['c']}", f"{m0['pvalue']:.3g}"]
    assert rows["R-resample"][6] == "(reference)" and rows[F0_LABEL][8] == "(reference)"
    assert rows[F0_LABEL][1] == f"{conds['F0']['success_rate']:.4f}"
    # S0 Table 3: distill examples next to the distilled policy's evaluation
    rows = {r[0]: r for r in table_rows(md, "S0 Table 3")}
    assert rows["SD-R"][2] == str(metrics("distill/R/r0.json")["examples"])
    k8 = metrics("eval/distill_R/r0.json")["diagnostics_by_k"]["k8"]
    assert rows["SD-R"][3] == f"{k8['pass@1']:.3f}"
    # #17.1: one K, the same samples: all-fail = 1 - pass@8 in every evaluated row
    for name, row in rows.items():
        if "not trained" not in row[3]:
            assert float(row[6]) == pytest.approx(1 - float(row[4]), abs=1e-3), name
    # a condition without a successful repair: marked, not evaluated
    assert rows["SD-F2"][3] == "*not trained (no successful repairs)*"
    # S1 Table 1: one row per pair source, the IPO run's pairs and its policy's pass@k
    rows = {r[0]: r for r in table_rows(md, "S1 Table 1")}
    assert set(IPO_SOURCES) <= set(rows)
    assert rows["hardneg"][1] == str(metrics("ipo/hardneg/r0.json")["pairs"])
    assert rows["hardneg"][6] == f"{metrics('eval/ipo_hardneg/r0.json')['test']['pass@1']:.3f}"
    # S4 Table 2: every budget for the best policy (highest test pass@1 by default)
    def first(p):
        shared = FIXTURE / f"reports/details/eval/{p}/shared.json"
        return json.loads(shared.read_text()) if shared.exists() else metrics(f"eval/{p}/r0.json")

    evals = {p: m for p in CONFIGURED if "test" in (m := first(p))}
    best = max(evals, key=lambda p: evals[p]["test"]["pass@1"])
    assert f"for `{best}`" in md
    left = table_rows(md, "S4 Table 2")
    assert [r[0] for r in left] == ["1", "2", "4", "8", "16"]
    assert left[-1][1] == f"{evals[best]['best_of_n']['N16']['expected_acc']:.3f}"
    # significance: the compare tables of the test split, k ascending
    sig = md[md.index("## Significance"):]
    ks = [int(line.split("|")[4]) for line in sig.splitlines()
          if line.startswith("| rloo | sft | test |")]
    assert ks == [1, 4, 8, 16]


def test_claims_table_and_design_differences(complete):
    """What was found comes first (one line per claim: decision and effect), then the forest
    plot and a short table (one row per claim, cells a terminal can show); the details of
    each claim are sections at the end."""
    from countdown_rlvr.analysis import claims

    _, md = complete
    assert md.index("## What was found") < md.index(CLAIMS_TABLE) < md.index("(S4 Table 1)") \
        < md.index("## Claims in detail")
    found = md[md.index("## What was found"):md.index("## The answers at a glance")]
    assert "written before this run" in found  # plan.yaml says so
    bullets = [line for line in found.splitlines() if line.startswith("- **")]
    assert len(bullets) == len(claims.CLAIMS)
    rows = claim_table(md)
    assert list(rows) == [claims.SHORT[fn.__name__] for fn in claims.CLAIMS]
    words = {"reproduced", "contradicted", "inconclusive", "not tested", "not testable",
             "smaller than the seed's", "smaller (relative δ only)", "equivalent"}
    assert all(any(r[2].startswith(w) for w in words) for r in rows.values())
    assert {r[1] for r in rows.values()} == {"seed", "exploratory", "extension"}  # plan.yaml
    for line in md.splitlines():  # every table line fits a wide terminal
        assert not line.startswith("|") or len(line) <= 200, line
    rl = claim_details(md, claims.SHORT["rloo_sharpens"])
    d = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k1"]
    assert f"pass@1 diff {d['crossed']['mean']:+.3f} [" in rl["This run"]
    assert all(f"{t} pass@1 {r['pass_diff']:+.3f}" in rl["Per replicate"]
               for t, r in d["per_replicate"].items())
    # the fixture's arms all moved: every check passes in every replicate
    assert rl["Arm check"] == ("rloo (training rollout pass rate rises (with a curriculum: its "
                               "first tier's), curriculum unlocks before 75% of the steps): r0 "
                               "pass, r1 pass, r2 pass")
    assert "KL term" in md and "number misuse" in md and "The teacher** has" in md
    # the fixture's OOD split separates its policies: no "measures almost nothing" caveat
    c = metrics("compare.json")
    assert max(v["ood"]["pass@16"]["mean"] for v in c["policies"].values() if "ood" in v) >= 0.1
    assert "The OOD split" not in md


def test_the_ood_caveat_only_when_the_split_is_at_its_floor():
    """It names the best OOD pass@16 and the smallest pooled OOD p (with its pair) when every
    policy is below report.OOD_FLOOR, and says nothing otherwise."""
    from types import SimpleNamespace

    from countdown_rlvr.analysis.report import OOD_FLOOR, _ood_caveat

    def ctx(best):
        ood = {"sft": 0.0, "teacher": best, "rloo": best / 2}
        compare = {"policies": {p: {"ood": {"pass@16": {"mean": v}}} for p, v in ood.items()},
                   "pairs": {"teacher_vs_sft": {"ood": {"k16": {"pooled": {"pvalue": None}}}},
                             "rloo_vs_sft": {"ood": {"k16": {"pooled": {"pvalue": 0.31}}}}}}
        return SimpleNamespace(inp=SimpleNamespace(compare=compare), kmax=16)

    (line,) = _ood_caveat(ctx(0.025))
    assert "OOD pass@16 is 0.025 (`teacher`" in line
    assert "smallest pooled OOD p is 0.31 (`rloo_vs_sft`" in line
    assert _ood_caveat(ctx(OOD_FLOOR)) == []


def test_a_claim_of_no_change_is_not_reproduced_by_a_non_significant_test(complete):
    """S4's 'pass@1 up, pass@16 not': pass@16's interval does not exclude a rise beyond the
    margin, so the decision is inconclusive, not reproduced."""
    from countdown_rlvr.analysis.claims import SHORT

    _, md = complete
    top = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k16"]["crossed"]
    assert top["ci_high"] > 0.05 and top["pvalue"] > 0.05  # not significant, yet not excluded
    assert claim_table(md)[SHORT["rloo_sharpens"]][2] == "inconclusive"


def decided(rule, p=None, right=True, against=None, smaller=None, delta=0.1, status=None,
            for_decision=None, others=()):
    """A claim with these tests' ps, decided as evaluate does (Holm over it and `others`,
    the rest of its family's claim ps)."""
    from countdown_rlvr.analysis import claims

    kw = {} if for_decision is None else {"for_decision": for_decision}
    c = claims.Claim("x", "y", rule, right_way=right, pvalue=p, against=against,
                     smaller=smaller, delta=delta, **kw)
    if status:
        c.check_status, c.check_why = status, "why"
    fam = claims.family([c])
    fam += [(claims.Claim("o", "o", claims.EFFECT), q) for q in others]
    claims.holm_family(fam, 0.05)
    c.decision = c.decide()
    return c


def test_each_decision_route_and_its_words():
    """The claim fixture of every route: the decision (claims.Decision) from the tests that
    decide at the claim's Holm step, and the words the report gives it."""
    from countdown_rlvr.analysis.checks import FAIL, NOT_MEASURED
    from countdown_rlvr.analysis.claims import ABOVE, EFFECT, NO_CHANGE, Decision
    from countdown_rlvr.analysis.report import decision_words

    def route(*a, **kw):
        c = decided(*a, **kw)
        return c.decision, decision_words(c)

    assert route(EFFECT, 0.001, smaller=0.9) == (Decision.REPRODUCED, "reproduced")
    assert route(EFFECT, 0.001, False, smaller=0.9) == (Decision.CONTRADICTED, "contradicted")
    # the effect is not significant, but gains above delta are excluded: "smaller", never
    # "equivalent" and never "no effect"
    d, words = route(EFFECT, 0.3, smaller=0.001, delta=0.131)
    assert d == Decision.SMALLER and words == ("smaller than the seed's (gains above +0.131 "
                                               "excluded); an effect below that is not ruled out")
    assert "equivalent" not in words and "no effect" not in words
    # both: a real effect, below half the seed's
    assert route(EFFECT, 0.001, smaller=0.002)[0] == Decision.REPRODUCED_SMALLER
    # equivalent only where the seed claims no change
    d, words = route(NO_CHANGE, 0.001, against=0.9, delta=0.05,
                     for_decision=Decision.EQUIVALENT)
    assert d == Decision.EQUIVALENT and words.startswith("equivalent: no change beyond ±0.05")
    assert route(NO_CHANGE, 0.9, against=0.001, delta=0.05,
                 for_decision=Decision.EQUIVALENT)[0] == Decision.CONTRADICTED
    assert route(NO_CHANGE, 0.2, against=0.01)[0] == Decision.CONTRADICTED
    assert route(ABOVE, 0.01, against=0.9)[0] == Decision.REPRODUCED
    assert route(ABOVE, 0.6, against=0.01)[0] == Decision.CONTRADICTED
    assert route(EFFECT, 0.2, smaller=0.3) == (Decision.INCONCLUSIVE, "inconclusive")
    # one claim, two tests: its p is Bonferroni over them (0.03 x 2), not significant
    assert route(ABOVE, 0.03, against=0.9)[0] == Decision.INCONCLUSIVE
    # Holm: a claim significant alone is not in a family of four whose others are not
    assert route(EFFECT, 0.02, smaller=None)[0] == Decision.REPRODUCED
    assert route(EFFECT, 0.02, smaller=None, others=(0.5, 0.6, 0.7))[0] == Decision.INCONCLUSIVE
    # within a decided claim, a second test decides only at the claim's Holm step level
    c = decided(EFFECT, 0.0001, smaller=0.02, others=(0.5,))  # step alpha/2, 2 tests
    assert c.significant == {"for"} and c.decision == Decision.REPRODUCED
    one = "inconclusive (one replicate: the pooled test needs two or more)"
    assert route(EFFECT, None) == (Decision.INCONCLUSIVE, one)
    # an arm that did not move, or a check not measured: no decision, whatever the p
    for status in (FAIL, NOT_MEASURED):
        assert route(EFFECT, 0.001, status=status) == (Decision.NOT_TESTED, "not tested: why")
    c = decided(EFFECT, 0.001)
    c.why_not = "no compare.json"
    assert c.decide() == Decision.NOT_TESTABLE


def claims_rows(root: Path) -> dict[str, list[str]]:
    return claim_table(unwrap_md((root / "reports/report.md").read_text()))


def test_an_arm_that_did_not_move_is_not_tested(tmp_path):
    """rloo's curriculum never unlocks in r1 (the arm check fails there): the claims resting
    on rloo read "not tested", name the arm, the check and the replicate, and leave Holm's
    family; an IPO check the stage did not write reads "not measured"."""
    from countdown_rlvr.analysis import claims
    from countdown_rlvr.analysis.claims import SHORT

    root = copy_fixture(tmp_path)
    details = root / "reports/details"
    path = details / "rloo/r1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "tier_unlock_step": None}))
    for t in ("r0", "r1", "r2"):
        path = details / f"ipo/scripted/{t}.json"
        m = json.loads(path.read_text())
        del m["val_margin_after"]
        path.write_text(json.dumps(m))
    inp = render(root, require_all=True)
    md = unwrap_md((root / "reports/report.md").read_text())
    rows = claim_table(md)
    sharpen = claim_details(md, SHORT["rloo_sharpens"])
    assert sharpen["Decision"] == ("not tested: rloo failed its check (training rollout pass "
                                   "rate rises (with a curriculum: its first tier's), "
                                   "curriculum unlocks before 75% of the steps, fails in r1)")
    assert "r1 fail" in sharpen["Arm check"] and "r0 pass" in sharpen["Arm check"]
    assert rows[SHORT["rloo_sharpens"]][7] == "–"  # out of the family
    assert rows[SHORT["shaped"]][2] == "not tested (an arm failed its check)"
    ipo = claim_details(md, SHORT["ipo_sources"])
    assert ipo["Decision"] == ("not tested: preference margin on held-out pairs rises, chosen "
                               "answers lose < 0.5 nats/token vs SFT, pass@1 on train problems "
                               "it did not train on >= (1 - ipo.skill_margin) x SFT's not "
                               "measured (ipo_scripted: r0, r1, r2)")
    assert all("Replicates to decide" not in claim_details(md, SHORT[n])
               for n in ("rloo_sharpens", "shaped", "ipo_sources"))  # nothing to plan
    found = claims.evaluate(inp)
    # out of the families: the rows resting on rloo or ipo_scripted, and those the fixture
    # has no data for (the dev split, sft_early's per-problem records); the early operating
    # point's RLOO rows rest on rloo_early, which passed, so they stay in
    assert {c.name for c, _ in claims.family(found)} == {
        c.name for c in found if c.name not in {
            "rloo_sharpens", "shaped", "ipo_sources", "opd_beats_rloo", "opd_collapses",
            "zero_informative_early"}}
    assert "sft_early" in next(c for c in found if c.name == "zero_informative_early").why_not


def test_an_arm_that_lost_or_did_not_gain_skill_is_not_tested(tmp_path):
    """The skill conditions of the IPO and self-distillation checks, as the report reads them:
    ipo_easyneg's margin rose but in r2 it kept less than 0.75 of SFT's pass@1 on unseen train
    problems, and distill_R's loss fell but in r1 it solves its repairs' problems no better
    than SFT: both claims read "not tested", naming the arm, the check and the replicate."""
    from countdown_rlvr.analysis.claims import SHORT

    root = copy_fixture(tmp_path)
    details = root / "reports/details"
    for rel, change in (("ipo/easyneg/r2.json", {"skill_sft": 0.08, "skill_ipo": 0.04}),
                        ("distill/R/r1.json", {"skill_sft": 0.21, "skill_distilled": 0.2})):
        path = details / rel
        path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    render(root, require_all=True)
    md = unwrap_md((root / "reports/report.md").read_text())
    ipo = claim_details(md, SHORT["ipo_sources"])["Decision"]
    assert ipo.startswith("not tested: ipo_easyneg failed its check (preference margin")
    assert ipo.endswith(">= (1 - ipo.skill_margin) x SFT's, fails in r2)")
    assert claim_details(md, SHORT["self_distill"])["Decision"] == (
        "not tested: distill_R failed its check (trained, its loss fell, and it solves the "
        "problems of its training repairs without feedback more often than SFT (pass@1), "
        "fails in r1)")


def test_the_premise_row_the_seeds_feedback_claim_and_the_extensions(complete):
    """S1's premise (binary RLOO flat-lines) is its own no-change row, the shaped row says
    what it found. S0's feedback row is the seed's claim (R beats every F), with no F0 in it;
    F vs F0 and R vs F0 are extension rows in their own family."""
    from countdown_rlvr.analysis.claims import SHORT

    _, md = complete
    names = list(claim_table(md))
    assert names.index(SHORT["shaped_premise"]) == names.index(SHORT["shaped"]) - 1
    d = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k1"]["crossed"]
    premise = claim_details(md, SHORT["shaped_premise"])
    assert premise["Claim"].startswith("(seed, no change)")
    assert f"binary RLOO − SFT pass@1 {d['mean']:+.3f}" in premise["Contrasts"]
    assert "binary learns" in premise["Contrasts"]
    shaped = claim_details(md, SHORT["shaped"])
    outcome = claim_table(md)[SHORT["shaped_premise"]][2]
    assert f"premise (its own row): {outcome}, binary RLOO − SFT pass@1 {d['mean']:+.3f}" \
        in shaped["Decision"]
    fb = claim_details(md, SHORT["feedback"])
    assert "F0" not in fb["Claim"] and "F0" not in fb["Contrasts"]
    assert all(f"R vs {f}: R − {f}" in fb["Contrasts"] for f in ("F1", "F2", "F3", "F4"))
    assert "S0 ran no F0" in fb["Seed"] and "F0 lowest" not in md
    rows = claim_table(md)
    assert rows[SHORT["every_f_beats_f0"]][1] == rows[SHORT["resample_beats_f0"]][1] == \
        "extension"
    zero = claim_details(md, SHORT["zero_informative"])
    assert zero["Claim"].startswith("(exploratory, above)")  # plan.yaml: one SFT, one draw
    assert "vs the seed's 59.2% (context, not the decision)" in zero["This run"]


def test_an_inconclusive_claim_says_how_many_replicates_would_decide_it(complete):
    """The replicates the crossed test needs (80% power at Holm's strictest level, from the
    variance components it estimated) over every decision route (the effect test, the
    smaller-than test), at the observed effect and the plan's, and the command that adds the
    seeds; a seed effect on another scale is said to be unusable."""
    from countdown_rlvr.analysis import claims
    from countdown_rlvr.analysis.plan import load_plan
    from countdown_rlvr.stats.crossed import crossed_replicates_needed

    root, md = complete
    inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
    found = {c.name: c for c in claims.evaluate(inp)}
    sd_claim = found["self_distill"]
    assert sd_claim.decision == claims.Decision.INCONCLUSIVE
    effect_route, smaller_route = sd_claim.plans
    alpha = 0.05 / len(claims.family(found.values(), sd_claim.family)) / len(sd_claim.tests())
    comps, n_problems = effect_route.crossed.components(), effect_route.crossed.n_problems

    def n(effect, alt):
        return crossed_replicates_needed(effect, comps, n_problems, alpha, alternative=alt)

    # the seed's effect and delta come from plan.yaml, not from this run's level
    planned = load_plan().of("self_distill")
    assert sd_claim.seed_scaled == pytest.approx((0.168 - 0.086) / 0.086 * planned.level)
    assert sd_claim.delta == planned.delta
    assert smaller_route.seed == planned.delta and smaller_route.one_sided
    n_obs = max(n(abs(effect_route.observed), "two-sided"), n(smaller_route.observed, "greater"))
    n_plan = max(n(sd_claim.seed_scaled, "two-sided"), n(planned.delta, "greater"))
    text = claim_details(md, claims.SHORT["self_distill"])["Replicates to decide"]
    assert text.startswith(f"{n_obs} replicates at the observed effect, {n_plan} replicates "
                           "at the plan's (every route)")
    seeds = ",".join(map(str, range(n_obs if n_obs > 3 else n_plan)))
    assert f"`dvc exp run -S 'replicates.seeds=[{seeds}]' -S 'replicates.repair=[{seeds}]'`" \
        in text and "more replicates of the repair chain" in text
    # S3's row plans at Table 2's change (plan.yaml): a count at the plan's effect too
    fb = claim_details(md, claims.SHORT["interventions"])["Replicates to decide"]
    assert "replicates at the plan's" in fb and "not a number we can use" not in fb
    ext = claim_details(md, claims.SHORT["every_f_beats_f0"])["Replicates to decide"]
    assert "the seed's effect is not a number we can use here (no seed tested it)" in ext


def test_differences_read_policy_minus_reference_in_either_pair_order(complete, tmp_path):
    _, md = complete
    root = copy_fixture(tmp_path)
    path = root / "reports/details/compare.json"
    rep = json.loads(path.read_text())
    swapped = {}  # [rloo, sft] written as [sft, rloo]: every pooled difference negated

    def neg(p):
        return {**p, "mean": -p["mean"], "ci_low": -p["ci_high"], "ci_high": -p["ci_low"]}

    for k, r in rep["pairs"].pop("rloo_vs_sft")["test"].items():
        swapped[k] = {**r, "pooled": neg(r["pooled"]), "crossed": neg(r["crossed"])}
    rep["pairs"]["sft_vs_rloo"] = {"test": swapped}
    path.write_text(json.dumps(rep))
    render(root, require_all=True)
    before = {r[0]: r for r in table_rows(md, "S4 Table 1")}["rloo"]
    after = {r[0]: r for r in table_rows(unwrap_md((root / "reports/report.md").read_text()), "S4 Table 1")}
    assert after["rloo"][6:] == before[6:]


def test_render_is_byte_identical(complete, tmp_path):
    root, _ = complete
    again = copy_fixture(tmp_path)
    render(again, require_all=True)
    for rel in ["reports/report.md", *(f"reports/figures/{n}.png" for n in FIGURES)]:
        assert (again / rel).read_bytes() == (root / rel).read_bytes(), rel


def drop_sections(root: Path) -> None:
    for rel in ("repair", "eval/rloo", "ipo/hardneg"):
        shutil.rmtree(root / "reports/details" / rel)
    shutil.rmtree(root / "dvclive/rloo")


def test_missing_sections_render_as_not_run(tmp_path):
    root = copy_fixture(tmp_path)
    drop_sections(root)
    inp = render(root, configured=[*CONFIGURED, "ghost"], require_all=False)
    md = unwrap_md((root / "reports/report.md").read_text())
    # an evaluation's stage: its training stage's twin (a name no stage trains: shared)
    for stage, rel in (("repair", "repair.json"), ("evaluate_rloo", "eval/rloo.json"),
                       ("ipo@hardneg", "ipo/hardneg.json"),
                       ("evaluate_shared", "eval/ghost.json")):
        assert f"*not run* (stage `{stage}` has no metrics: `{rel}`)" in md
    assert any(p.endswith("dvclive/rloo/r0/plots/metrics/**/reward_mean.tsv")
               for p in inp.missing)
    rows = {r[0]: r for r in table_rows(md, "S4 Table 1")}
    assert "not run" in rows["rloo"][1] and "not run" in rows["ghost"][1]
    assert "not run" not in " ".join(rows["sft"])  # the rest is still filled
    assert "not run" in {r[0]: r for r in table_rows(md, "S1 Table 1")}["hardneg"][1]
    # no repair figure (and the report says so); the OPD curves still make rl_curves
    figures = {p.stem for p in (root / "reports/figures").iterdir()}
    assert figures == set(FIGURES) - {"repair"}
    assert "*not run* (figure `repair`" in md
    assert "**Incomplete run:**" in md


def test_arms_left_out_of_the_run_read_not_run_and_are_not_required(tmp_path):
    """A run that trains fewer arms (`arms`: those its evaluate lists name) does not wait for
    the others' files: their rows read "not run", and a claim resting on one is not testable,
    out of its Holm family, saying which arm the run left out."""
    from countdown_rlvr.analysis import claims as C

    root = copy_fixture(tmp_path)
    for rel in ("rloo_shaped", "eval/rloo_shaped"):
        shutil.rmtree(root / "reports/details" / rel)
    shutil.rmtree(root / "dvclive/rloo_shaped")
    arms = ("rloo", "rloo_early", "rloo_early_shaped", "opd", "opd_ac")
    configured = [p for p in CONFIGURED if p != "rloo_shaped"]
    inp = render(root, configured=configured, require_all=True, arms=arms)
    assert not inp.missing and "rloo_shaped" not in inp.policies
    md = unwrap_md((root / "reports/report.md").read_text())
    assert "| rloo_shaped | *not run* (not in this run's params: no `rloo_shaped.json`)" in md
    shaped = next(c for c in C.evaluate(inp) if c.name == "shaped")
    assert shaped.decision == C.Decision.NOT_TESTABLE and not shaped.tested
    assert shaped.why_not.startswith("not run: rloo_shaped not in this run's params")
    with pytest.raises(MissingInputs):  # every arm expected: the files are missing
        render(root, configured=configured, require_all=True)


def test_require_all_lists_the_missing_files_before_writing(tmp_path):
    root = copy_fixture(tmp_path)
    drop_sections(root)
    with pytest.raises(MissingInputs) as exc:
        render(root, require_all=True)
    msg = str(exc.value)
    for rel in ("repair.json", "eval/rloo.json", "ipo/hardneg.json",
                "dvclive/rloo/r0/plots/metrics"):
        assert rel in msg
    assert "(stage repair)" in msg and "(stage ipo@hardneg)" in msg
    assert not (root / "reports/report.md").exists() and not (root / "reports/figures").exists()


def test_sources_outside_the_configuration_are_not_required(tmp_path):
    """An IPO source left out of `ipo.sources` is shown as not configured, not missing."""
    root = copy_fixture(tmp_path)
    shutil.rmtree(root / "reports/details/ipo/hardneg")
    shutil.rmtree(root / "reports/details/eval/ipo_hardneg")
    sources = [s for s in IPO_SOURCES if s != "hardneg"]
    configured = [p for p in CONFIGURED if p != "ipo_hardneg"]
    inp = render(root, configured=configured, ipo_sources=sources, require_all=True)
    assert inp.missing == {}
    md = unwrap_md((root / "reports/report.md").read_text())
    assert "*not run* (not in this run's params: no `ipo/hardneg.json`)" in md


def test_kl_curve_is_optional_the_others_are_not(tmp_path):
    """rloo logs `kl` only with a reference model (rloo.kl_coef > 0)."""
    root = copy_fixture(tmp_path)
    curves = root / "dvclive/rloo/r0/plots/metrics/train"
    (curves / "kl.tsv").unlink()
    inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
    assert inp.missing == {} and "kl" not in inp.curves["rloo"]
    (curves / "entropy.tsv").unlink()
    inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
    assert list(inp.missing) == [
        f"{root.as_posix()}/dvclive/rloo/r0/plots/metrics/**/entropy.tsv"]
    assert set(inp.run_curves["rloo"]) == {"r0", "r1", "r2"}  # every replicate's curves
    steps, values = inp.curves["rloo"]["reward_mean"]  # dvclive's TSV, read back
    assert steps.tolist() == list(range(len(steps))) and len(values) == len(steps) > 1


def run_stage(root: Path, monkeypatch, **report):
    params = with_every_arm()  # the fixture has every arm's records
    params["report"].update(report)
    # the fixture's replicates, r0-r2, in every chain, each its own SFT (the default run
    # shares one)
    params["replicates"] = {chain: [0, 1, 2] if seeds else seeds
                            for chain, seeds in params["replicates"].items()
                            if chain != "shared_sft"} | {"shared_sft": None}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copy(ROOT / "plan.yaml", root / "plan.yaml")  # the analysis plan, a dep of report
    monkeypatch.chdir(root)
    runpy.run_path(str(ROOT / "stages/report.py"), run_name="__main__")


def test_stage_writes_report_figures_and_timing(tmp_path, monkeypatch, capsys):
    root = copy_fixture(tmp_path)
    run_stage(root, monkeypatch)  # params.yaml defaults: require_all true
    assert "wrote reports/report.md" in capsys.readouterr().out
    assert not unrun_marks((root / "reports/report.md").read_text())
    assert {p.stem for p in (root / "reports/figures").iterdir()} == set(FIGURES)
    assert json.loads((root / "reports/timings/report.json").read_text())["seconds"] >= 0


def test_stage_errors_name_the_fix(tmp_path, monkeypatch):
    root = copy_fixture(tmp_path)
    drop_sections(root)
    with pytest.raises(SystemExit, match=r"(?s)\[report\] error: .*reports/details/repair.json"
                                         r".*require_all: false"):
        run_stage(root, monkeypatch)
    with pytest.raises(SystemExit, match=r"report.reference` 'nobody' is not a policy"):
        run_stage(root, monkeypatch, require_all=False, reference="nobody")
    run_stage(root, monkeypatch, require_all=False)  # the same inputs render when allowed
    assert "not run" in unwrap_md((root / "reports/report.md").read_text())
    # a delta that breaks the plan's rule names the value the rule gives
    plan = (ROOT / "plan.yaml").read_text().replace("delta: 0.137", "delta: 0.2")
    (root / "plan.yaml").write_text(plan)
    monkeypatch.chdir(root)
    with pytest.raises(SystemExit, match=r"claims.self_distill: delta 0.2 breaks the rule.*"
                                         r"set `delta: 0.137`"):
        runpy.run_path(str(ROOT / "stages/report.py"), run_name="__main__")


@pytest.mark.slow
def test_fixture_is_what_the_producers_write_today(tmp_path):
    """Regenerating the fixture with the current producers (summarize, compare_replicates,
    diagnosis, repair_metrics, dvclive) reproduces the committed files exactly, so the report
    is tested against the keys the stages really write. On a producer change, re-run
    `python tests/fixtures/report/make_fixture.py` and check the report still renders."""
    spec = importlib.util.spec_from_file_location("make_fixture", FIXTURE / "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(FIXTURE) for sub in ("reports", "dvclive")
                       for p in (FIXTURE / sub).rglob("*") if p.is_file())
    assert fresh == committed
    stale = [str(rel) for rel in fresh
             if (tmp_path / rel).read_bytes() != (FIXTURE / rel).read_bytes()]
    assert not stale, f"stale {stale}: run python tests/fixtures/report/make_fixture.py"


@pytest.mark.slow
def test_dvc_repro_runs_the_report_stage_once(pipeline):
    """The dvc.yaml entry: deps, params and outs resolve; a second repro is a no-op."""
    copy_fixture(pipeline.path)
    first = pipeline.run("dvc", "repro", "--single-item", "report")
    assert "Running stage 'report'" in first.stdout
    assert not unrun_marks(pipeline.read("reports/report.md").decode())
    second = pipeline.run("dvc", "repro", "--single-item", "report")
    assert "Running stage" not in second.stdout
    shutil.rmtree(pipeline.path / "reports/details/repair")
    failed = pipeline.run("dvc", "repro", "--single-item", "report", check=False)
    assert failed.returncode != 0 and "reports/details/repair.json" in failed.stderr


def test_interventions_table_and_claim_read_both_halves(complete):
    """S3: every arm on the trained-on and the held-out unsolved problems (replicate r0's
    table); the claim pools the held-out int - plain RL difference over replicates."""
    _, md = complete
    m = metrics("int/r0.json")
    rows = {r[0]: r for r in table_rows(md, "Interventions with the solver as oracle (S3)")}
    assert set(rows) >= {"int", "plain_rl", "sft"}
    assert rows["plain_rl"][4] == f"{m['heldout_pass_at_k']['plain_rl']['pass@k']:.3f}"
    assert rows["plain_rl"][5] == f"{m['heldout_mcnemar']['int_vs_plain_rl']['pvalue']:.3g}"
    from countdown_rlvr.analysis.claims import SHORT

    claim = claim_details(md, SHORT["interventions"])
    diffs = [metrics(f"int/{t}.json")["heldout_pass_at_k"]["int"]["pass@k"]
             - metrics(f"int/{t}.json")["heldout_pass_at_k"]["plain_rl"]["pass@k"]
             for t in ("r0", "r1", "r2")]
    assert f"{np.mean(diffs):+.3f}" in claim["This run"] and "r2 " in claim["Per replicate"]


def test_one_formatter_for_intervals_p_values_and_tables():
    """compare.fmt_ci / fmt_p / md_table: what compare.md, report.md, the claims and
    `countdown-rlvr diff` write, each site's digits, sign and missing mark by parameters."""
    from countdown_rlvr.analysis.compare import fmt_ci, fmt_p, md_table

    assert fmt_ci(0.25, 0.1, 0.4) == "0.250 [0.100, 0.400]"
    assert fmt_ci(0.02, -0.01, 0.05, "+.3f") == "+0.020 [-0.010, +0.050]"
    assert fmt_ci(0.02, None, None, "+.3f") == "+0.020"  # one draw: no interval
    assert fmt_ci(0.02, None, None, "+.3f", " (one replicate)") == "+0.020 (one replicate)"
    assert fmt_ci(None, -0.01, 0.05, "+.3f") == "[-0.010, +0.050]"  # the diff's CI column
    assert [fmt_p(0.012345), fmt_p(0.012345, 2), fmt_p(None), fmt_p(None, 2, "-")] == [
        "0.0123", "0.012", "–", "-"]
    assert md_table(["a", "b"], [["1", "2"]]) == ["| a | b |", "| --- | --- |", "| 1 | 2 |"]
    assert md_table(["a", "b"], [], tight_rule=True) == ["| a | b |", "|---|---|"]


def test_a_claim_the_shared_problems_keep_out_of_reach_asks_for_problems_not_replicates():
    """Planned with the crossed model, an effect smaller than the shared test problems'
    variance resolves is not given a replicate count (no count would decide it); a larger
    one is, with the command that adds the seeds."""
    from countdown_rlvr.analysis.claims import EFFECT, Claim, Plan
    from countdown_rlvr.stats.crossed import from_mean_squares

    # s_a^2 = 0.09 over 400 problems: a problem SE of 0.015 that no replicate count shrinks
    res = from_mean_squares(0.01, 0.04 + 3 * 0.09, 0.04 + 400 * 1e-4, 0.04, 400, 3)

    def needed(observed):
        c = Claim("x", "y", EFFECT, plans=[Plan("a − b", observed, None, res.sd, crossed=res)],
                  seed_unusable="not on this scale")
        c.adjusted = 0.5  # inconclusive (the default decision)
        return needed_words(c, {key: [0, 1, 2] for key in CHAINS})

    assert needed(0.01).startswith("no replicate count (the shared test problems'")
    assert needed(0.045).startswith("7 replicates at the observed effect") and \
        "replicates.seeds=[0,1,2,3,4,5,6]" in needed(0.045)


def test_delta_and_the_seed_effect_come_from_the_plan_file(complete):
    """plan.yaml fixes each claim's delta by one rule (half the seed's relative change at the
    development level); the claims read it, so a different plan changes delta and the
    smaller-than test, never this run's level; the plan says whether it was written before
    the run, and the report prints it."""
    import dataclasses

    from countdown_rlvr.analysis import claims
    from countdown_rlvr.analysis.plan import PlanError, load_plan, parse_plan, rule_delta

    plan = load_plan(ROOT / "plan.yaml")
    for cp in plan.claims.values():
        if cp.kind == "effect" and cp.relative is not None:
            assert cp.delta == pytest.approx(rule_delta(0.5, cp.seed_from, cp.seed_to,
                                                        cp.level), abs=5e-4)
    assert plan.written_before_run is True and "08665ea" in plan.note
    root, md = complete
    assert "written before this run" in md and plan.note in md
    after = dataclasses.replace(plan, written_before_run=False, note="seen first")
    render(root, require_all=True, plan=after)
    assert "**written after this run was seen**" in unwrap_md((root / "reports/report.md").read_text())
    render(root, require_all=True, plan=plan)  # the module fixture's report, as it was
    inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
    sd = {c.name: c for c in claims.evaluate(inp, plan)}["self_distill"]
    assert (sd.delta, sd.seed_scaled) == (plan.of("self_distill").delta,
                                          plan.of("self_distill").scaled)
    wider = dataclasses.replace(plan, claims={**plan.claims, "self_distill": dataclasses.replace(
        plan.of("self_distill"), delta=0.2)})
    sd2 = {c.name: c for c in claims.evaluate(inp, wider)}["self_distill"]
    assert sd2.delta == 0.2 and sd2.smaller < sd.smaller and sd2.effect == sd.effect
    raw = yaml.safe_load((ROOT / "plan.yaml").read_text())
    raw["claims"]["shaped"]["delta"] = 0.05
    with pytest.raises(PlanError, match=r"claims.shaped: delta 0.05 breaks the rule"):
        parse_plan(raw)
    raw = yaml.safe_load((ROOT / "plan.yaml").read_text())
    del raw["claims"]["shaped"]["replicates"]
    with pytest.raises(PlanError, match=r"claims.shaped: `replicates` missing"):
        parse_plan(raw)


def test_the_report_opens_with_what_was_found_and_the_forest_plot(complete):
    """The answers first: the list of findings, then the forest plot, then the claims table.
    The plot has one row per claim, each with its claim's decision, effect, interval,
    replicate points and unit (its panel)."""
    from countdown_rlvr.analysis import claims
    from countdown_rlvr.analysis.figures import claim_rows, decision

    root, md = complete
    assert md.index("## What was found") < md.index("## The answers at a glance") \
        < md.index(CLAIMS_TABLE)
    assert "](figures/claims.png)" in md.split(CLAIMS_TABLE)[0]
    found = claims.evaluate(load_inputs(root / "reports/details", root / "dvclive", CONFIGURED))
    rows = claim_rows(found)
    assert [r.decision for r in rows] == [decision(c) for c in found]
    for r, c in zip(rows, found, strict=True):
        assert r.effect == c.effect and r.ci == c.ci and r.unit == c.unit
        assert len(r.per_replicate) == 3 or c.why_not  # the fixture: r0, r1, r2
    by = {c.name: c for c in found}
    assert by["self_distill"].unit == by["shaped"].unit == "pass@1 difference"
    assert by["zero_informative"].unit == "share − 50%"


def test_power_is_the_plans_and_this_runs_estimate_never_observed_power():
    """This run's power estimate at the plan's effects (from the same model as the test),
    over every decision route (the smallest), and the CPU minutes the replicates that would
    decide a claim cost; no observed power anywhere."""
    from countdown_rlvr.analysis import claims
    from countdown_rlvr.analysis.claims import EFFECT, Claim, Plan
    from countdown_rlvr.stats import t_power
    from countdown_rlvr.stats.crossed import crossed_power, from_mean_squares

    assert not hasattr(Claim, "observed_power") and not hasattr(Claim, "seed_power")
    report_src = (ROOT / "src/countdown_rlvr/analysis/report.py").read_text()
    assert "observed power" not in claims.__doc__ + claims.engine.__doc__
    assert "observed_power" not in report_src
    res = from_mean_squares(0.01, 0.04 + 3 * 0.01, 0.04 + 400 * 4e-4, 0.04, 400, 3)
    c = Claim("x", "y", EFFECT, plans=[Plan("a − b", 0.03, 0.03, res.sd, crossed=res, n=3)])
    c.decision = claims.Decision.INCONCLUSIVE
    assert c.run_power() == pytest.approx(crossed_power(0.03, res.components(), 400, 3))
    floored = Claim("x", "y", EFFECT, plans=[Plan("a − b", 0.01, 0.03, 0.02, n=3)])
    assert floored.run_power() == pytest.approx(t_power(0.03, 0.02, 3))
    # with the smaller-than route (planned at a true effect of 0, delta from its bound): the
    # smaller of the two routes' powers
    both = Claim("x", "y", EFFECT, plans=[Plan("a − b", 0.01, 0.03, 0.02, n=3),
                                          Plan("smaller", 0.005, 0.015, 0.02, n=3,
                                               one_sided=True)])
    assert both.run_power() == pytest.approx(min(t_power(0.03, 0.02, 3),
                                                 t_power(0.015, 0.02, 3, alternative="greater")))
    no_seed = Claim("x", "y", EFFECT, plans=[Plan("a − b", 0.01, None, 0.02, n=3)])
    assert no_seed.run_power() is None
    minutes = {"sft": 3.5, "ipo": 2.5, "rloo": 7.5, "opd": 6.0, "repair": 2.0, "int": 5.0}
    text = needed_words(c, {key: [0, 1, 2] for key in CHAINS}, minutes)
    n = int(text.split(" ")[0])
    assert n > 3 and f"{n - 3} more replicates of the sft chain ≈ {(n - 3) * 3.5:.0f} " \
        "CPU-min" in text
    # a chain's replicate costs its own minutes, RLOO's for a seed RLOO has not trained (OPD
    # starts from the RLOO policy of its seed) and SFT's for a seed SFT has not trained
    c.chain = "opd"
    chains = {**{key: [0, 1, 2] for key in CHAINS}, "sft": [0, 1, 2, 3]}
    text = needed_words(c, chains, minutes)
    cost = (6.0 + 7.5) * (n - 3) + 3.5 * (n - 4)  # seed 3: SFT's already
    assert f"{n - 3} more replicates of the opd chain ≈ {cost:.0f} CPU-min" in text
    more = ",".join(map(str, range(n)))
    assert text.endswith(f"`dvc exp run -S 'replicates.seeds=[{more}]' "
                         f"-S 'replicates.rloo=[{more}]' -S 'replicates.opd=[{more}]'`")

def _with_per_problem(root: Path, policies=("sft", "ipo_easyneg", "ipo_scripted"),
                      n_problems: int = 40, n: int = 16) -> dict:
    """The compare stage's per-problem records (correct samples of n per test problem, each
    replicate) beside the fixture's details, rows in a shuffled order; returns them as
    {policy: {replicate: {"problem_ids", "n", "correct"}}}."""
    rng = np.random.default_rng(7)
    ids = [f"test-{i}" for i in range(n_problems)]
    skill = rng.uniform(0.05, 0.9, n_problems)
    recs, rows = {}, []
    for j, p in enumerate(policies):
        recs[p] = {}
        for t in ("r0", "r1", "r2"):
            rate = np.clip(skill + 0.03 * j + rng.normal(0, 0.05, n_problems), 0, 1)
            order = rng.permutation(n_problems)
            recs[p][t] = {"problem_ids": [ids[i] for i in order], "n": n,
                          "correct": [int(x) for x in rng.binomial(n, rate)[order]]}
            rows += [(p, t, pid, c, n) for pid, c in zip(recs[p][t]["problem_ids"],
                                                          recs[p][t]["correct"])]
    out = root / "reports/details/per_problem"
    out.mkdir(parents=True, exist_ok=True)
    # without `distinct` (coverage), as written before it: the claims read correct of n only
    frame = pd.DataFrame(rows, columns=list(PER_PROBLEM_COLUMNS[:5]))
    frame.sample(frac=1, random_state=0).to_csv(out / "test.csv", index=False)
    return recs


def test_share_and_ipo_use_the_crossed_model_where_per_problem_records_exist(tmp_path):
    """With per-problem records the zero-signal share (each problem's chance that K samples
    are all alike) and IPO's average pass@k difference are tested on the crossed problems x
    replicates model, checked against closed forms; without them each says it fell back."""
    from math import comb

    from countdown_rlvr.analysis import claims
    from countdown_rlvr.stats.crossed import CrossedTest, crossed_test

    root = copy_fixture(tmp_path)
    inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
    before = {c.name: c for c in claims.evaluate(inp)}
    for name in ("zero_informative", "ipo_sources"):
        assert before[name].model == claims.NO_RECORDS
    recs = _with_per_problem(root)
    inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
    found = {c.name: c for c in claims.evaluate(inp)}

    def by_id(p, t):
        r = recs[p][t]
        return [c for _, c in sorted(zip(r["problem_ids"], r["correct"]))]

    tags = ("r0", "r1", "r2")
    k = metrics("diagnose/r0.json")["k"]
    share = np.array([[(comb(16 - c, k) + comb(c, k)) / comb(16, k) for c in by_id("sft", t)]
                      for t in tags]).T
    zero = found["zero_informative"]
    assert zero.model == "" and isinstance(zero.plans[0].crossed, CrossedTest)
    assert zero.pvalue == pytest.approx(crossed_test(share, 0.5, "greater").pvalue)
    assert zero.effect == pytest.approx(share.mean() - 0.5)
    ks = sorted(int(x[1:]) for x in metrics("compare.json")["pairs"][
        "ipo_easyneg_vs_ipo_scripted"]["test"])

    def avg(p, t):
        return np.mean([[1 - comb(16 - c, kk) / comb(16, kk) for c in by_id(p, t)]
                        for kk in ks], axis=0)

    d = np.column_stack([avg("ipo_easyneg", t) - avg("ipo_scripted", t) for t in tags])
    ipo = found["ipo_sources"]
    assert ipo.model == "" and isinstance(ipo.plans[0].crossed, CrossedTest)
    assert ipo.pvalue == pytest.approx(crossed_test(d).pvalue)
    assert ipo.smaller == pytest.approx(crossed_test(d, ipo.delta, "less").pvalue)
    assert "crossed test over 40 problems x 3 replicates" in ipo.test


def test_the_crossed_models_stand_in_is_a_code_the_report_words():
    """Claim.model holds a code (why the t-test stood in for the crossed model); the report
    renders its words."""
    from countdown_rlvr.analysis import claims
    from countdown_rlvr.analysis.report import model_words

    c = claims.Claim("a claim", "the seed's number", claims.EFFECT)
    assert model_words(c) == ""
    c.model = claims.NO_CROSSED
    assert model_words(c) == ("t-test across replicates: compare.json has no crossed summary "
                              "for this pair")
    c.model = claims.NO_RECORDS
    assert model_words(c) == ("t-test across replicates: the crossed model needs per-problem "
                              "records, which these details lack")


def test_the_seeds_feedback_claim_does_not_hang_on_f0(tmp_path):
    """S0 ran no F0: changing F0's success rate changes the extension rows (F vs F0, R vs F0)
    and never the seed's row (R beats every F)."""
    from countdown_rlvr.analysis import claims

    root = copy_fixture(tmp_path)

    def evaluate():
        inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
        return {c.name: c for c in claims.evaluate(inp)}

    before = evaluate()
    for t in ("r0", "r1", "r2"):
        path = root / f"reports/details/repair/{t}.json"
        m = json.loads(path.read_text())
        m["conditions"]["F0"]["success_rate"] = 0.5
        path.write_text(json.dumps(m))
    after = evaluate()
    fb0, fb1 = before["feedback"], after["feedback"]
    assert (fb1.pvalue, fb1.effect, fb1.decision) == (fb0.pvalue, fb0.effect, fb0.decision)
    assert [p.label for p in fb1.parts] == [f"R − {f}" for f in claims.FEEDBACK]
    assert after["every_f_beats_f0"].effect < before["every_f_beats_f0"].effect
    assert after["resample_beats_f0"].effect < before["resample_beats_f0"].effect
    assert {c.family for c in after.values() if "f0" in c.name} == {claims.EXTENSION}


def test_a_pipe_in_a_claims_cell_is_escaped():
    from countdown_rlvr.analysis.report import _table

    lines = _table(["a", "b"], [["x | y", "z"]])
    assert lines[-1] == "| x \\| y | z |"
    cells = re.split(r"(?<!\\)\|", lines[-1].strip("|"))
    assert len(cells) == 2


def test_per_problem_rates_in_closed_form():
    from math import comb

    from countdown_rlvr.analysis.claims import pass_at_k_per_problem, zero_share_per_problem

    n, c = np.array([16, 16, 16, 16]), np.array([0, 16, 8, 3])
    share = zero_share_per_problem(n, c, 8)
    assert share[0] == share[1] == 1.0  # all wrong / all right: every group alike
    assert share[2] == pytest.approx(2 / comb(16, 8)) and share[3] == pytest.approx(
        comb(13, 8) / comb(16, 8))
    assert pass_at_k_per_problem(n, c, 1).tolist() == pytest.approx((c / 16).tolist())
    assert pass_at_k_per_problem(n, c, 16).tolist() == [0, 1, 1, 1]


def test_the_committed_report_reads_in_a_terminal():
    """reports/report.md (re-rendered from the committed details): every table row has its
    header's cell count (pipes inside cells escaped) and no claims-table line is over 220
    columns."""
    md = (ROOT / "reports/report.md").read_text()
    width = None
    for line in md.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = len(re.split(r"(?<!\\)\|", line.strip()[1:-1]))
        width = width or cells
        assert cells == width, line[:120]
    claims_part = md[md.index(CLAIMS_TABLE):md.index("## Design differences")]
    # 225: the seed-19 run's longest claim row is 223 wide (S3's, decided "smaller than the
    # seed's"; the S3/S4 run's were 217, the run before 210, the limit before that 201)
    assert all(len(line) <= 225 for line in claims_part.splitlines() if line.startswith("|"))
    assert md.index("## What was found") < md.index(CLAIMS_TABLE)
    # the committed run sampled no OOD split: the legend says so instead of "(? numbers"
    assert "(? numbers" not in md and "OOD split (not sampled in this run" in md


def test_the_teacher_caveat_weighs_its_margin_against_s4s(tmp_path):
    """The caveats give the teacher's pass@1 as a ratio to the student's, beside S4's 1.51x,
    and say whether OPD's premise (a stronger teacher) holds: short of S4's margin it holds
    only in part; a teacher at twice the student's pass@1 and above its pass@16 meets it."""
    root = copy_fixture(tmp_path)
    details = root / "reports/details"
    teacher = json.loads((details / "teacher.json").read_text())
    peer_size = teacher["n_params"]  # the committed teacher: the student's architecture
    teacher.update(n_params=3_322_176, pretrain={"steps": 1200})
    (details / "teacher.json").write_text(json.dumps(teacher))
    render(root, require_all=True)
    line = next(x for x in unwrap_md((root / "reports/report.md").read_text()).splitlines()
                if x.startswith("- **The teacher**"))
    assert "3,322,176 parameters" in line and "its own pre-training" in line
    assert "S4's teacher: 1.51x" in line
    compare = json.loads((details / "compare.json").read_text())
    ratio = (compare["policies"]["teacher"]["test"]["pass@1"]["mean"]
             / compare["policies"]["sft"]["test"]["pass@1"]["mean"])
    assert f"({ratio:.2f}x;" in line and ("holds only in part" in line) == (ratio < 1.51)
    for key, scale in (("pass@1", 2.0), ("pass@16", 1.05)):  # a teacher with S4's margin
        block = compare["policies"]["teacher"]["test"][key]
        block["mean"] = min(1.0, compare["policies"]["sft"]["test"][key]["mean"] * scale)
    (details / "compare.json").write_text(json.dumps(compare))
    render(root, require_all=True)
    line = next(x for x in unwrap_md((root / "reports/report.md").read_text()).splitlines()
                if x.startswith("- **The teacher**"))
    assert "(2.00x;" in line and "which meets S4's" in line
    assert "RLOO steps" not in line  # this teacher had no RL phase
    teacher.update(n_params=peer_size, pretrain=None,
                   rl={"steps": 100, "reward": "binary"})  # teacher.rl: a peer, then RLOO
    (details / "teacher.json").write_text(json.dumps(teacher))
    render(root, require_all=True)
    line = next(x for x in unwrap_md((root / "reports/report.md").read_text()).splitlines()
                if x.startswith("- **The teacher**"))
    assert "trained longer from the same base, then 100 RLOO steps (binary reward)" in line


def test_the_policies_table_shows_coverage_pooled_over_replicates_and_na_without_it(tmp_path):
    """Coverage (compare.json's pooled distinct correct solutions per problem) is the policies
    table's last column, mean [t interval] like pass@1's; a compare.json written before it
    renders NA there and no coverage figure, the rest unchanged."""
    root = copy_fixture(tmp_path)
    render(root, require_all=True)
    md = (root / "reports/report.md").read_text()
    header = next(line for line in md[md.index("(S4 Table 1)"):].splitlines()
                  if line.startswith("| policy"))
    assert header.rstrip(" |").endswith("coverage [95% CI]")
    rows = {r[0]: r for r in table_rows(md, "S4 Table 1")}
    cov = metrics("compare.json")["policies"]
    v = cov["rloo"]["test"]["coverage"]
    assert v["n"] == 3 and rows["rloo"][-1] == f"{v['mean']:.2f} [{v['ci_low']:.2f}, {v['ci_high']:.2f}]"
    assert rows["base"][-1] == f"{cov['base']['test']['coverage']['mean']:.2f}"  # one draw
    assert "](figures/coverage.png)" in md
    path = root / "reports/details/compare.json"
    old = json.loads(path.read_text())
    for runs in (old["policies"], *(r["policies"] for r in old["replicates"].values())):
        for block in runs.values():
            for split in block.values():
                split.pop("coverage", None)
    path.write_text(json.dumps(old))
    render(root, require_all=True)
    md_old = (root / "reports/report.md").read_text()
    old_rows = {r[0]: r for r in table_rows(md_old, "S4 Table 1")}
    assert all(r[-1] == "–" for r in old_rows.values())
    assert {p: r[:-1] for p, r in old_rows.items()} == {p: r[:-1] for p, r in rows.items()}
    assert not (root / "reports/figures/coverage.png").exists()
    assert "*not run* (figure `coverage`" in md_old
