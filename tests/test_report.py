"""The report stage: figures and report.md from a fixture of measurement files of three
replicates (tests/fixtures/report, written by its make_fixture.py with the real producers)."""

import importlib.util
import json
import re
import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from countdown_rlvr.analysis.report import (
    F0_LABEL,
    FIGURES,
    IPO_SOURCES,
    MissingInputs,
    load_inputs,
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


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    root = copy_fixture(tmp_path_factory.mktemp("complete"))
    render(root, require_all=True)
    return root, (root / "reports/report.md").read_text()


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
    assert "not run" not in md and "Incomplete run" not in md
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
    d = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k1"]["pooled"]
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


def test_seed_claims_and_design_differences(complete):
    """The claims table opens the report: a pooled verdict per claim with its stated rule,
    the per-replicate numbers beside it; a claim without its inputs says why."""
    _, md = complete
    assert md.index("## Seed claims vs this run") < md.index("(S4 Table 1)")
    rows = table_rows(md, "Seed claims vs this run")
    assert len(rows) == 9  # the eight claims and S1's premise
    assert all(r[9].strip("*").split()[0].strip(":;") in {"reproduced", "contradicted",
                                                         "inconclusive", "not"} for r in rows)
    assert {r[6] for r in rows} == {"effect", "no change", "above"}
    rl = next(r for r in rows if r[0].startswith("S4: RLOO"))
    d = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k1"]
    assert f"pass@1 diff {d['pooled']['mean']:+.3f} [" in rl[2]
    assert all(f"{t} pass@1 {r['pass_diff']:+.3f}" in rl[3] for t, r in d["per_replicate"].items())
    # the fixture's arms all moved: every check passes in every replicate
    assert rl[4] == ("rloo (training rollout pass rate rises (with a curriculum: its first "
                     "tier's), curriculum unlocks before 75% of the steps): r0 pass, r1 pass, "
                     "r2 pass")
    # Holm: the adjusted p is never below the raw one
    for r in rows:
        if r[7] != "–":
            assert float(r[8]) >= float(r[7])
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
    """S4's 'pass@1 up, pass@16 not': pass@1 rises in every replicate, but pass@16's interval
    does not exclude a rise beyond the margin, so the verdict is inconclusive, not reproduced."""
    _, md = complete
    rl = next(r for r in table_rows(md, "Seed claims") if r[0].startswith("S4: RLOO"))
    top = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k16"]["pooled"]
    assert top["ci_high"] > 0.05 and top["pvalue"] > 0.05  # not significant, yet not excluded
    assert rl[9].startswith("**inconclusive (pass@1 rises: ")


def test_claim_verdicts_follow_the_pooled_test_after_holm():
    from countdown_rlvr.analysis.checks import FAIL, NOT_MEASURED
    from countdown_rlvr.analysis.claims import ABOVE, EFFECT, NO_CHANGE, Claim

    def verdict(rule, p, right=True, against=None, status=None):
        c = Claim("x", "y", rule, right_way=right, pvalue=p, against=against)
        ps = c.tests()
        # as evaluate does: Holm over a family of this claim alone is the claim's p itself
        c.adjusted = c.claim_p()
        c.decided_by = min(ps, key=ps.get) if ps else "for"
        if status:
            c.check_status, c.check_why = status, "why"
        return c.verdict()

    assert verdict(EFFECT, 0.01) == "reproduced" and verdict(EFFECT, 0.01, False) == "contradicted"
    assert verdict(EFFECT, 0.2) == "inconclusive"
    assert verdict(NO_CHANGE, 0.2, against=0.01) == "contradicted"
    assert verdict(ABOVE, 0.01, against=0.9) == "reproduced"
    assert verdict(ABOVE, 0.6, against=0.01) == "contradicted"
    assert verdict(ABOVE, 0.3, against=0.7) == "inconclusive"
    # one claim, two tests: its p is Bonferroni over them (0.03 x 2), not significant
    assert verdict(ABOVE, 0.03, against=0.9) == "inconclusive"
    assert verdict(EFFECT, None).startswith("inconclusive: one replicate")
    # an arm that did not move, or a check not measured: no verdict, whatever the p
    assert verdict(EFFECT, 0.001, status=FAIL) == "not tested: why"
    assert verdict(EFFECT, 0.001, status=NOT_MEASURED) == "not tested: why"


def claims_rows(root: Path) -> dict[str, list[str]]:
    md = (root / "reports/report.md").read_text()
    return {r[0].split(":")[0] + ":" + r[0].split(":")[1][:12]: r
            for r in table_rows(md, "Seed claims vs this run")}


def test_an_arm_that_did_not_move_is_not_tested(tmp_path):
    """rloo's curriculum never unlocks in r1 (the arm check fails there): the claims resting
    on rloo read "not tested", name the arm, the check and the replicate, and leave Holm's
    family; an IPO check the stage did not write reads "not measured"."""
    from countdown_rlvr.analysis import claims

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
    rows = table_rows((root / "reports/report.md").read_text(), "Seed claims vs this run")
    by = {r[0][:30]: r for r in rows}
    sharpen = next(r for r in rows if r[0].startswith("S4: RLOO"))
    assert sharpen[9].startswith("**not tested: rloo failed its check (training rollout pass "
                                 "rate rises (with a curriculum: its first tier's), curriculum "
                                 "unlocks before 75% of the steps, fails in r1)")
    assert "r1 fail" in sharpen[4] and "r0 pass" in sharpen[4]
    assert sharpen[8] == "–" and sharpen[7] != "–"  # its raw p shown, out of the family
    shaped = next(r for r in rows if r[0].startswith("S1: the shaped"))
    assert shaped[9].startswith("**not tested: rloo failed its check")
    ipo = next(r for r in rows if r[0].startswith("S1: verified"))
    assert ipo[9] == ("**not tested: preference margin on held-out pairs rises, chosen answers "
                      "lose < 0.5 nats/token vs SFT, pass@1 on train problems it did not train "
                      "on >= (1 - ipo.skill_margin) x SFT's not measured (ipo_scripted: r0, r1, "
                      "r2)**")
    assert all(r[10] == "–" for r in (sharpen, shaped, ipo))  # no replicates to plan
    found = claims.evaluate(inp)
    assert {c.name for c, _ in claims.family(found)} == {
        c.name for c in found if c.name not in {"rloo_sharpens", "shaped", "ipo_sources"}}
    assert len(by) == 9


def test_an_arm_that_lost_or_did_not_gain_skill_is_not_tested(tmp_path):
    """The skill conditions of the IPO and self-distillation checks, as the report reads them:
    ipo_easyneg's margin rose but in r2 it kept less than 0.75 of SFT's pass@1 on unseen train
    problems, and distill_R's loss fell but in r1 it solves its repairs' problems no better
    than SFT: both claims read "not tested", naming the arm, the check and the replicate."""
    root = copy_fixture(tmp_path)
    details = root / "reports/details"
    for rel, change in (("ipo/easyneg/r2.json", {"skill_sft": 0.08, "skill_ipo": 0.04}),
                        ("distill/R/r1.json", {"skill_sft": 0.21, "skill_distilled": 0.2})):
        path = details / rel
        path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    render(root, require_all=True)
    rows = table_rows((root / "reports/report.md").read_text(), "Seed claims vs this run")
    ipo = next(r for r in rows if r[0].startswith("S1: verified"))
    assert ipo[9].startswith("**not tested: ipo_easyneg failed its check (preference margin")
    assert ">= (1 - ipo.skill_margin) x SFT's, fails in r2)" in ipo[9]
    sd = next(r for r in rows if r[0].startswith("S0: self-distillation"))
    assert sd[9] == ("**not tested: distill_R failed its check (trained, its loss fell, and it "
                     "solves the problems of its training repairs without feedback more often "
                     "than SFT (pass@1), fails in r1)**")


def test_the_premise_row_and_what_each_contrast_isolates(complete):
    """S1's premise (binary RLOO does not learn over SFT) is its own row, tested as a
    no-change claim with the rise as its p against; the shaped row says what the premise
    found. S0's feedback row names what each of its three contrasts isolates."""
    _, md = complete
    rows = table_rows(md, "Seed claims vs this run")
    names = [r[0] for r in rows]
    premise = next(r for r in rows if r[0].startswith("S1 premise"))
    assert names.index(premise[0]) == names.index(next(n for n in names
                                                       if n.startswith("S1: the shaped"))) - 1
    d = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k1"]["pooled"]
    assert premise[6] == "no change"
    assert f"binary RLOO − SFT pass@1 {d['mean']:+.3f}" in premise[9]
    assert "binary learns" in premise[9]  # p 0.016 before Holm: the rise holds on its own
    shaped = next(r for r in rows if r[0].startswith("S1: the shaped"))
    outcome = premise[9].strip("*").split(" (")[0]  # the premise row's own verdict
    assert f"premise (its own row): {outcome}, binary RLOO − SFT pass@1 {d['mean']:+.3f}" \
        in shaped[9]
    fb = next(r for r in rows if r[0].startswith("S0: a fresh resample"))
    for isolates in ("F vs R, feedback against a fresh resample",
                     "F0 vs R, the repair format itself",
                     "F vs F0, the feedback's content given the repair format"):
        assert isolates in fb[9]
    zero = next(r for r in rows if r[0].startswith("S0: most prompts"))
    assert zero[6] == "above" and "vs the seed's 59.2% (context, not the verdict)" in zero[2]


def test_an_inconclusive_claim_says_how_many_replicates_would_decide_it(complete):
    """The replicates the crossed test needs (80% power at Holm's strictest level, from the
    variance components it estimated), at the observed effect and the seed's, and the
    command that adds the seeds; a seed effect on another scale is said to be unusable."""
    from countdown_rlvr.analysis import claims
    from countdown_rlvr.stats.crossed import crossed_replicates_needed

    root, md = complete
    inp = load_inputs(root / "reports/details", root / "dvclive", CONFIGURED)
    found = {c.name: c for c in claims.evaluate(inp)}
    sd_claim = found["self_distill"]
    assert sd_claim.outcome() == "inconclusive"
    (plan,) = sd_claim.plans
    alpha = 0.05 / len(claims.family(found.values())) / len(sd_claim.tests())
    comps, n_problems = plan.crossed.components(), plan.crossed.n_problems
    n_obs = crossed_replicates_needed(abs(plan.observed), comps, n_problems, alpha)
    # the seed's effect scaled to this model: its relative change (+95%) at SFT's pass@1
    assert sd_claim.seed_scaled == pytest.approx((0.168 - 0.086) / 0.086 * float(np.mean(
        [r["pass_b"] for r in metrics("compare.json")["pairs"]["distill_R_vs_sft"]["test"]["k1"]
         ["per_replicate"].values()])))
    n_seed = crossed_replicates_needed(sd_claim.seed_scaled, comps, n_problems, alpha)
    row = next(r for r in table_rows(md, "Seed claims") if r[0].startswith("S0: self-dist"))
    assert row[10].startswith(f"{n_obs} replicates at the observed effect, {n_seed} "
                              "replicates at the seed's")
    seeds = ",".join(map(str, range(n_obs if n_obs > 3 else n_seed)))  # r0-r2 and the new
    # the claim's chain (SFT -> repair -> distill) and SFT's list, which trains the new seeds
    assert f"`dvc exp run -S 'replicates.seeds=[{seeds}]' -S 'replicates.repair=[{seeds}]'`" \
        in row[10] and "more replicates of the repair chain" in row[10]
    fb = next(r for r in table_rows(md, "Seed claims") if r[0].startswith("S0: a fresh"))
    assert "the seed's effect is not a number we can use here" in fb[10]
    # shaped vs binary: S1 gives a rollout accuracy, S0 a pass@1 pair (0.088 -> 0.120),
    # scaled to this run's binary RLOO
    binary = float(np.mean([r["pass_b"] for r in metrics("compare.json")["pairs"][
        "rloo_shaped_vs_rloo"]["test"]["k1"]["per_replicate"].values()]))
    assert found["shaped"].seed_scaled == pytest.approx((0.120 - 0.088) / 0.088 * binary)
    assert found["shaped"].delta == pytest.approx(found["shaped"].seed_scaled / 2)
    assert "Replicates to decide" in md


def test_differences_read_policy_minus_reference_in_either_pair_order(complete, tmp_path):
    _, md = complete
    root = copy_fixture(tmp_path)
    path = root / "reports/details/compare.json"
    rep = json.loads(path.read_text())
    swapped = {}  # [rloo, sft] written as [sft, rloo]: every pooled difference negated
    for k, r in rep["pairs"].pop("rloo_vs_sft")["test"].items():
        p = r["pooled"]
        swapped[k] = {**r, "pooled": {**p, "mean": -p["mean"], "ci_low": -p["ci_high"],
                                      "ci_high": -p["ci_low"]}}
    rep["pairs"]["sft_vs_rloo"] = {"test": swapped}
    path.write_text(json.dumps(rep))
    render(root, require_all=True)
    before = {r[0]: r for r in table_rows(md, "S4 Table 1")}["rloo"]
    after = {r[0]: r for r in table_rows((root / "reports/report.md").read_text(), "S4 Table 1")}
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
    md = (root / "reports/report.md").read_text()
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
    md = (root / "reports/report.md").read_text()
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
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["report"].update(report)
    # the fixture's replicates, r0-r2, in every chain (the defaults start at seed 1)
    params["replicates"] = {chain: [0, 1, 2] for chain in params["replicates"]}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(root)
    runpy.run_path(str(ROOT / "stages/report.py"), run_name="__main__")


def test_stage_writes_report_figures_and_timing(tmp_path, monkeypatch, capsys):
    root = copy_fixture(tmp_path)
    run_stage(root, monkeypatch)  # params.yaml defaults: require_all true
    assert "wrote reports/report.md" in capsys.readouterr().out
    assert "not run" not in (root / "reports/report.md").read_text()
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
    assert "not run" in (root / "reports/report.md").read_text()


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
    assert "not run" not in pipeline.read("reports/report.md").decode()
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
    claim = next(r for r in table_rows(md, "Seed claims") if r[0].startswith("S3"))
    diffs = [metrics(f"int/{t}.json")["heldout_pass_at_k"]["int"]["pass@k"]
             - metrics(f"int/{t}.json")["heldout_pass_at_k"]["plain_rl"]["pass@k"]
             for t in ("r0", "r1", "r2")]
    assert f"{np.mean(diffs):+.3f}" in claim[2] and "r2 " in claim[3]


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
        c.adjusted = 0.5  # inconclusive
        return c.needed({key: [0, 1, 2] for key in CHAINS})

    assert needed(0.01).startswith("no replicate count (the shared test problems'")
    assert needed(0.045).startswith("7 replicates at the observed effect") and \
        "replicates.seeds=[0,1,2,3,4,5,6]" in needed(0.045)


def test_an_effect_claim_can_be_decided_equivalent():
    """Two one-sided tests with the claim's own SE put the effect within +-delta (half the
    seed's scaled effect): the claim is decided equivalent; a wide interval is not; and the
    TOST p is the larger one-sided p, checked in closed form."""
    from scipy.stats import t as t_dist

    from countdown_rlvr.analysis.claims import EFFECT, Claim, _scaled, _tost
    from countdown_rlvr.stats.crossed import from_mean_squares

    c = Claim("x", "y", EFFECT)
    assert _scaled(c, 0.086, 0.168, 0.05, "pass@1") == pytest.approx(0.05 * 0.082 / 0.086)
    assert c.delta == pytest.approx(c.seed_scaled / 2) and "+95%" in c.scaling
    tight = from_mean_squares(0.001, 0.002, 0.001, 0.001, 400, 6)  # se ~ 0.0009
    p = _tost(tight, 0.02)
    se, df = tight.se, tight.df
    assert p == pytest.approx(max(t_dist.sf((0.001 + 0.02) / se, df),
                                  t_dist.cdf((0.001 - 0.02) / se, df)))
    wide = from_mean_squares(0.001, 2.0, 1.0, 1.0, 400, 3)
    assert _tost(wide, 0.02) > 0.05 and _tost(tight, None) is None

    def decided(test):
        c = Claim("x", "y", EFFECT, pvalue=test.pvalue, right_way=True, delta=0.02,
                  equiv=_tost(test, 0.02))
        ps = c.tests()
        c.adjusted, c.decided_by = c.claim_p(), min(ps, key=ps.get)
        return c.outcome()

    assert decided(tight) == "equivalent (|effect| < 0.02)"
    assert decided(wide) == "inconclusive"


def test_the_report_opens_with_the_forest_plot_of_the_claims(complete):
    """Item 7: the answers first. The forest plot comes before the claims table and has one
    row per claim, each with its claim's decision, effect, interval and replicate points."""
    from countdown_rlvr.analysis import claims
    from countdown_rlvr.analysis.figures import claim_rows, decision

    root, md = complete
    assert md.index("## The answers at a glance") < md.index("## Seed claims vs this run")
    assert "](figures/claims.png)" in md.split("## Seed claims vs this run")[0]
    found = claims.evaluate(load_inputs(root / "reports/details", root / "dvclive", CONFIGURED))
    rows = claim_rows(found)
    assert [r.decision for r in rows] == [decision(c.outcome()) for c in found]
    for r, c in zip(rows, found, strict=True):
        assert r.effect == c.effect and r.ci == c.ci
        assert len(r.per_replicate) == 3 or c.why_not  # the fixture: r0, r1, r2
    assert decision("not testable: no compare.json") == "not tested"
    assert decision("equivalent (|effect| < 0.02)") == "equivalent"
    assert decision("inconclusive: one replicate (the pooled test needs two or more)") == \
        "inconclusive"


def test_anti_collapse_is_not_tested_when_plain_opd_did_not_collapse(tmp_path):
    """S4's anti-collapse arm prevents plain OPD's diversity collapse: with plain OPD's
    rollout entropy flat in one replicate (training rollouts, not the test split), there is
    nothing to prevent, so the claim is not tested, says why, and leaves Holm's family."""
    from countdown_rlvr.analysis import claims

    root = copy_fixture(tmp_path)
    inp = render(root, require_all=True)
    before = {c.name: c for c in claims.evaluate(inp)}["opd_anti_collapse"]
    assert before.tested  # the fixture's plain OPD collapses (entropy 0.88 -> 0.61)
    path = root / "reports/details/opd/r1.json"
    m = json.loads(path.read_text())
    path.write_text(json.dumps({**m, "entropy_final": m["entropy_first"] * 0.9}))
    inp = render(root, require_all=True)
    found = {c.name: c for c in claims.evaluate(inp)}
    c = found["opd_anti_collapse"]
    assert c.outcome().startswith("not tested: no collapse to prevent: plain OPD's rollout "
                                  "entropy fell by less than 25% in r1 (")
    assert c.name not in {x.name for x, _ in claims.family(found.values())}
    row = next(r for r in table_rows((root / "reports/report.md").read_text(), "Seed claims")
               if r[0].startswith("S4: anti-collapse"))
    assert row[9].startswith("**not tested: no collapse to prevent")


def test_the_claims_table_gives_the_power_at_the_seeds_effect_and_the_cost_to_decide():
    """The planned power of a run like this one at the seed's scaled effect (from the same
    model as the test), and the CPU minutes the replicates that would decide a claim cost."""
    from countdown_rlvr.analysis.claims import EFFECT, Claim, Plan
    from countdown_rlvr.stats import t_power
    from countdown_rlvr.stats.crossed import crossed_power, from_mean_squares

    res = from_mean_squares(0.01, 0.04 + 3 * 0.01, 0.04 + 400 * 4e-4, 0.04, 400, 3)
    c = Claim("x", "y", EFFECT, plans=[Plan("a − b", 0.03, 0.03, res.sd, crossed=res, n=3)])
    c.adjusted = 0.5
    assert c.seed_power() == pytest.approx(crossed_power(0.03, res.components(), 400, 3))
    floored = Claim("x", "y", EFFECT, plans=[Plan("a − b", 0.01, 0.03, 0.02, n=3)])
    assert floored.seed_power() == pytest.approx(t_power(0.03, 0.02, 3))
    no_seed = Claim("x", "y", EFFECT, plans=[Plan("a − b", 0.01, None, 0.02, n=3)])
    assert no_seed.seed_power() is None
    # the observed power: the same test at the observed effect, with or without a seed's
    assert no_seed.observed_power() == pytest.approx(t_power(0.01, 0.02, 3))
    assert floored.observed_power() < floored.seed_power()
    one_sided = Claim("x", "y", EFFECT, plans=[Plan("a − b", -0.01, 0.03, 0.02, n=3,
                                                    one_sided=True)])
    assert one_sided.observed_power() == 0.0  # observed away from the one-sided test
    minutes = {"sft": 3.5, "ipo": 2.5, "rloo": 7.5, "opd": 6.0, "repair": 2.0, "int": 5.0}
    text = c.needed({key: [0, 1, 2] for key in CHAINS}, minutes)
    n = int(text.split(" ")[0])
    assert n > 3 and f"{n - 3} more replicates of the sft chain ≈ {(n - 3) * 3.5:.0f} " \
        "CPU-min" in text
    # a chain's replicate costs its own minutes, and SFT's for a seed SFT has not trained
    c.chain = "opd"
    chains = {**{key: [0, 1, 2] for key in CHAINS}, "sft": [0, 1, 2, 3]}
    text = c.needed(chains, minutes)
    cost = 6.0 * (n - 3) + 3.5 * (n - 4)  # seed 3: SFT's already
    assert f"{n - 3} more replicates of the opd chain ≈ {cost:.0f} CPU-min" in text
    more = ",".join(map(str, range(n)))
    assert text.endswith(f"`dvc exp run -S 'replicates.seeds=[{more}]' "
                         f"-S 'replicates.opd=[{more}]'`")
