"""The verifier: the one judge for every stage.

Model text is untrusted. We never `eval` it. The answer is split by one C-level regex
into its integer literals and the text between them (its *shape*, e.g. "(# + #) + #");
the shape is parsed by a small shunting-yard parser that knows only non-negative integer
literals, binary `+ - * /` and parentheses; values are exact rationals. Shapes repeat
across samples, so parsed shapes are cached (a bounded LRU; long shapes are never
cached). Every step is linear in the input and the pool check runs before evaluation,
so hostile inputs (megabytes of text, 10^4 nested parentheses, 10^5-digit literals,
50,000-term sums) cost bounded time and never raise.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from .arith import apply_op

FAILURES = (
    "FORMAT_MISSING",  # no <answer>...</answer> pair
    "PARSE_FAIL",  # the answer is not a legal expression
    "NUMBER_UNKNOWN",  # a literal that is not in the pool
    "NUMBER_REUSED",  # a pool number used more often than given
    "NUMBER_OMITTED",  # a pool number not used
    "DIV_BY_ZERO",
    "WRONG_TARGET",  # legal, uses exactly the pool, wrong value
)

OPEN, CLOSE = "<answer>", "</answer>"
PREC = {"+": 1, "-": 1, "*": 2, "/": 2}
MAX_LITERAL_DIGITS = 12  # longer literals can't be pool numbers; never convert them
MAX_CACHED_SHAPE = 256  # characters; longer shapes are parsed but not cached
MAX_CACHED_BYTES = 4096  # and bytes per key: the cache stays under 16,384 x 4 KB = 64 MB
_SPLIT = re.compile(r"([0-9]+)")  # ASCII digits only: int() would accept "٣"
_BAD_HINTS = {".": "decimals are not allowed", "=": "put only the expression, no '='",
              "^": "exponents are not allowed", "%": "'%' is not allowed"}


class Verdict(NamedTuple):
    correct: bool
    failure: str | None  # None iff correct
    value: Fraction | None  # exact value of the answer when it evaluates
    expression: str | None = None  # text inside the last <answer>...</answer>
    detail: str = ""  # parser message, for localized (F3) feedback
    reused: tuple[int, ...] = ()
    omitted: tuple[int, ...] = ()
    unknown: tuple[int | str, ...] = ()
    reasoning: str = ""  # text before the final answer

    @property
    def arithmetic_errors(self) -> int:
        """Wrong "a op b = c" claims in the reasoning (computed on demand: most callers
        only need the verdict, and this scan costs more than the verdict itself)."""
        return count_arithmetic_errors(self.reasoning)


class ParseError(ValueError):
    pass


def extract_answer(completion: str) -> str | None:
    """Text inside the LAST complete <answer>...</answer> pair (may span lines).

    Two `rfind`s: linear however many tags the text repeats.
    """
    end = completion.rfind(CLOSE)
    if end < 0:
        return None
    start = completion.rfind(OPEN, 0, end)
    if start < 0:
        return None
    return completion[start + len(OPEN):end]


def _parse_shape(shape: tuple[str, ...]) -> list[int | str]:
    """Parse the text around the literals into RPN: ints are literal slots, strs are ops.

    Grammar: expr := term (('+'|'-') term)*, term := atom (('*'|'/') atom)*,
    atom := INT | '(' expr ')'. A two-state machine (expecting an operand or an
    operator) rejects unary minus, `**`, `//`, implicit multiplication and `()`.
    """
    out: list[int | str] = []
    stack: list[str] = []
    want_operand = True
    prev = ""
    last = len(shape) - 1
    for slot, text in enumerate(shape):
        for ch in text:
            if ch.isspace():
                prev = ""
                continue
            if ch == "(":
                if not want_operand:
                    raise ParseError("missing operator before '(' (no implicit multiplication)")
                stack.append(ch)
            elif ch == ")":
                if want_operand:
                    raise ParseError("unexpected ')'")
                while stack and stack[-1] != "(":
                    out.append(stack.pop())
                if not stack:
                    raise ParseError("unbalanced ')'")
                stack.pop()
            elif ch in PREC:
                if want_operand:
                    if ch == prev and ch in "*/":
                        raise ParseError(f"'{ch}{ch}' is not allowed (only + - * /)")
                    if ch == "-":
                        raise ParseError("unary minus is not allowed")
                    raise ParseError(f"operator {ch!r} is missing its left operand")
                while stack and stack[-1] != "(" and PREC[stack[-1]] >= PREC[ch]:
                    out.append(stack.pop())
                stack.append(ch)
                want_operand = True
            else:
                hint = _BAD_HINTS.get(ch)
                raise ParseError(f"unexpected character {ch!r}" + (f" ({hint})" if hint else ""))
            prev = ch
        if slot < last:  # a literal follows this piece of text
            if not want_operand:
                raise ParseError("missing operator between numbers")
            out.append(slot)
            want_operand = False
            prev = ""
    if want_operand:
        raise ParseError("empty expression" if not out else "expression ends with an operator")
    while stack:
        op = stack.pop()
        if op == "(":
            raise ParseError("unbalanced '('")
        out.append(op)
    return out


@lru_cache(maxsize=16384)
def parse_shape_cached(shape: tuple[str, ...]) -> list[int | str] | ParseError:
    """The RPN of a shape (an answer's text between its literals), or its ParseError,
    returned so that failures are cached too. The verifier's shape cache: `_split` skips it
    for shapes over MAX_CACHED_SHAPE characters or MAX_CACHED_BYTES."""
    try:
        return _parse_shape(shape)
    except ParseError as exc:
        # cached without its traceback: live frames in 16k cached errors make every full GC
        # pass walk them (measured: 15.3 s vs 3.3 s on 300k malformed answers)
        exc.__context__ = None
        return exc.with_traceback(None)


def _size(shape: tuple[str, ...], chars: int, ascii_only: bool) -> int:
    """Bytes a cached shape key holds, estimated from CPython's layout (~56 bytes a string
    plus 1-4 a character, 8 a tuple slot): non-Latin-1 text takes 4 bytes a character, so a
    bound on characters alone let 16k cached keys reach ~520 MB."""
    return 64 + 64 * len(shape) + chars * (1 if ascii_only else 4)


def _split(expression: str) -> tuple[tuple[str, ...], list[str], list[int | str] | ParseError]:
    """(shape, literal strings, RPN or the ParseError)."""
    parts = _SPLIT.split(expression)
    shape, literals = tuple(parts[0::2]), parts[1::2]
    chars = sum(map(len, shape))
    if chars <= MAX_CACHED_SHAPE and \
            _size(shape, chars, expression.isascii()) <= MAX_CACHED_BYTES:
        return shape, literals, parse_shape_cached(shape)
    try:
        return shape, literals, _parse_shape(shape)
    except ParseError as exc:
        return shape, literals, exc


def evaluate(rpn: list[int | str], values: list[int], steps: list | None = None) -> Fraction | int:
    """Exact value of an RPN over literal `values` (ZeroDivisionError on ÷0).

    Integers stay Python ints until a division is inexact (see `arith.apply_op`);
    `steps`, when given, receives every (a, op, b, result).
    """
    st: list = []
    for tok in rpn:
        if tok.__class__ is int:
            st.append(values[tok])
            continue
        b = st.pop()
        a = st.pop()
        c = apply_op(a, tok, b)
        if c is None:
            raise ZeroDivisionError("division by zero")
        if steps is not None:
            steps.append((a, tok, b, c))
        st.append(c)
    return st[0]


def parse(expression: str) -> tuple[list[int | str], list[int]]:
    """(RPN, literal values) of a trusted expression, e.g. a solver solution."""
    _, literals, rpn = _split(expression)
    if isinstance(rpn, ParseError):
        raise rpn
    return rpn, [int(x) for x in literals]


def _literal(tok: str) -> int | str:
    """Literal as int, or as a short string when too long to be any pool number."""
    digits = tok.lstrip("0") or "0"
    if len(digits) > MAX_LITERAL_DIGITS:
        return digits[:8] + "..."
    return int(digits)


def check_numbers(literals: list[str], numbers: list[int]) -> tuple[str | None, dict]:
    """Which pool rule the literals break, with the offending numbers (for F3)."""
    used = Counter(_literal(t) for t in literals)
    pool = Counter(numbers)
    unknown = tuple(sorted((x for x in used if x not in pool), key=str))
    reused = tuple(sorted(x for x in used if x in pool and used[x] > pool[x]))
    omitted = tuple(sorted(x for x in pool if used.get(x, 0) < pool[x]))
    info = {"unknown": unknown, "reused": reused, "omitted": omitted}
    if unknown:
        return "NUMBER_UNKNOWN", info
    if reused:
        return "NUMBER_REUSED", info
    if omitted:
        return "NUMBER_OMITTED", info
    return None, info


# "a op b = c" claims in the reasoning; operands and result may be fractions written
# without spaces ("15 / 1/9 = 135"). Bounded digit runs and a lookbehind that refuses to
# start inside a number keep this linear on hostile input (no quadratic backtracking).
_NUM = r"-?[0-9]{1,15}(?:/[0-9]{1,15})?"
ARITH_CLAIM = re.compile(rf"(?<![\w.)/])({_NUM})\s*([-+*/×x])\s*({_NUM})\s*=\s*({_NUM})(?![0-9./])")


def count_arithmetic_errors(text: str) -> int:
    errors = 0
    for a, op, b, c in ARITH_CLAIM.findall(text):
        try:
            x, y, claimed = Fraction(a), Fraction(b), Fraction(c)
        except ZeroDivisionError:  # "1/0" written as an operand or a result
            ok = False
        else:
            true = apply_op(x, "*" if op in "×x" else op, y)  # None: a division by zero
            ok = true is not None and true == claimed
        errors += not ok
    return errors


def verify(completion: str, numbers: list[int], target: int) -> Verdict:
    """Judge one completion. Never raises. Failure codes are checked in the order of
    FAILURES, so e.g. a wrong-pool answer is NUMBER_* whatever it evaluates to."""
    try:  # the caller's arguments: a bad one is the caller's bug, not the completion's failure
        numbers = list(map(operator.index, numbers))  # ints or numpy integers
        target = operator.index(target)
    except TypeError as exc:
        raise TypeError(f"verify(completion, numbers, target) needs a list of integer numbers "
                        f"and an integer target, got numbers={numbers!r}, target={target!r}") from exc
    try:
        return _verify(completion, numbers, target)
    except Exception as exc:  # noqa: BLE001 - defence in depth: the judge never crashes a stage
        return Verdict(False, "PARSE_FAIL", None, None, f"internal error: {type(exc).__name__}")


def _verify(completion: str, numbers: list[int], target: int) -> Verdict:
    if not isinstance(completion, str):
        return Verdict(False, "FORMAT_MISSING", None, None, "completion is not text")
    end = completion.rfind(CLOSE)  # extract_answer, inlined to keep `start` for reasoning
    start = completion.rfind(OPEN, 0, end) if end >= 0 else -1
    if start < 0:
        return Verdict(False, "FORMAT_MISSING", None, reasoning=completion)
    expr = completion[start + len(OPEN):end]
    reasoning = completion[:start]
    _, literals, rpn = _split(expr)
    if rpn.__class__ is ParseError:
        return Verdict(False, "PARSE_FAIL", None, expr, str(rpn), (), (), (), reasoning)
    values = None
    if len(literals) == len(numbers):  # fast path: exactly the pool, in some order
        try:
            values = [int(x) for x in literals]
        except ValueError:  # over Python's int-digits limit: 4,300+ digits, leading zeros too
            values = [_literal(x) for x in literals]  # zeros dropped, as int("024") does
            if any(v.__class__ is str for v in values):  # too long to be any pool number
                values = None
        if values is not None and sorted(values) != sorted(numbers):
            values = None
    if values is None:
        failure, info = check_numbers(literals, numbers)
        return Verdict(False, failure or "NUMBER_UNKNOWN", None, expr, reasoning=reasoning, **info)
    try:
        value = evaluate(rpn, values)
    except ZeroDivisionError:
        return Verdict(False, "DIV_BY_ZERO", None, expr, "division by zero", (), (), (), reasoning)
    if value != target:
        return Verdict(False, "WRONG_TARGET", Fraction(value), expr, "", (), (), (), reasoning)
    return Verdict(True, None, Fraction(value), expr, "", (), (), (), reasoning)
