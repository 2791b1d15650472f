"""The one user-facing error type (no project imports: config, io and every stage can raise it).

A StageError is a SystemExit: Python prints its one line to stderr and exits 1, with no
traceback. Code that meets bad data (a damaged input, a full disk) raises one naming the file
and the stage to re-run, so every stage gets the one line without a handler of its own.
`COUNTDOWN_RLVR_DEBUG=1` prints the traceback behind it as well.
"""

import os
import sys
import traceback

DEBUG = "COUNTDOWN_RLVR_DEBUG"  # set (not "" or "0"): a StageError prints its traceback too


class StageError(SystemExit):
    """A user-facing error: stops the stage with a message that names the fix."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"[{stage}] error: {message}")
        if os.environ.get(DEBUG, "") not in ("", "0"):
            _print_cause()


def _print_cause() -> None:
    """The traceback of the exception being handled (what a StageError raised in an `except`
    block stands for), else the stack that raises it: for debugging, under `DEBUG`."""
    if sys.exc_info()[1] is not None:
        traceback.print_exc()
    else:
        traceback.print_stack(sys._getframe(2))
