"""countdown-rlvr: a DVC pipeline for RLVR research on the Countdown arithmetic task.

Importing the package sets nothing and reads nothing: the process settings a stage wants
before torch loads are the stage scripts' (countdown_rlvr.core.stage_env).
"""

__version__ = "0.1.0"
