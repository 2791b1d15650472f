"""io.read_jsonl: a damaged line is reported with the file and its own line number."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.core.io import read_jsonl, write_jsonl


def test_a_bad_line_names_the_file_the_line_and_what_is_wrong(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3\n{"a": 4}\n')  # line 4 cut off, as by a kill
    with pytest.raises(ValueError) as err:
        read_jsonl(path)
    message = str(err.value)
    assert message.startswith(f"{path}, line 4, column ")  # 1-based, blank line 2 counted
    assert "not valid JSON" in message and "'{\"a\": 3'" in message
    assert "re-run the stage that writes it" in message
    assert isinstance(err.value.__cause__, json.JSONDecodeError)


def test_a_line_that_is_not_an_object_is_refused(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"rows.jsonl, line 2, a JSON object expected, got list"):
        read_jsonl(path)


ROWS = st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5),
                                max_size=3), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(rows=ROWS, data=st.data())
def test_round_trip_and_the_reported_line_is_the_damaged_one(tmp_path_factory, rows, data):
    path = tmp_path_factory.mktemp("j") / "rows.jsonl"
    write_jsonl(path, rows)
    assert read_jsonl(path) == rows
    bad = data.draw(st.integers(0, len(rows) - 1))
    lines = path.read_text().splitlines(keepends=True)
    lines[bad] = lines[bad].rstrip("\n")[:-1] + "\n"  # drop the closing brace
    path.write_text("".join(lines))
    with pytest.raises(ValueError, match=rf"rows.jsonl, line {bad + 1}, "):
        read_jsonl(path)
