"""The report stage: figures and report.md from a fixture of metrics files
(tests/fixtures/report, written by its make_fixture.py with the real producers)."""

import importlib.util
import json
import re
import runpy
import shutil
from pathlib import Path

import pytest
import yaml

from countdown_rlvr.report import (
    FIGURES,
    IPO_SOURCES,
    MissingInputs,
    load_inputs,
    render_report,
    report_policies,
)
from countdown_rlvr.task.prompts import REPAIR_LABELS

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "report"
TABLES = ("S4 Table 1", "S4 Table 2", "S1 Table 1", "S0 Table 2", "S0 Table 3")


def copy_fixture(dest: Path) -> Path:
    for sub in ("reports", "dvclive"):
        shutil.copytree(FIXTURE / sub, dest / sub)
    return dest


def render(root: Path, **kw):
    kw.setdefault("configured", report_policies())
    return render_report(root / "reports/details", root / "dvclive", root / "reports/report.md",
                         root / "reports/figures", **kw)


def metrics(rel: str) -> dict:
    return json.loads((FIXTURE / "reports/details" / rel).read_text())


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
    # S4 Table 1: one row per non-distill policy, pass@1 with the CI of compare.json
    rows = {r[0]: r for r in table_rows(md, "S4 Table 1")}
    assert set(rows) == {p for p in report_policies() if not p.startswith("distill_")}
    ci = metrics("compare.json")["policies"]["rloo"]["test"]["pass@1"]
    assert rows["rloo"][1] == f"{ci['value']:.3f} [{ci['ci_low']:.3f}, {ci['ci_high']:.3f}]"
    n4 = metrics("eval/opd_ac.json")["test"]["n4"]["pass@16"]
    assert rows["opd_ac"][6] == f"{n4:.3f}"
    d = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k1"]
    assert rows["rloo"][9] == (f"{d['pass_diff']:+.3f} [{d['pass_diff_ci_low']:+.3f}, "
                               f"{d['pass_diff_ci_high']:+.3f}]") and rows["sft"][9] == "ref."
    assert rows["rloo"][9].startswith("+") and rows["base"][9].startswith("-")
    # the headline p uses every sample; McNemar on sample 0 is the labelled last column
    assert rows["rloo"][10] == f"{d['pass_diff_pvalue']:.3g}" and rows["sft"][10] == "ref."
    assert rows["rloo"][12] == f"{d['pvalue']:.3g}"
    # S0 Table 2: every condition, McNemar against R-resample from repair.json
    rows = {r[0]: r for r in table_rows(md, "S0 Table 2")}
    assert set(rows) == set(REPAIR_LABELS.values())
    f3 = metrics("repair.json")["conditions"]["F3"]
    assert rows["F3 localized"][1] == f"{f3['success_rate']:.4f}"
    mc = f3["mcnemar_vs_resample"]
    assert rows["F3 localized"][6:] == [f"{mc['b']} / {mc['c']}", f"{mc['pvalue']:.3g}"]
    assert rows["R-resample"][6] == "(reference)"
    # S0 Table 3: distill examples next to the distilled policy's evaluation
    rows = {r[0]: r for r in table_rows(md, "S0 Table 3")}
    assert rows["SD-R"][2] == str(metrics("distill/R.json")["examples"])
    k8 = metrics("eval/distill_R.json")["diagnostics_by_k"]["k8"]
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
    assert rows["hardneg"][1] == str(metrics("ipo/hardneg.json")["pairs"])
    assert rows["hardneg"][6] == f"{metrics('eval/ipo_hardneg.json')['test']['pass@1']:.3f}"
    # S4 Table 2: every budget for the best policy (highest test pass@1 by default)
    evals = {p: m for p in report_policies() if "test" in (m := metrics(f"eval/{p}.json"))}
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
    """#15.3 / #17.8: the claims table opens the report; a claim without its inputs says
    why it is not testable instead of failing."""
    _, md = complete
    assert md.index("## Seed claims vs this run") < md.index("(S4 Table 1)")
    rows = {r[0][:2]: r for r in table_rows(md, "Seed claims vs this run")}
    assert len(table_rows(md, "Seed claims vs this run")) == 8
    verdicts = [r[-1] for r in table_rows(md, "Seed claims vs this run")]
    assert all(v.split()[0] in {"reproduced", "contradicted", "not"} for v in verdicts)
    shaped = next(r for r in table_rows(md, "Seed claims") if "shaped reward" in r[0])
    assert shaped[-1].startswith("not testable") and "rloo_shaped" in shaped[-1]
    rl = next(r for r in table_rows(md, "Seed claims") if r[0].startswith("S4: RLOO"))
    p = metrics("compare.json")["pairs"]["rloo_vs_sft"]["test"]["k1"]["pass_diff_pvalue"]
    assert f"k=1 p {p:.3g}" in rl[3]
    assert rows and "KL term" in md and "number misuse" in md


def test_shaped_claim_uses_a_two_proportion_test(tmp_path):
    root = copy_fixture(tmp_path)
    det = root / "reports/details"
    rloo = json.loads((det / "rloo.json").read_text())
    (det / "rloo.json").write_text(json.dumps({**rloo, "zero_std_groups": 600,
                                               "groups": 1000}))
    (det / "rloo_shaped.json").write_text(json.dumps({**rloo, "reward": "shaped",
                                                      "zero_std_groups": 300, "groups": 1000}))
    render(root, require_all=True)
    md = (root / "reports/report.md").read_text()
    shaped = next(r for r in table_rows(md, "Seed claims") if "shaped reward" in r[0])
    assert "300/1000" in shaped[2] and "two-proportion" in shaped[3]
    assert shaped[-1] == "reproduced"


