"""One canonical text per solution, so that counting distinct solutions counts ideas, not spellings.

    canonical("(44 + 19) + 35") == canonical("35 + (19 + 44)") == "19 + 35 + 44"

The answer is parsed (the verifier's parser, `verify.parse`) into its tree; chains of `+` and
of `*` are flattened into one n-ary node and their operands sorted (commutativity and
associativity), and the tree is printed with parentheses exactly where precedence or the
operand order of `-` and `/` needs them. `-` and `/` keep their operands and their grouping:
`a - b` and `b - a` are different solutions, and so are `(a - b) + c` and `(a + c) - b` (two
different computations that happen to agree). Literals are printed as integers ("07" -> "7").
The solver (`solve.py`) only orders the operands of each binary `+` / `*`, so its
`(a + b) + c` and `a + (b + c)` are two solutions there and one here.

Its own module: the stages that count solutions (compare) depend on it; the ones that only
verify do not.
"""

from __future__ import annotations

from .verify import PREC, parse

COMMUTATIVE = ("+", "*")
Node = tuple  # (text, prec, op, operands): op None and operands () for a literal


def _leaf(value: int) -> Node:
    return (str(value), 3, None, ())


def _wrap(node: Node, prec: int, strict: bool) -> str:
    """node's text as an operand of an operator of precedence `prec`; `strict` (the right
    operand of `-` and `/`, and every operand of an n-ary `+` / `*`) parenthesises equal
    precedence too, so the text parses back to exactly this tree."""
    text, own = node[0], node[1]
    return text if own > prec or (own == prec and not strict) else f"({text})"


def _node(op: str, a: Node, b: Node) -> Node:
    """a op b, with a `+` / `*` chain flattened and its operands sorted by their text."""
    prec = PREC[op]
    if op in COMMUTATIVE:
        operands = tuple(sorted((*(a[3] if a[2] == op else (a,)), *(b[3] if b[2] == op else (b,))),
                                key=lambda n: n[0]))
        # every operand of an n-ary op is wrapped strictly: a child of the same op was
        # flattened, so an equal-precedence child is the other op (`-` in a sum), which
        # must keep its parentheses for the text to name one tree
        text = f" {op} ".join(_wrap(n, prec, strict=True) for n in operands)
        return (text, prec, op, operands)
    text = f"{_wrap(a, prec, strict=False)} {op} {_wrap(b, prec, strict=True)}"  # left-assoc
    return (text, prec, op, (a, b))


def canonical(expression: str) -> str:
    """The canonical text of an answer expression (the text inside <answer>...</answer> of a
    correct sample): equal for two expressions exactly when their trees are equal up to the
    order and grouping of `+` chains and `*` chains. Raises verify.ParseError when the text is
    not an expression (a correct sample's always is)."""
    rpn, values = parse(expression)
    stack: list[Node] = []
    for tok in rpn:
        if tok.__class__ is int:
            stack.append(_leaf(values[tok]))
        else:
            b = stack.pop()
            stack.append(_node(tok, stack.pop(), b))
    return stack[0][0]
