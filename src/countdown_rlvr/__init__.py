"""countdown-rlvr: a DVC pipeline for RLVR research on the Countdown arithmetic task."""

__version__ = "0.1.0"