def test_differences_read_policy_minus_reference_in_either_pair_order(complete, tmp_path):
    _, md = complete
    root = copy_fixture(tmp_path)
    path = root / "reports/details/compare.json"
    rep = json.loads(path.read_text())
    swapped = {}  # [rloo, sft] written as [sft, rloo]: every difference negated
    for k, r in rep["pairs"].pop("rloo_vs_sft")["test"].items():
        swapped[k] = {**r, "pass_diff": -r["pass_diff"], "pass_diff_ci_low": -r["pass_diff_ci_high"],
                      "pass_diff_ci_high": -r["pass_diff_ci_low"]}
    rep["pairs"]["sft_vs_rloo"] = {"test": swapped}
    rep["settings"]["pairs"] = [["sft", "rloo"] if pair == ["rloo", "sft"] else pair
                                for pair in rep["settings"]["pairs"]]
    path.write_text(json.dumps(rep))
    render(root, require_all=True)
    before = {r[0]: r for r in table_rows(md, "S4 Table 1")}["rloo"]
    after = {r[0]: r for r in table_rows((root / "reports/report.md").read_text(), "S4 Table 1")}
    assert after["rloo"][9:] == before[9:]


def test_render_is_byte_identical(complete, tmp_path):
    root, _ = complete
    again = copy_fixture(tmp_path)
    render(again, require_all=True)
    for rel in ["reports/report.md", *(f"reports/figures/{n}.png" for n in FIGURES)]:
        assert (again / rel).read_bytes() == (root / rel).read_bytes(), rel


def drop_sections(root: Path) -> None:
    for rel in ("repair.json", "eval/rloo.json", "ipo/hardneg.json"):
        (root / "reports/details" / rel).unlink()
    shutil.rmtree(root / "dvclive/rloo")


def test_missing_sections_render_as_not_run(tmp_path):
    root = copy_fixture(tmp_path)
    drop_sections(root)
    inp = render(root, configured=[*report_policies(), "ghost"], require_all=False)
    md = (root / "reports/report.md").read_text()
    for stage, rel in (("repair", "repair.json"), ("evaluate@rloo", "eval/rloo.json"),
                       ("ipo@hardneg", "ipo/hardneg.json"),
                       ("evaluate@ghost", "eval/ghost.json")):
        assert f"*not run* (stage `{stage}` has no metrics: `{rel}`)" in md
    assert any(p.endswith("dvclive/rloo/plots/metrics/**/reward_mean.tsv") for p in inp.missing)
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
    for rel in ("repair.json", "eval/rloo.json", "ipo/hardneg.json", "dvclive/rloo/plots/metrics"):
        assert rel in msg
    assert "(stage repair)" in msg and "(stage ipo@hardneg)" in msg
    assert not (root / "reports/report.md").exists() and not (root / "reports/figures").exists()


def test_sources_outside_the_configuration_are_not_required(tmp_path):
    """An IPO source left out of `ipo.sources` is shown as not configured, not missing."""
    root = copy_fixture(tmp_path)
    (root / "reports/details/ipo/hardneg.json").unlink()
    (root / "reports/details/eval/ipo_hardneg.json").unlink()
    sources = [s for s in IPO_SOURCES if s != "hardneg"]
    configured = [p for p in report_policies() if p != "ipo_hardneg"]
    inp = render(root, configured=configured, ipo_sources=sources, require_all=True)
    assert inp.missing == {}
    md = (root / "reports/report.md").read_text()
    assert "*not run* (not in this run's params: no `ipo/hardneg.json`)" in md


def test_kl_curve_is_optional_the_others_are_not(tmp_path):
    """rloo logs `kl` only with a reference model (rloo.kl_coef > 0)."""
    root = copy_fixture(tmp_path)
    curves = root / "dvclive/rloo/plots/metrics/train"
    (curves / "kl.tsv").unlink()
    inp = load_inputs(root / "reports/details", root / "dvclive", report_policies())
    assert inp.missing == {} and "kl" not in inp.curves["rloo"]
    (curves / "entropy.tsv").unlink()
    inp = load_inputs(root / "reports/details", root / "dvclive", report_policies())
    assert list(inp.missing) == [f"{root.as_posix()}/dvclive/rloo/plots/metrics/**/entropy.tsv"]
    steps, values = inp.curves["rloo"]["reward_mean"]  # dvclive's TSV, read back
    assert steps.tolist() == list(range(len(steps))) and len(values) == len(steps) > 1


def run_stage(root: Path, monkeypatch, **report):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["report"].update(report)
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


def test_fixture_is_what_the_producers_write_today(tmp_path):
    """Regenerating the fixture with the current producers (summarize, compare_policies,
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
    (pipeline.path / "reports/details/repair.json").unlink()
    failed = pipeline.run("dvc", "repro", "--single-item", "report", check=False)
    assert failed.returncode != 0 and "reports/details/repair.json" in failed.stderr


def test_interventions_table_and_claim_read_both_halves(complete):
    """S3: every arm on the trained-on and the held-out unsolved problems; the claim is
    tested on the held-out half (never trained on), with plain RL as the control."""
    _, md = complete
    m = metrics("int.json")
    rows = {r[0]: r for r in table_rows(md, "Interventions with the solver as oracle (S3)")}
    assert set(rows) >= {"int", "plain_rl", "sft"}
    assert rows["plain_rl"][4] == f"{m['heldout_pass_at_k']['plain_rl']['pass@k']:.3f}"
    assert rows["plain_rl"][5] == f"{m['heldout_mcnemar']['int_vs_plain_rl']['pvalue']:.3g}"
    claim = next(r for r in table_rows(md, "Seed claims") if r[0].startswith("S3"))
    assert f"p {m['heldout_mcnemar']['int_vs_plain_rl']['pvalue']:.3g}" in claim[3]
