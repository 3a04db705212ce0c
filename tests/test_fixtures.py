"""The nocompile_recompiles and nocompile_assert_max_recompiles fixtures."""

from __future__ import annotations

import pytest

from nocompile_testing import HAS_COMPILE_IDS, RunPytest, expect_lines, guard_regex

FIXTURES = '''
import re, pytest, torch
from pytest_nocompile import (AssertMaxRecompiles, RecompileBudgetExceeded, RecompileEvent,
                              RecompileLog)

def scale(x, n):
    return x * n

def test_events_are_structured(nocompile_recompiles: RecompileLog):
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    assert len(nocompile_recompiles) == 0
    f(torch.ones(2), 3)
    (event,) = nocompile_recompiles
    assert isinstance(event, RecompileEvent)
    assert (event.function, event.line, event.phase) == ("scale", 5, "call")
    assert event.filename.endswith("test_fixtures_user.py")
    (guard,) = event.guards
    assert re.fullmatch(N_EQ_2, guard)  # n == 2, or L['n'] == 2 up to torch 2.6
    assert event.reasons[0].compile_id == FIRST_COMPILE_ID
    assert event.user_code.function == "test_events_are_structured"
    assert nocompile_recompiles.in_phase("setup") == []

def test_block_within_budget(nocompile_assert_max_recompiles: AssertMaxRecompiles):
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    with nocompile_assert_max_recompiles(1) as block:
        f(torch.ones(2), 3)
    ((guard,),) = [e.guards for e in block]
    assert re.fullmatch(N_EQ_2, guard)
    with nocompile_assert_max_recompiles(0):
        f(torch.ones(2), 3)

def test_block_over_budget(nocompile_assert_max_recompiles):
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    with nocompile_assert_max_recompiles(0):
        f(torch.ones(2), 3)

def test_block_exact(nocompile_assert_max_recompiles):
    f = torch.compile(scale, backend="eager")
    with nocompile_assert_max_recompiles(1, exact=True):
        f(torch.ones(2), 2)

def test_block_exception_wins(nocompile_assert_max_recompiles):
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    with nocompile_assert_max_recompiles(0):
        f(torch.ones(2), 3)
        raise KeyError("the block's own error")

def test_block_bad_argument(nocompile_assert_max_recompiles):
    with pytest.raises(ValueError, match=r"nocompile_assert_max_recompiles\\(-2\\): "
                                         r"expected an int >= 0, got -2"):
        with nocompile_assert_max_recompiles(-2):
            pass

def test_block_failure_is_an_assertion_error(nocompile_assert_max_recompiles):
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    with pytest.raises(AssertionError):
        with nocompile_assert_max_recompiles(0):
            f(torch.ones(2), 3)
    assert issubclass(RecompileBudgetExceeded, AssertionError)
'''
# At the end, so that the line numbers above stay; torch < 2.5 gives no compile ids.
FIXTURES += (f"\nN_EQ_2 = {guard_regex('n == 2')!r}\n"
             f"FIRST_COMPILE_ID = {'0/0' if HAS_COMPILE_IDS else None!r}\n")


def test_fixtures(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_fixtures_user=FIXTURES)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=4, failed=3)
    expect_lines(result, [
        "E       pytest_nocompile.exceptions.RecompileBudgetExceeded: 1 recompile > "
        "nocompile_assert_max_recompiles(0)",
        "E       [1/1] recompiled scale (test_fixtures_user.py:5)",
        "E           guard failed: 0/0: n == 2",
        "E             guarded at: test_fixtures_user.py:6 in scale: return x * n",
        "E             usual fix: n is a Python int that changes*",
        "E           triggered by: test_fixtures_user.py:* in test_block_over_budget: "
        "f(torch.ones(2), 3)",
    ])
    expect_lines(result,
                 ["E       pytest_nocompile.exceptions.RecompileBudgetExceeded: 0 recompiles != "
                  "nocompile_assert_max_recompiles(1, exact=True)"])
    result.stdout.fnmatch_lines(["E *KeyError: \"the block's own error\""])
    # The traceback points at the user's with-block, not into the plugin.
    result.stdout.fnmatch_lines(["test_fixtures_user.py:*: RecompileBudgetExceeded"])
