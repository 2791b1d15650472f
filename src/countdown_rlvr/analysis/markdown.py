"""Markdown tables that render: the one writer of every table the project writes (compare.md,
report.md, the claims, `countdown-rlvr diff --format md`).

A GitHub-flavoured markdown table splits a row at every `|` that is not escaped as `\\|`, inside
code spans too. A cell that holds a pipe ("|effect| < 0.1") would otherwise split into more
cells than the header has, and the renderer drops the row's last cells. A newline would end
the row. So every cell is escaped here, and a row of the wrong width is an error, not a
table that renders short.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_PIPE = re.compile(r"(?<!\\)\|")  # a pipe not already escaped


def escape_cell(text: object) -> str:
    """A cell's text as a table keeps it: `|` escaped (`\\|`; an escaped one is left alone),
    line breaks as spaces."""
    return _PIPE.sub(r"\\|", " ".join(str(text).splitlines()))


def md_table(header: Sequence[str], rows: Iterable[Sequence[str]],
             tight_rule: bool = False) -> list[str]:
    """A markdown table's lines: `| a | b |`, the rule under it (`| --- | --- |`; tight_rule:
    `|---|---|`), one line per row, every cell escaped (escape_cell). Raises ValueError on a
    row whose cell count is not the header's."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(map(escape_cell, cells)) + " |"

    rows = list(rows)
    if bad := [i for i, r in enumerate(rows) if len(r) != len(header)]:
        raise ValueError(f"table row {bad[0]} has {len(rows[bad[0]])} cells, the header "
                         f"{len(header)} ({list(header)}): give every row one cell per column")
    rule = "|" + "---|" * len(header) if tight_rule else line(["---"] * len(header))
    return [line(header), rule, *map(line, rows)]
