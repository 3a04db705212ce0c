"""Recompiles and graph breaks around a graph break, as users read them (issue 20, items 4 and 5).

After a graph break dynamo runs the rest of the function as its own code
(``torch_dynamo_resume_in_train_step_at_N``): a recompile of it names the
user's function and the graph break, and the call that brought the new value
in. A strict-mode failure shows the user's frames only. A graph break traced
again by a recompile is counted once, and a recompile-limit failure shows
each cache entry's guard once.
"""

from __future__ import annotations

import json
import sys

import pytest

from nocompile_testing import (
    HAS_COMPILE_IDS,
    LIMIT_CONFIG,
    BudgetedRecord,
    RunPytest,
    expect_lines,
    recorded_messages,
)
from pytest_nocompile.judge.budget import RecompileBudget
from pytest_nocompile.vocabulary.display_paths import is_torch_file
from pytest_nocompile.vocabulary.graph_break_events import graph_break_event
from pytest_nocompile.vocabulary.kinds import GRAPH_BREAKS

TRAINLIB = '''
import torch

def train_step(x, scale):
    y = x + 1
    torch._dynamo.graph_break()
    z = y * 2
    return z * scale

def scaled_then_break(x, scale):
    y = x * scale
    torch._dynamo.graph_break()
    return y + 1

def two_breaks(x, scale):
    y = x + 1
    torch._dynamo.graph_break()
    y = y * 2
    torch._dynamo.graph_break()
    return y * scale
'''

TESTS = '''
import pytest, torch
from trainlib import train_step, scaled_then_break, two_breaks

def run_steps(step):
    x = torch.ones(3)
    step(x, 2)
    step(x, 3)  # the new value

@pytest.mark.max_recompiles(0)
def test_after_the_break():
    run_steps(torch.compile(train_step, backend="eager"))

@pytest.mark.max_recompiles(0, strict=True)
def test_strict():
    run_steps(torch.compile(train_step, backend="eager"))

@pytest.mark.max_recompiles(0)
def test_after_the_second_break():
    run_steps(torch.compile(two_breaks, backend="eager"))

@pytest.mark.max_graph_breaks(1)
def test_break_traced_twice():
    run_steps(torch.compile(scaled_then_break, backend="eager"))
'''


@pytest.fixture
def files(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(trainlib=TRAINLIB, test_steps=TESTS)


def test_a_recompile_after_a_graph_break_names_the_function_the_break_and_the_callers_line(
        files: None, run: RunPytest) -> None:
    result = run("-p", "no:logging", "-k", "after_the_break")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "1 recompile > max_recompiles(0) (marker on the test)",
        "[1/1] recompiled train_step (resumed after the graph break at trainlib.py:5)",
        "    guard failed: 1/0: scale == 2",
        "      guarded at: trainlib.py:7 in train_step: return z * scale",
        "      usual fix: scale is a Python int that changes*",
        "    triggered by: test_steps.py:7 in run_steps: step(x, 3)  # the new value",
    ])
    expect_lines(result,
                 ["test_steps.py::test_after_the_break: train_step (resumed after the graph break "
                  "at trainlib.py:5) recompiled: 1/0: scale == 2"])
    assert "torch_dynamo_resume_in" not in result.stdout.str()


def test_after_a_second_graph_break_the_caller_is_found_past_both_frames_of_the_function(
        files: None, run: RunPytest) -> None:
    # The code after the second break runs in a frame of the code after the first: both are
    # two_breaks's.
    result = run("-p", "no:logging", "-k", "second_break")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "[1/1] recompiled two_breaks (resumed after the graph break at trainlib.py:18)",
        "    guard failed: 2/0: scale == 2",
        "      guarded at: trainlib.py:19 in two_breaks: return y * scale",
        "      usual fix: scale is a Python int that changes*",
        "    triggered by: test_steps.py:7 in run_steps: step(x, 3)  # the new value",
    ])


