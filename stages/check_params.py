"""Stage `check_params`: every param checked before any stage's outputs are touched.

DVC removes a stage's outputs just before it runs that stage, so a bad value found by the
stage itself (`problems.n_train: -5`) would leave the previous outputs deleted. This stage
runs first (`problems` and `base`, the roots of the graph, depend on its output), builds
every stage's config (countdown_rlvr.cli.stage_params) and stops the run with every problem of
the params listed at once (bad values, unknown or missing keys, relations between values).

Its output is written only when every param is valid and never changes (DVC keeps it:
`persist: true`), so passing the check re-runs nothing downstream.
"""

import os

from countdown_rlvr.core.stage_env import stage_env

os.environ.update(stage_env())  # before any import below loads torch (OpenMP, 2 MB pages)

from countdown_rlvr.cli.stage_params import check_all
from countdown_rlvr.core import io

OUT = "reports/details/check_params.json"


def main() -> None:
    # read unchecked: check_all lists the bad values with every other problem, where
    # load_params would stop at the values
    built = check_all(io.read_params())  # raises StageError, naming each key and its fix
    io.clear_stale_tmp()  # what load_params does for every other stage
    io.write_json(OUT, {"params": "valid"})  # constant: downstream stages see no change
    print(f"[check_params] {built} stage configs built from params.yaml: every param valid")


if __name__ == "__main__":
    main()
