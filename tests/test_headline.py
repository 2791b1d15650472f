"""The headline metrics: only what a user compares across experiments is a DVC metric.

Per policy (evaluate.shared + evaluate.policies) the test pass@k at the smallest and largest k,
mean and SD over replicates; per claim its decision (word and code), effect and Holm-adjusted
p. Numbers copied from the details without change, the same keys in every file of one kind,
and small enough that `dvc metrics show` fits 200 columns and `dvc metrics diff` of two runs
has at most 4 rows per policy and 4 per claim.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from countdown_rlvr.analysis import claims, headline
from countdown_rlvr.analysis.claims import Claim
from countdown_rlvr.analysis.results import load_inputs
from countdown_rlvr.core import io

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures/report/reports"
TAGS = ("r0", "r1", "r2")


def detail(rel: str) -> dict:
    return json.loads((FIXTURE / "details" / rel).read_text())


def test_policy_headline_is_the_mean_and_spread_over_replicates():
    pooled = detail("compare.json")["policies"]["rloo"]
    head = headline.policy(pooled)
    assert set(head) == {"pass@1", "pass@1_sd", "pass@16", "pass@16_sd"}
    one = pooled["test"]["pass@1"]
    assert head["pass@1"] == one["mean"] and head["pass@1_sd"] == one["sd"]
    per = [detail(f"eval/rloo/{t}.json")["test"]["pass@1"] for t in TAGS]
    assert abs(head["pass@1"] - sum(per) / 3) < 1e-12


def test_a_shared_policy_has_no_spread():
    assert set(headline.policy(detail("compare.json")["policies"]["base"])) == {"pass@1", "pass@16"}


def test_claim_headline_is_its_decision_effect_and_adjusted_p():
    inp = load_inputs(FIXTURE / "details", FIXTURE.parent / "dvclive")
    found = claims.evaluate(inp)
    assert [c.name for c in found] == [fn.__name__ for fn in claims.CLAIMS]  # the file names
    for c in found:
        head = headline.claim(c)
        assert set(head) <= {"decision", "decision_code", "effect", "p"}
        assert head["decision"] == c.decision.value
        assert head["decision_code"] == claims.CODES[c.decision]
        if c.adjusted is not None:
            assert head["p"] == c.adjusted
        if c.effect is not None:
            assert head["effect"] == c.effect


def test_every_decision_has_its_own_code():
    assert set(claims.CODES) == set(claims.Decision)
    assert len(set(claims.CODES.values())) == len(claims.Decision)


@given(st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-3, 3)),
       st.one_of(st.none(), st.floats(0, 1)), st.sampled_from(list(claims.Decision)))
def test_claim_headline_keeps_numbers_and_the_decision(effect, p, decision):
    c = Claim("a claim", "seed", claims.EFFECT, effect=effect)
    c.adjusted, c.decision = p, decision
    head = headline.claim(c)
    assert head == {"decision": decision.value, "decision_code": claims.CODES[decision],
                    **{k: v for k, v in (("effect", effect), ("p", p)) if v is not None}}


def _dvc(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "400"}  # the table's own width, not the terminal's
    return subprocess.run([str(Path(sys.executable).with_name("dvc")), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True).stdout


HEADLINE_KEYS = {"eval": {"pass@1", "pass@16", "pass@1_sd", "pass@16_sd"},
                 "claims": {"decision", "decision_code", "effect", "p"}}


def test_committed_metrics_fit_200_columns_and_hold_only_the_headline():
    """`dvc metrics show` of this checkout (a fresh clone's view: the metrics are in git): one
    row per policy and per claim, and only the headline values in them, so a diff of two runs
    has at most 4 rows per policy and 4 per claim (a claim that was not tested has no p), and
    every claim's file holds its decision."""
    lines = _dvc("metrics", "show").splitlines()
    assert lines and max(map(len, lines)) <= 200, max(map(len, lines))
    files = sorted((ROOT / io.METRICS).rglob("*.json"))
    assert {f.parent.name for f in files} == set(HEADLINE_KEYS)
    for f in files:
        values = json.loads(f.read_text())
        assert set(values) <= HEADLINE_KEYS[f.parent.name], f
        if f.parent.name == "claims":
            assert values["decision"] in {d.value for d in claims.Decision}, f
            assert values["decision_code"] == claims.CODES[claims.Decision(values["decision"])]
    assert len(lines) == 1 + len(files)  # one row per policy and per claim
