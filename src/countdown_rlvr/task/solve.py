"""Exhaustive Countdown solver, step traces and operator-flip hard negatives.

The search covers every binary tree over the numbers with `+ - * /`, negative and
fractional intermediates included. It is a dynamic programme over subsets of the
numbers: table[mask] maps each reachable exact value to the expressions that reach it,
built from every split of `mask` into two non-empty parts. Expressions are printed
faithfully to their tree (parentheses only where precedence needs them) with the
operands of `+` and `*` in a canonical order, so "distinct" means distinct trees up to
swapping the operands of a commutative operator.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from .arith import apply_op
from .verify import PREC, ParseError, evaluate, parse

Expr = tuple[str, int]  # (text, precedence): 3 atom, 2 for * /, 1 for + -
Value = int | Fraction  # exact: ints until a division is inexact (see arith.apply_op)


def _join(a: Expr, op: str, b: Expr) -> Expr:
    prec = PREC[op]
    left = a[0] if a[1] >= prec else f"({a[0]})"
    right = b[0] if b[1] > prec else f"({b[0]})"
    return f"{left} {op} {right}", prec


# Every operator and operand order over a pair (swap: the second operand first); `+` and
# `*` once, their operands are put in a canonical order instead.
_STEPS = (("+", False), ("*", False), ("-", False), ("-", True), ("/", False), ("/", True))


def _values(va: Value, vb: Value) -> list[tuple[Value, str, bool]]:
    """(value, op, swap) for every operator and operand order; divisions by zero left out.

    The values depend on the pair of values only: computed once, then shared by every
    pair of expressions that reach them."""
    out = []
    for op, swap in _STEPS:
        v = apply_op(vb, op, va) if swap else apply_op(va, op, vb)
        if v is not None:
            out.append((v, op, swap))
    return out


def _combine(values: list[tuple[Value, str, bool]], ea: Expr, eb: Expr):
    """Yield (value, expr) for each of `values` (from `_values`) over expressions ea, eb."""
    lo, hi = (ea, eb) if ea[0] <= eb[0] else (eb, ea)  # canonical order for + and *
    for v, op, swap in values:
        if op == "+" or op == "*":
            yield v, _join(lo, op, hi)
        else:
            yield v, (_join(eb, op, ea) if swap else _join(ea, op, eb))


def _splits(mask: int):
    """Unordered splits of `mask` into two non-empty sub-masks (each once)."""
    low = mask & -mask  # the part holding the lowest bit comes first: no double count
    sub = (mask - 1) & mask
    while sub:
        if sub & low:
            yield sub, mask ^ sub
        sub = (sub - 1) & mask


def _tables(numbers: tuple[int | Fraction, ...]) -> dict[int, dict[Value, set[Expr]]]:
    """Reachable values and their expressions for every proper subset of the numbers."""
    n = len(numbers)
    full = (1 << n) - 1
    table: dict[int, dict[Value, set[Expr]]] = {}
    for i, x in enumerate(numbers):
        table[1 << i] = {x: {(str(x), 3)}}
    for mask in sorted(range(1, full), key=int.bit_count):
        if mask.bit_count() < 2:
            continue
        out: dict[Value, set[Expr]] = {}
        for a, b in _splits(mask):
            for va, ea_set in table[a].items():
                for vb, eb_set in table[b].items():
                    values = _values(va, vb)
                    for ea in ea_set:
                        for eb in eb_set:
                            for v, e in _combine(values, ea, eb):
                                out.setdefault(v, set()).add(e)
        table[mask] = out
    return table


@lru_cache(maxsize=4096)
def _solve(numbers: tuple[int | Fraction, ...], target: Fraction) -> tuple[str, ...]:
    if len(numbers) == 1:
        return (str(numbers[0]),) if numbers[0] == target else ()
    table = _tables(numbers)
    if target.denominator == 1:
        target = target.numerator  # int == int is much cheaper than int == Fraction
    full = (1 << len(numbers)) - 1
    found: set[str] = set()
    for a, b in _splits(full):
        for va, ea_set in table[a].items():
            for vb, eb_set in table[b].items():
                # cheap value test first: build strings only for hits
                hits = [s for s in _values(va, vb) if s[0] == target]
                if not hits:
                    continue
                for ea in ea_set:
                    for eb in eb_set:
                        found.update(e[0] for _, e in _combine(hits, ea, eb))
    return tuple(sorted(found, key=lambda s: (len(s), s)))


MAX_NUMBERS = 6  # 6 numbers: ~9 s and 256 MB at worst (target 0); 7 run out of memory


def solve(numbers: list[int], target: int) -> list[str]:
    """All distinct solution expressions (shortest first); [] when unsolvable.

    Operands and target are integers, or exact Fractions (the interventions ask whether a
    partial solution's rational intermediates can still reach the target). Raises ValueError
    for more than MAX_NUMBERS numbers (the search is exponential) or any other operand or
    target (a float, bool, string or NaN: its answers would fail the verifier)."""
    numbers = [_exact(x, "operand") for x in numbers]
    if len(numbers) > MAX_NUMBERS:
        raise ValueError(f"solve() takes at most {MAX_NUMBERS} numbers (the exhaustive search "
                         f"is exponential), got {len(numbers)}")
    if not numbers:
        return []
    return list(_solve(tuple(sorted(numbers)), Fraction(_exact(target, "target"))))


def _exact(x, what: str) -> int | Fraction:
    """x as an int or Fraction, or ValueError: bools, floats (even 2.0), strings and NaN."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        raise ValueError(f"solve() needs integer operands and target (or exact Fractions); "
                         f"the {what} {x!r} is not")
    return x.__index__()


# --- traces and negatives -----------------------------------------------------------

def fmt(v: Fraction | int) -> str:
    v = Fraction(v)
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def solution_steps(expression: str) -> list[tuple[str, str, str, str]]:
    """The "a op b = c" steps of an expression, in evaluation (post-)order."""
    steps: list = []
    evaluate(*parse(expression), steps=steps)
    return [(fmt(a), op, fmt(b), fmt(c)) for a, op, b, c in steps]


def step_trace(expression: str) -> str:
    """One line of reasoning per step: "44 + 19 = 63, 63 + 35 = 98"."""
    return ", ".join(f"{a} {op} {b} = {c}" for a, op, b, c in solution_steps(expression))


def operator_flips(expression: str, target: int) -> list[str]:
    """Hard negatives (S1 §3.1.1): flip one operator; same operands, different value.

    Flips that divide by zero or still hit the target are dropped.
    """
    chars = list(expression)
    positions = [i for i, ch in enumerate(chars) if ch in PREC]
    out: list[str] = []
    for i in positions:
        for op in PREC:
            if op == chars[i]:
                continue
            flipped = "".join(chars[:i] + [op] + chars[i + 1:])
            try:
                value = evaluate(*parse(flipped))
            except (ParseError, ZeroDivisionError):
                continue
            if value != target and flipped not in out:
                out.append(flipped)
    return out
