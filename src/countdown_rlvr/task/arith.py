"""One step of Countdown arithmetic, `a op b`: the single definition every caller shares.

The solver, the verifier, the interventions' oracle and the synthetic pre-training corpus
all compute steps here. Values are exact rationals: Python ints, or `fractions.Fraction`
once a division is inexact (ints are much faster than Fractions, and the solver and the
verifier spend their time on steps). Imports nothing from the rest of the package.
"""

from __future__ import annotations

from fractions import Fraction

OPS = ("+", "-", "*", "/")


def apply_op(a: int | Fraction, op: str, b: int | Fraction) -> int | Fraction | None:
    """Exact `a op b` for an op in OPS; None when dividing by zero.

    Operand order matters for `-` and `/`. `+ - *` are Python's own (an int when both
    operands are ints, else a Fraction). A quotient of two ints is an int when exact
    (`a // b`), else a Fraction; any other quotient is a Fraction. Callers that need more
    (the verifier raising ZeroDivisionError, the corpus refusing non-integer steps) check
    the result. ValueError for any other op.
    """
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if not b:
            return None
        if a.__class__ is int and b.__class__ is int:
            return a // b if not a % b else Fraction(a, b)
        return (Fraction(a) if isinstance(a, int) else a) / b
    raise ValueError(f"unknown operator {op!r}; expected one of {OPS}")
