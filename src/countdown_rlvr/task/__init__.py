"""The Countdown task: generator, solver, verifier, rewards, prompts and the repair prompt."""

from .generate import Problem, generate_problems, problem_key
from .prompts import FEEDBACK_CONDITIONS, feedback, solve_prompt
from .repair_prompt import condition_feedback, repair_prompt
from .rewards import REWARDS, get_reward
from .solve import MAX_NUMBERS, operator_flips, solution_steps, solve, step_trace
from .verify import FAILURES, Verdict, count_arithmetic_errors, extract_answer, verify

__all__ = [
    "FAILURES", "FEEDBACK_CONDITIONS", "MAX_NUMBERS", "REWARDS", "Problem", "Verdict",
    "condition_feedback", "count_arithmetic_errors", "extract_answer", "feedback",
    "generate_problems", "get_reward", "operator_flips", "problem_key", "repair_prompt",
    "solution_steps", "solve", "solve_prompt", "step_trace", "verify",
]
