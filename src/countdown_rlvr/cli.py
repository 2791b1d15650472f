"""`countdown-rlvr`: the project's command line (a console script from pyproject.toml).

    countdown-rlvr diff A [B] [--policy NAME ...] [--all] [--alpha 0.05] [--adjust holm|none]
                        [--format text|md|json]      # B: the workspace when left out
"""

from __future__ import annotations

import argparse

from countdown_rlvr import branch_diff


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="countdown-rlvr")
    sub = ap.add_subparsers(dest="command", required=True)
    add = sub.add_parser("diff", help="compare two revisions' (or the workspace's) results, "
                         "knowing the noise",
                         description=branch_diff.__doc__.split("\n\n")[0])
    branch_diff.add_arguments(add)
    add.set_defaults(run=branch_diff.run)
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
