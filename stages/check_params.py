"""Stage `check_params`: every param checked before any stage's outputs are touched.

DVC removes a stage's outputs just before it runs that stage, so a bad value found by the
stage itself (`problems.n_train: -5`) would leave the previous outputs deleted. This stage
runs first (`problems` and `base`, the roots of the graph, depend on its output), builds
every stage's config (countdown_rlvr.cli.stage_params) and stops the run with every problem of
the params listed at once (bad values, unknown or missing keys, relations between values).

It also checks that dvc.yaml's stages are the ones these params make (a value that adds or
removes a stage needs `python -m countdown_rlvr.cli.experiment --write` first). When it refuses
a value that params.yaml holds but git's HEAD does not (`dvc exp run -S` writes the value there
before any stage runs), it says how to restore the file.

Its output is written only when every param is valid and never changes (DVC keeps it:
`persist: true`), so passing the check re-runs nothing downstream.
"""

import os

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

import subprocess
from pathlib import Path

import yaml

from countdown_rlvr.cli.experiment import generate
from countdown_rlvr.cli.stage_params import check_all
from countdown_rlvr.core import io

OUT = "reports/details/check_params.json"
RESTORE = ("params.yaml now differs from git's HEAD (`dvc exp run -S` writes its values there "
           "before any stage runs): `git checkout -- params.yaml` restores it")


def changed_keys(params: dict) -> list[str]:
    """The leaf keys of params.yaml that differ from git's HEAD ([] outside git)."""
    head = subprocess.run(["git", "show", "HEAD:params.yaml"], capture_output=True, text=True,
                          check=False)
    if head.returncode:
        return []
    def flat(d, prefix=""):
        return {k: v for key, val in d.items()
                for k, v in (flat(val, f"{prefix}{key}.").items() if isinstance(val, dict)
                             and val else [(f"{prefix}{key}", val)])}
    old, new = flat(yaml.safe_load(head.stdout) or {}), flat(params)
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def check_graph(params: dict) -> None:
    """dvc.yaml's stages are what experiment.py makes from these params: a value that adds or
    removes a stage or a path (sft.early_step, a policy list) needs dvc.yaml made anew first,
    or DVC would run another graph than the params describe."""
    made = yaml.safe_load(generate(params))["stages"]
    if made == yaml.safe_load(Path("dvc.yaml").read_text())["stages"]:
        return
    keys = changed_keys(params)
    raise io.StageError("check_params", "dvc.yaml's stages are not what these params (and this "
                        "code's imports) make: a value that adds or removes a stage changed" +
                        (f" (changed: {', '.join(keys)})" if keys else ", or a stage's imports")
                        + "; run `python -m countdown_rlvr.cli.experiment --write`, then run "
                        "again" + (f". {RESTORE}" if keys else ""))


def main() -> None:
    # read unchecked: check_all lists the bad values with every other problem, where
    # load_params would stop at the values
    params = io.read_params()
    try:
        built = check_all(params)  # raises StageError, naming each key and its fix
    except io.StageError as exc:
        if changed_keys(params):
            message = str(exc.code).removeprefix("[check_params] error: ")
            raise io.StageError("check_params", f"{message}\n  {RESTORE}") from None
        raise
    check_graph(params)
    io.clear_stale_tmp()  # what load_params does for every other stage
    io.write_json(OUT, {"params": "valid"})  # constant: downstream stages see no change
    print(f"[check_params] {built} stage configs built from params.yaml: every param valid")


if __name__ == "__main__":
    main()
