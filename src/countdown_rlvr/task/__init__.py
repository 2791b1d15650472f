"""The Countdown task: generator (`generate`), solver (`solve`), verifier (`verify`), rewards,
prompts and the repair prompt, one module each.

The package imports only the public API every caller may use through it,
`countdown_rlvr.task.verify(completion, numbers, target)` and
`countdown_rlvr.task.solve(numbers, target)`; everything else is imported from its module
(`from countdown_rlvr.task.generate import generate_problems`). So a stage's code deps
(dvc.yaml) are the task files it runs: an edit to generate.py re-runs the stages that
generate problems, not every stage that verifies a sample.
"""

from .solve import solve
from .verify import Verdict, verify

__all__ = ["Verdict", "solve", "verify"]
