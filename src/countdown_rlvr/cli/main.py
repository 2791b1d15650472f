"""`countdown-rlvr`: the project's command line (a console script from pyproject.toml).

    countdown-rlvr diff A [B] [--policy NAME ...] [--all] [--alpha 0.05] [--adjust holm|none]
                        [--format text|md|json]      # B: the workspace when left out
    countdown-rlvr dag [--write]                      # the stage map of docs/dag.md
"""

from __future__ import annotations

import argparse

from countdown_rlvr.analysis import branch_diff
from countdown_rlvr.cli import stage_map


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="countdown-rlvr")
    sub = ap.add_subparsers(dest="command", required=True)
    add = sub.add_parser("diff", help="compare two revisions' (or the workspace's) results, "
                         "knowing the noise",
                         description=branch_diff.__doc__.split("\n\n")[0])
    branch_diff.add_arguments(add)
    add.set_defaults(run=branch_diff.run)
    dag = sub.add_parser("dag", help="a map of the stage graph that fits a screen",
                         description=stage_map.__doc__.split("\n\n")[0])
    stage_map.add_arguments(dag)
    dag.set_defaults(run=stage_map.run)
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
