"""Every file of overrides applies with `dvc exp run $(python -m countdown_rlvr.cli.overrides FILE)`:
DVC refuses a key params.yaml does not have, so each file's keys must all be params.yaml's."""

import pytest
import yaml
from conftest import ROOT

from countdown_rlvr.cli.overrides import leaves

PARAMS = leaves(yaml.safe_load((ROOT / "params.yaml").read_text()))


@pytest.mark.parametrize("name", ["params.smoke.yaml", "params.qwen.yaml", "params.secondary.yaml"])
def test_every_override_names_a_key_of_params_yaml(name):
    keys = leaves(yaml.safe_load((ROOT / name).read_text()))
    assert keys, f"{name} overrides nothing"
    assert [k for k in keys if k not in PARAMS] == []
