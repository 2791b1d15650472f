"""report.md's prose is wrapped for a terminal (`report.wrap_prose`): only where a break is
safe, and a wrapped line joins back to the line it was."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from countdown_rlvr.analysis.report import _MARKER, wrap_prose

WORD = st.text(alphabet="ab-|#1.)", min_size=1, max_size=12)


def unwrap(lines: list[str]) -> list[str]:
    """The inverse for a list item or paragraph: continuation lines joined with one space."""
    out: list[str] = []
    for line in lines:
        if out and line.startswith("  ") and not line.startswith("    "):
            out[-1] += " " + line.lstrip(" ")
        else:
            out.append(line)
    return out


def test_a_long_list_item_wraps_under_its_text_and_joins_back():
    item = "- **Test**: " + " ".join(f"word{i}" for i in range(60))
    lines = wrap_prose([item], 40)
    assert len(lines) > 3 and all(len(x) <= 40 for x in lines)
    assert all(x.startswith("  ") for x in lines[1:])
    assert unwrap(lines) == [item]


def test_tables_headings_images_and_fences_stay_whole():
    long = "x " * 80
    keep = ["| " + long + " |", "### " + long, "![" + long + "](f.png)", "```", long, "```"]
    assert wrap_prose(keep, 20) == keep


def test_no_line_starts_a_markdown_block_it_did_not_start():
    # "- 3" and "1." inside a sentence: a break before them would make a list
    text = "the effect " + "a - 3 and 1. then | b # c " * 10
    lines = wrap_prose([text], 12)
    assert all(not _MARKER.match(x.lstrip() + " ") for x in lines[1:])
    assert " ".join(lines) == text


@given(st.lists(WORD, min_size=1, max_size=40), st.integers(10, 60))
def test_wrapping_loses_no_character(words, width):
    text = "- " + " ".join(words)
    lines = wrap_prose([text], width)
    assert unwrap(lines) == [text]
    for line, nxt in itertools.pairwise(lines):  # greedy: the next line's first word did not fit
        assert len(line) + 1 + len(nxt.lstrip().split(" ")[0]) > width
    for line in lines:  # over the width only where a break was refused or one word is long
        words = line.lstrip().split(" ")
        assert len(line) <= width or len(words) == 1 \
            or any(_MARKER.match(w + " ") for w in words[1:])