def test_strict_mode_shows_the_users_frames_only(files: None, run: RunPytest) -> None:
    result = run("-p", "no:logging", "-k", "strict", "--tb=long")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "_dynamo/convert_frame.py" not in output and "_dynamo/eval_frame.py" not in output
    # the call, then train_step's frame (at its graph break; at its "def" on torch 2.6)
    result.stdout.fnmatch_lines([
        ">       step(x, 3)  # the new value",
        "test_steps.py:7: ",
        "*",
        "E   *RecompileError: Recompiling function *",
    ])
    if sys.version_info >= (3, 11):  # exception notes
        result.stdout.fnmatch_lines(["E *pytest-nocompile: * frames of torch and other libraries "
                                     "left out of this traceback; --fulltrace shows them"])
    result.stdout.fnmatch_lines(["trainlib.py:*: RecompileError"])
    failure = output[output.index("_ test_strict _"):output.index("- nocompile recompiles -")]
    assert len(failure.splitlines()) < 40  # 864 lines with torch's frames (torch 2.13)
    assert "_dynamo/convert_frame.py" in run("-p", "no:logging", "-k", "strict", "--tb=long",
                                             "--fulltrace").stdout.str()


def test_a_graph_break_traced_again_by_a_recompile_counts_once(pytester: pytest.Pytester,
                                                               files: None, run: RunPytest) -> None:
    result = run("-p", "no:logging", "-k", "traced_twice", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1)
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    # traced twice: at the first compile and the recompile
    assert (entry["recompiles"], entry["graph_breaks"]) == (1, 1)
    assert len(entry["graph_break_events"]) == 1


def test_a_graph_break_is_counted_once_per_place_and_reason_in_each_phase() -> None:
    message = recorded_messages("torch-2.13-graph_breaks.txt")[1]
    other_place = recorded_messages("torch-2.13-graph_breaks.txt")[0]
    record = BudgetedRecord(RecompileBudget.of({GRAPH_BREAKS.key: 1}))
    # setup's: not counted, and no reason to hide the call's
    record.add(graph_break_event(message, is_torch_file))
    record.end_setup()
    record.start_call()
    for _ in range(3):  # a first compile and two recompiles trace it
        record.add(graph_break_event(message, is_torch_file))
    assert record.count(GRAPH_BREAKS) == 1
    record.add(graph_break_event(other_place, is_torch_file))
    # no place to tell it by: each counts
    record.add(graph_break_event("a graph break message no torch writes", is_torch_file))
    record.add(graph_break_event("a graph break message no torch writes", is_torch_file))
    assert record.count(GRAPH_BREAKS) == 4
    assert [event.phase for event in record.graph_breaks] == ["setup", "call", "call",
                                                              "call", "call"]


LIMIT = '''
import pytest, torch

def double(x):
    return x * 2

@pytest.mark.max_recompiles(0)
def test_sizes():
    f = torch.compile(double, backend="eager", dynamic=False)
    with torch._dynamo.config.patch({LIMIT_CONFIG}=4):
        for size in range(1, 7):
            f(torch.ones(size))
'''


@pytest.mark.skipif(not HAS_COMPILE_IDS,
                    reason="torch < 2.5 gives no compile ids: a cache entry is known only by its "
                           "guard's text")
def test_a_recompile_limit_failure_shows_each_cache_entrys_guard_once(pytester: pytest.Pytester,
                                                                      run: RunPytest) -> None:
    pytester.makepyfile(test_limit=LIMIT.replace("{LIMIT_CONFIG}", LIMIT_CONFIG))
    result = run("-p", "no:logging")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "3 recompiles > max_recompiles(0) (marker on the test)",
        "[1/3] recompiled double (test_limit.py:3)",
        "    guard failed: 0/0: tensor 'x' size mismatch at index 0. expected 1, actual 2",
        "      usual fix: dynamo specialises sizes 0 and 1: keep x dim 0 at 2 or more, or call "
        "torch._dynamo.mark_unbacked(x, 0) before the first call",
        "    triggered by: test_limit.py:11 in test_sizes: f(torch.ones(size))",
        "[2/3] recompiled double (test_limit.py:3)",
        "    guard failed: 0/1: tensor 'x' size mismatch at index 0. expected 2, actual 3",
        "      usual fix: compile with dynamic=True, or call torch._dynamo.mark_dynamic(x, 0) "
        "before the first call",
        "    failed again: * (shown above)",
        "    triggered by: test_limit.py:11 in test_sizes: f(torch.ones(size))",
        "[3/3] recompiled double (test_limit.py:3)",
        "    guard failed: 0/2: tensor 'x' size mismatch at index 0. expected 3, actual 4",
        "    failed again: * (shown above)",
        "    triggered by: test_limit.py:11 in test_sizes: f(torch.ones(size))",
    ])
    # In the failure only: with CI set, pytest's short summary repeats the whole message.
    failure = result.stdout.str().partition("short test summary info")[0].splitlines()
    # 1 + 2 + 3 before
    assert len([line for line in failure if line.startswith("    guard failed")]) == 3
