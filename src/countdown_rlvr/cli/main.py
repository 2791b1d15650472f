"""`countdown-rlvr`: the project's command line (a console script from pyproject.toml).

    countdown-rlvr diff A [B] [--policy NAME ...] [--all] [--alpha 0.05] [--adjust holm|none]
                        [--format text|md|json]      # B: the workspace when left out
    countdown-rlvr dag [--mermaid] [--write]          # the stage map (docs/dag.md)
    countdown-rlvr cost -S KEY=VALUE [--file PATH]    # what a variant re-runs, and its minutes
    countdown-rlvr verify-outputs                     # re-hash outputs and cache against dvc.lock
"""

from __future__ import annotations

import argparse
import os
import sys

from countdown_rlvr.analysis import branch_diff
from countdown_rlvr.cli import cost, stage_map, verify_outputs

DESCRIPTION = """\
Commands for a run of the countdown-rlvr pipeline (`dvc repro` runs the pipeline itself):
compare two revisions' results with intervals that know the training noise, map the
stage graph, say what a variant re-runs before it runs, and check every output's bytes
against dvc.lock."""

# one example per command, shown under `countdown-rlvr --help` and under the command's own
EXAMPLES = {
    "diff": ("countdown-rlvr diff main my-exp",
             ("main against the `dvc exp` my-exp: both means, the difference, its interval\n"
              "      and a verdict for each policy and headline metric")),
    "dag": ("countdown-rlvr dag",
            "each stage and arm in run order, and what it waits for"),
    "cost": ("countdown-rlvr cost -S rloo.lr=5e-5",
             "the stages `dvc exp run -S rloo.lr=5e-5` re-runs here, and their minutes"),
    "verify-outputs": ("countdown-rlvr verify-outputs",
                       ("every output in the workspace and every cache object, re-read and\n"
                        "      re-hashed: one line per mismatch with dvc.lock, exit 1 if any")),
}


def _example(command: str) -> str:
    line, what = EXAMPLES[command]
    return f"example:\n  {line}\n      {what}"


def parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter  # keeps the examples' line breaks
    epilog = "examples:\n" + "\n".join(f"  {line}\n      {what}"
                                       for line, what in EXAMPLES.values())
    ap = argparse.ArgumentParser(prog="countdown-rlvr", description=DESCRIPTION, epilog=epilog,
                                 formatter_class=raw)
    sub = ap.add_subparsers(dest="command", required=True)
    add = sub.add_parser("diff", help="compare two revisions' (or the workspace's) results, "
                         "knowing the noise", formatter_class=raw,
                         description=branch_diff.__doc__.split("\n\n")[0],
                         epilog=_example("diff"))
    branch_diff.add_arguments(add)
    add.set_defaults(run=branch_diff.run)
    dag = sub.add_parser("dag", help="a map of the stage graph that fits a terminal",
                         formatter_class=raw, description=stage_map.__doc__.split("\n\n")[0],
                         epilog=_example("dag"))
    stage_map.add_arguments(dag)
    dag.set_defaults(run=stage_map.run)
    cst = sub.add_parser("cost", help="the stages a params override or an edit re-runs, and "
                         "their minutes", formatter_class=raw,
                         description=cost.__doc__.split("\n\n")[0], epilog=_example("cost"))
    cost.add_arguments(cst)
    cst.set_defaults(run=cost.run)
    verify = sub.add_parser("verify-outputs", help="re-hash every output and cache object, "
                            "trusting no stored hash; list what differs from dvc.lock",
                            formatter_class=raw,
                            description=verify_outputs.__doc__.split("\n\n")[0],
                            epilog=_example("verify-outputs"))
    verify_outputs.add_arguments(verify)
    verify.set_defaults(run=verify_outputs.run)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:  # `countdown-rlvr cost ... | head`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
