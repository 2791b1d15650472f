"""Every file of overrides applies with `dvc exp run $(python -m countdown_rlvr.cli.overrides FILE)`:
DVC refuses a key params.yaml does not have, so each file's keys must all be params.yaml's; and
the policy lists the files copy stay in step with params.yaml's."""

import runpy

import pytest
import yaml
from conftest import ROOT

from countdown_rlvr.cli.overrides import leaves

PARAMS = leaves(yaml.safe_load((ROOT / "params.yaml").read_text()))


# and the next run's design while one is planned (scripts/regenerate.sh applies and deletes it)
@pytest.mark.parametrize("name", ["params.smoke.yaml", "params.qwen.yaml", "params.secondary.yaml",
                                  *(["params.next.yaml"] if (ROOT / "params.next.yaml").exists()
                                    else [])])
def test_every_override_names_a_key_of_params_yaml(name):
    keys = leaves(yaml.safe_load((ROOT / name).read_text()))
    assert keys, f"{name} overrides nothing"
    assert [k for k in keys if k not in PARAMS] == []


# The override files copy params.yaml's policy lists whole (an override replaces a list):
# these checks keep the copies in step with params.yaml, the one place a new policy is listed.
LISTS = ("policies", "first_replicate_only")


def _with(name: str) -> dict:
    from conftest import merge
    return merge(yaml.safe_load((ROOT / "params.yaml").read_text()),
                 yaml.safe_load((ROOT / name).read_text()))


def _trained(params: dict) -> set[str]:
    """Every policy a run of `params` trains: what an `evaluate` list may name."""
    from countdown_rlvr.analysis.chains import INT_POLICIES
    from countdown_rlvr.core.arms import ARMS

    ipo, distill = params["ipo"], params["distill"]
    early = ["sft_early"] if params["sft"].get("early_step") is not None else []
    return {"sft", *early, *(a.name for a in ARMS), *INT_POLICIES,
            *(f"ipo_{s}" for s in ipo["sources"] + ipo["first_replicate_sources"]),
            *(f"distill_{c}" for c in distill["conditions"] + distill["first_replicate_conditions"])}


def test_the_secondary_lists_hold_the_defaults_lists():
    """params.secondary.yaml adds to the default run: its lists contain params.yaml's."""
    default, secondary = yaml.safe_load((ROOT / "params.yaml").read_text()), _with(
        "params.secondary.yaml")
    for key in LISTS:
        assert [p for p in default["evaluate"][key] if p not in secondary["evaluate"][key]] == []
    assert [p for p in default["compare"]["pairs"] if p not in secondary["compare"]["pairs"]] == []


def test_the_smoke_lists_are_the_defaults_the_smoke_run_can_train():
    """params.smoke.yaml's policy lists are params.yaml's (the same arms: the same dvc.yaml)
    less the policies the smoke run cannot train (no teacher pairs: ipo_easyneg), plus the
    smoke-only samples of int and IPO's base source; the end-to-end tests' EVERY_ARM lists are
    the secondary's that the smoke run can train (every arm)."""
    from conftest import EVERY_ARM

    default, smoke = yaml.safe_load((ROOT / "params.yaml").read_text()), _with("params.smoke.yaml")
    trained = _trained(smoke)
    for key in LISTS:
        want = [p for p in default["evaluate"][key] if p in trained]
        assert [p for p in smoke["evaluate"][key] if p not in ("int", "ipo_base")] == want, key
    secondary = _with("params.secondary.yaml")
    for key in LISTS:
        assert EVERY_ARM["evaluate"][key] == [p for p in secondary["evaluate"][key]
                                             if p in trained], key
    assert [p for p in smoke["compare"]["pairs"] if p not in secondary["compare"]["pairs"]] == []


@pytest.mark.parametrize("name", ["params.smoke.yaml", "params.qwen.yaml"])
def test_a_run_of_the_file_needs_no_new_dvc_yaml(name, monkeypatch):
    """`dvc exp run $(... FILE)` runs the committed dvc.yaml: the params check refuses params
    that make another graph (it cannot be changed by -S), so these files must make the same
    stages. A smoke file with `replicates.shared_sft: null` against a default of one shared SFT
    did not, and the README's smoke run stopped at its first stage."""
    check_graph = runpy.run_path(str(ROOT / "stages/check_params.py"))["check_graph"]
    monkeypatch.chdir(ROOT)
    check_graph(_with(name))  # raises StageError naming `experiment --write` when it differs
