"""The task core's limits and its callers' mistakes: solve refuses what it cannot do, and
verify blames the caller (TypeError) for bad arguments, never the completion."""

import importlib
import math
import re
import sys
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countdown_rlvr.core import data_config
from countdown_rlvr.task.solve import MAX_NUMBERS, solve
from countdown_rlvr.task.verify import verify

verify_module = importlib.import_module("countdown_rlvr.task.verify")  # the module, not verify()


def test_solve_refuses_more_than_the_limit_at_once():
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"at most 6 numbers .* got 7"):
        solve([1, 2, 3, 4, 5, 6, 7], 0)
    assert time.perf_counter() - t0 < 1.0  # a refusal, not minutes of search
    assert MAX_NUMBERS == data_config.MAX_NUMBERS == 6  # params validation uses the same limit


@pytest.mark.parametrize("bad", [1.5, 2.0, True, "3", math.nan, None])
def test_solve_refuses_a_non_integer_operand_or_target(bad):
    with pytest.raises(ValueError, match="integer operands"):
        solve([3, bad, 4], 24)
    with pytest.raises(ValueError, match="integer operands"):
        solve([3, 4, 2], bad)


def test_solve_takes_numpy_integers_and_exact_fractions():
    assert solve(list(np.array([3, 4, 2])), np.int64(24)) == solve([3, 4, 2], 24)
    assert solve([Fraction(3, 2), 4], 6) == ["3/2 * 4"]  # an intervention's intermediate


@settings(deadline=None, max_examples=50)
@given(st.lists(st.integers(1, 30), min_size=2, max_size=4), st.integers(0, 60),
       st.integers(0, 6000))
def test_leading_zeros_never_change_a_verdict(numbers, target, zeros):
    """Zero-padding every literal of an answer (even past Python's 4,300-digit int limit)
    grades like the plain answer, and a failure always names its reason."""
    for expr in solve(numbers, target)[:1] or [" + ".join(map(str, numbers))]:
        padded = "".join("0" * zeros + tok if tok.isdigit() else tok
                         for tok in re.split(r"(\d+)", expr))
        plain, zeroed = (verify(f"<answer>{e}</answer>", numbers, target) for e in (expr, padded))
        assert (zeroed.correct, zeroed.failure) == (plain.correct, plain.failure)
        if zeroed.failure == "NUMBER_UNKNOWN":
            assert zeroed.unknown


def test_an_answer_with_5000_leading_zeros():
    v = verify("<answer>" + "0" * 5000 + "24 * 1</answer>", [24, 1], 24)
    assert v.correct and v.failure is None


@pytest.mark.parametrize("numbers,target", [(None, 24), ([1, None], 24), ([1.5, 2], 3),
                                            (["1", "2"], 3), ([1, 2], None),
                                            (5, 24)])
def test_bad_arguments_are_the_callers_error(numbers, target):
    with pytest.raises(TypeError, match="verify"):
        verify("<answer>1 + 2</answer>", numbers, target)


def test_numpy_arguments_grade_like_ints():
    ints = verify("<answer>3 * 8</answer>", [3, 8], 24)
    arr = verify("<answer>3 * 8</answer>", np.array([3, 8]), np.int64(24))
    assert ints == arr and arr.correct


def test_cached_parse_errors_hold_no_traceback_and_the_cache_is_bounded_by_bytes():
    cache = verify_module.parse_shape_cached
    cache.cache_clear()
    assert verify("<answer>3 ** 8</answer>", [3, 8], 24).failure == "PARSE_FAIL"
    cached = cache(("", " ** ", ""))  # the same shape: a cache hit
    assert cache.cache_info().hits == 1
    assert isinstance(cached, verify_module.ParseError)
    assert cached.__traceback__ is None and cached.__context__ is None
    # 200 non-Latin-1 characters: short enough for the character bound, too big in bytes
    wide = "".join(chr(0x4E00 + i) + str(i % 10) for i in range(100))
    shape = tuple(re.split(r"[0-9]+", wide))  # the text between the literals
    assert sum(map(len, shape)) <= verify_module.MAX_CACHED_SHAPE
    assert sys.getsizeof(shape) + sum(map(sys.getsizeof, shape)) > verify_module.MAX_CACHED_BYTES
    before = cache.cache_info().currsize
    assert verify(f"<answer>{wide}</answer>", [1, 2], 3).failure == "PARSE_FAIL"
    assert cache.cache_info().currsize == before  # the byte estimate kept it out of the cache

