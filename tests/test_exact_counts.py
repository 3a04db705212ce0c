"""Exact counts: what the plugin counts is what happened, whatever the test does to torch's
state."""

# torch's own TestCase and logging helpers (torch.testing._internal) import expecttest: the test
# extra installs it.
#
# Against the baseline commit 9c439f4 (torch 2.13 CPU):
#   test_a_dynamo_testcase_that_clears_counters_still_fails_its_compile_budget[marker]
#       FAILS on 9c439f4 (passes, "no test compiled": compiles 0)
#   test_a_dynamo_testcase_that_clears_counters_still_fails_its_compile_budget[option]
#       FAILS on 9c439f4 (passes, "no test compiled": compiles 0)
#   test_a_test_that_clears_counters_or_resets_dynamo_is_counted_exactly[clears dynamo's counters]
#       FAILS on 9c439f4 (compiles 0, not 2)
#   test_a_test_that_clears_counters_or_resets_dynamo_is_counted_exactly[resets dynamo]
#       passes on 9c439f4 (regression check)
#   test_a_test_after_one_that_clears_counters_starts_from_a_clean_cache
#       FAILS on 9c439f4 (isolating reset skipped: compiles 0, a cache hit on the earlier test's
#         graph)
#   test_a_recompile_limit_hit_is_not_counted_as_a_recompile
#       FAILS on 9c439f4 (recompiles 4, not 3)
#   test_a_recompile_limit_hit_fails_a_recompile_budget[count within budget]
#       FAILS on 9c439f4 ("4 recompiles > max_recompiles(3)")
#   test_a_recompile_limit_hit_fails_a_recompile_budget[count over budget]
#       FAILS on 9c439f4 ("4 recompiles > max_recompiles(2)")
#   test_a_test_that_reinitialises_torch_logging_leaves_dynamo_records_unprinted:
#     [log_settings(recompiles)-in an earlier test]
#         FAILS on 9c439f4 (125 lines of dynamo's records in test_2's Captured stderr)
#     [log_settings(recompiles)-inside the budgeted test]
#         FAILS on 9c439f4 (128 lines printed)
#     [log_settings(graph_breaks)-in an earlier test]
#         FAILS on 9c439f4 (125 lines printed)
#     [log_settings(graph_breaks)-inside the budgeted test]
#         FAILS on 9c439f4 (128 lines printed)
#     [log_settings(+dynamo)-in an earlier test]
#         FAILS on 9c439f4 (125 lines printed)
#     [log_settings(+dynamo)-inside the budgeted test]
#         FAILS on 9c439f4 (128 lines printed)
#     [set_logs-in an earlier test]
#         passes on 9c439f4 (regression check)
#     [set_logs-inside the budgeted test]
#         FAILS on 9c439f4 (recompiles 1, not 2: the second is lost)
#     [TORCH_LOGS and _init_logs-in an earlier test]
#         passes on 9c439f4 (regression check)
#     [TORCH_LOGS and _init_logs-inside the budgeted test]
#         FAILS on 9c439f4 (recompiles 1, not 2: the second is lost)
#   test_a_variable_leaked_into_pytests_environment_does_not_blind_the_run[nonexistent directory]
#       FAILS on 9c439f4 (the test passes)
#   test_a_variable_leaked_into_pytests_environment_does_not_blind_the_run[existing empty directory]
#       FAILS on 9c439f4 (the test passes)
#   test_a_block_assertion_in_a_script_started_with_the_variable_set_still_raises
#       FAILS on 9c439f4 (exit code 0, no exception)
#   test_a_nested_pytest_run_started_by_a_watched_test_watches_its_own_tests
#       FAILS on 9c439f4 (the inner run passes: returncode 0)
#   test_a_suite_without_budgets_has_the_same_outcomes_with_and_without_the_plugin
#       passes on 9c439f4 (regression check)

from __future__ import annotations

import json
from typing import Any

import pytest

from nocompile_testing import RECOMPILE_ONCE, RunPytest, expect_lines


def _tests(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    """The entries of the JSON report (--nocompile-json=report.json), by test name (the node id
    after the file)."""
    entries = json.loads((pytester.path / "report.json").read_text())["tests"]
    return {entry["nodeid"].split("::", 1)[1]: entry for entry in entries}


# -- 1. compiles are the plugin's own count, not dynamo's counters --------------------------------

# torch's own TestCase clears torch._dynamo.utils.counters in setUp and tearDown, which pytest
# runs inside the call phase: a count read from those counters would be 0 - (graphs before).
DYNAMO_TESTCASE = '''
import pytest, torch
from torch._dynamo.test_case import TestCase

def scale(x, n):
    return x * n

def shift(x):
    return x - 1

class TestTwoGraphs(TestCase):
    {marker}
    def test_two_graphs(self):
        torch.compile(scale, backend="eager")(torch.ones(2), 2)
        torch.compile(shift, backend="eager")(torch.ones(2))
'''


@pytest.mark.parametrize("marker, option", [("@pytest.mark.max_compiles(0)", None),
                                            ("", "--max-compiles=0")],
                         ids=["marker", "option"])
def test_a_dynamo_testcase_that_clears_counters_still_fails_its_compile_budget(
        pytester: pytest.Pytester, run: RunPytest, marker: str, option: str | None) -> None:
    pytester.makepyfile(test_dynamo_case=DYNAMO_TESTCASE.format(marker=marker))
    result = run("-p", "no:randomly", "--nocompile-json=report.json", *([option] if option else []))
    result.assert_outcomes(failed=1)
    source = "marker on the test" if marker else "from --max-compiles"
    expect_lines(result, ["*_ TestTwoGraphs.test_two_graphs _*",
                          f"2 compiles > max_compiles(0) ({source})"])
    assert _tests(pytester)["TestTwoGraphs::test_two_graphs"]["compiles"] == 2


# The inner test also counts with a CompileCounter backend (frame_count: the graphs it was given)
# and writes that count for the outer test to compare with the plugin's. A warm-up test compiles
# first, so dynamo's counters are not at zero when it starts.
COUNTED_BODY = '''
import pytest, torch, torch._dynamo
from torch._dynamo.testing import CompileCounter

def scale(x, n):
    return x * n

@pytest.fixture
def counter():
    counter = CompileCounter()
    yield counter
    with open("frame_count.txt", "w") as out:
        out.write(str(counter.frame_count))

def test_warm_up():
    torch.compile(lambda x: x * 3, backend="eager")(torch.ones(2))

def test_counted(counter):
{body}
'''

CLEARS_COUNTERS = """
    torch.compile(scale, backend=counter)(torch.ones(2), 2)
    torch._dynamo.utils.counters.clear()
    torch.compile(lambda x: x - 1, backend=counter)(torch.ones(2))
"""
RESETS_DYNAMO = """
    f = torch.compile(scale, backend=counter)
    f(torch.ones(2), 2)
    torch._dynamo.reset()
    f(torch.ones(2), 2)  # the same call: after the reset a first compile again, not a recompile
"""


@pytest.mark.parametrize("body, counts", [(CLEARS_COUNTERS, (2, 0)), (RESETS_DYNAMO, (2, 0))],
                         ids=["clears dynamo's counters", "resets dynamo"])
def test_a_test_that_clears_counters_or_resets_dynamo_is_counted_exactly(
        pytester: pytest.Pytester, run: RunPytest, body: str, counts: tuple[int, int]) -> None:
    pytester.makepyfile(test_counted=COUNTED_BODY.format(body=body.strip("\n")))
    run("-p", "no:randomly", "--nocompile-json=report.json").assert_outcomes(passed=2)
    entry = _tests(pytester)["test_counted"]
    assert int((pytester.path / "frame_count.txt").read_text()) == counts[0]
    assert (entry["compiles"], entry["recompiles"]) == counts


# The plugin resets dynamo before each test, so a test never recompiles against an earlier test's
# cache: that reset must not be skipped because a test cleared dynamo's counters (after the clear
# they read what they read after the plugin's last reset).
AFTER_A_CLEAR = RECOMPILE_ONCE + '''
import torch._dynamo

def test_warm_up():
    torch.compile(lambda x: x * 3, backend="eager")(torch.ones(2))

def test_clears_counters():
    torch.compile(scale, backend="eager")(torch.ones(2), 2)
    torch._dynamo.utils.counters.clear()
    torch.compile(lambda x: x - 1, backend="eager")(torch.ones(2))

@pytest.mark.max_recompiles(0)
def test_compiles_the_same_function_afresh():
    torch.compile(scale, backend="eager")(torch.ones(2), 2)
'''


def test_a_test_after_one_that_clears_counters_starts_from_a_clean_cache(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_after_clear=AFTER_A_CLEAR)
    run("-p", "no:randomly", "--nocompile-json=report.json").assert_outcomes(passed=3)
    entry = _tests(pytester)["test_compiles_the_same_function_afresh"]
    assert (entry["compiles"], entry["recompiles"]) == (1, 0)


# -- 2. a compile dynamo refuses at its recompile limit is a limit hit, not a recompile ------------

AT_THE_LIMIT = '''
import pytest, torch, torch._dynamo

LIMIT = ("recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit")
         else "cache_size_limit")
DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.int16, torch.float16]

{marker}
def test_six_dtypes():
    f = torch.compile(lambda x: x + 1, backend="eager")
    with torch._dynamo.config.patch(**{{LIMIT: 4}}):
        for dtype in DTYPES:
            f(torch.ones(2, dtype=dtype))  # the 5th and 6th run eagerly: dynamo compiles 4 graphs
'''


def test_a_recompile_limit_hit_is_not_counted_as_a_recompile(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_limit=AT_THE_LIMIT.format(marker=""))
    run("-p", "no:randomly", "--nocompile-json=report.json").assert_outcomes(passed=1)
    entry = _tests(pytester)["test_six_dtypes"]
    assert (entry["compiles"], entry["recompiles"]) == (4, 3)
    assert len(entry["recompile_events"]) == 3
    (hit,) = entry["recompile_limit_hits"]
    # The attempt dynamo logged and then refused is kept with the hit: its compile id, its failed
    # guards.
    # dynamo's own id of the attempt, in every torch from 2.4
    assert hit["refused_attempt"]["compile_id"] == "0/4"
    assert hit["refused_attempt"]["guards"]


@pytest.mark.parametrize("budget, headline", [
    (3, "3 recompiles within max_recompiles(3) (marker on the test), "
        "but dynamo hit its recompile limit"),
    (2, "3 recompiles > max_recompiles(2) (marker on the test)"),
], ids=["count within budget", "count over budget"])
def test_a_recompile_limit_hit_fails_a_recompile_budget(
        pytester: pytest.Pytester, run: RunPytest, budget: int, headline: str) -> None:
    pytester.makepyfile(
        test_limit=AT_THE_LIMIT.format(marker=f"@pytest.mark.max_recompiles({budget})"))
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    expect_lines(result, ["*_ test_six_dtypes _*", headline])
    result.stdout.fnmatch_lines([
        "dynamo hit config.*_limit (4) for *: later calls run uncompiled and log no recompiles, *",
        "    refused attempt, not counted as a recompile: guard failed: *"])
    entry = _tests(pytester)["test_six_dtypes"]
    assert (entry["compiles"], entry["recompiles"], entry["over_budget"]) == (4, 3, ["recompiles"])


# -- 3. a test that re-initialises torch's logging does not make dynamo's records print ------------

# Each variant defines relogged(action, monkeypatch): action() run while torch's logging is
# re-initialised the way a test of torch's own would, and torch's logging restored after it.
RELOGGING = {
    "log_settings(recompiles)": '''
from torch.testing._internal.logging_utils import log_settings

def relogged(action, monkeypatch):
    with log_settings("recompiles"):
        action()
''',
    "log_settings(graph_breaks)": '''
from torch.testing._internal.logging_utils import log_settings

def relogged(action, monkeypatch):
    with log_settings("graph_breaks"):
        action()
''',
    "log_settings(+dynamo)": '''
from torch.testing._internal.logging_utils import log_settings

def relogged(action, monkeypatch):
    with log_settings("+dynamo"):
        action()
''',
    "set_logs": '''
def relogged(action, monkeypatch):
    torch._logging.set_logs(graph_breaks=True)
    action()
    torch._logging.set_logs()
''',
    # Restored by clearing the log state before _init_logs(): with TORCH_LOGS unset again
    # _init_logs() keeps the state it last read from it (dynamo's records would print on, with or
    # without the plugin), and TORCH_LOGS="" makes torch's log state a dict, which breaks torch's
    # logging.
    "TORCH_LOGS and _init_logs": '''
def relogged(action, monkeypatch):
    monkeypatch.setenv("TORCH_LOGS", "recompiles,graph_breaks")
    torch._logging._internal._init_logs()
    action()
    monkeypatch.undo()
    torch._logging._internal.log_state.clear()
    torch._logging._internal._init_logs()
''',
}

RELOGGING_TESTS = RECOMPILE_ONCE + '''
import sys
import torch._dynamo, torch._logging, torch._logging._internal
{relogged}

def broken(x, n):
    x = x * n
    torch._dynamo.graph_break()
    return x + 1

def recompile_with_a_graph_break():
    f = torch.compile(broken, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)

def fail_to_show_what_was_captured():
    print("test_2 ran", file=sys.stderr)  # a Captured stderr section, whatever else is printed
    assert False
{tests}'''

# Where the re-initialisation happens: in a test before the budgeted one, or inside it between two
# recompiles.
IN_AN_EARLIER_TEST = '''
def test_1(monkeypatch):
    relogged(recompile_once, monkeypatch)

@pytest.mark.max_recompiles(5)
def test_2():
    recompile_with_a_graph_break()
    fail_to_show_what_was_captured()
'''
INSIDE_THE_BUDGETED_TEST = '''
@pytest.mark.max_recompiles(5)
def test_2(monkeypatch):
    recompile_once()
    relogged(lambda: None, monkeypatch)
    recompile_with_a_graph_break()
    fail_to_show_what_was_captured()
'''

DYNAMO_RECORDS = ("__recompiles", "__graph_breaks", "Recompiling function")


def _failure_section(result: pytest.RunResult, test: str) -> list[str]:
    """The lines of one test's failure report: its traceback and its Captured sections."""
    lines = result.stdout.lines
    start = next(index for index, line in enumerate(lines) if line.startswith("_")
                 and f" {test} " in line)
    end = next((index for index in range(start + 1, len(lines))
                if lines[index].startswith(("___", "==="))), len(lines))
    return lines[start:end]


@pytest.mark.parametrize("tests, passed, recompiles", [(IN_AN_EARLIER_TEST, 1, 1),
                                                       (INSIDE_THE_BUDGETED_TEST, 0, 2)],
                         ids=["in an earlier test", "inside the budgeted test"])
@pytest.mark.parametrize("relogged", list(RELOGGING.values()), ids=list(RELOGGING))
def test_a_test_that_reinitialises_torch_logging_leaves_dynamo_records_unprinted(
        pytester: pytest.Pytester, run: RunPytest, relogged: str, tests: str, passed: int,
        recompiles: int) -> None:
    pytester.makepyfile(test_relogging=RELOGGING_TESTS.format(relogged=relogged, tests=tests))
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(passed=passed, failed=1)
    section = _failure_section(result, "test_2")
    assert "test_2 ran" in section
    printed = [line for line in section if any(record in line for record in DYNAMO_RECORDS)]
    assert (_tests(pytester)["test_2"]["recompiles"], len(printed),
            printed[:1]) == (recompiles, 0, [])


# -- 4. a PYTEST_NOCOMPILE_EVENTS already set does not blind the run -------------------------------

# The variable names the directory a watched test's child processes report to; the start-up hook
# makes every Python process that starts with it set report there, instead of watching itself.

OVER_BUDGET = RECOMPILE_ONCE + '''
@pytest.mark.max_recompiles(0)
def test_recompiles():
    recompile_once()
'''


@pytest.mark.parametrize("existing", [False, True],
                         ids=["nonexistent directory", "existing empty directory"])
def test_a_variable_leaked_into_pytests_environment_does_not_blind_the_run(
        run: RunPytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        existing: bool) -> None:
    # `run` deletes the variable: set it after requesting `run`, as a CI step that exported it
    # would.
    directory = pytester.path / "leaked-events"
    if existing:
        directory.mkdir()
    monkeypatch.setenv("PYTEST_NOCOMPILE_EVENTS", str(directory))
    pytester.makepyfile(test_leaked=OVER_BUDGET)
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    expect_lines(result, ["*_ test_recompiles _*",
                          "1 recompile > max_recompiles(0) (marker on the test)"])
    assert _tests(pytester)["test_recompiles"]["recompiles"] == 1


BLOCK_SCRIPT = '''
import torch
import pytest_nocompile

def scale(x, n):
    return x * n

f = torch.compile(scale, backend="eager")
f(torch.ones(2), 2)
with pytest_nocompile.assert_max_recompiles(0):
    f(torch.ones(2), 3)
print("no exception")
'''


def test_a_block_assertion_in_a_script_started_with_the_variable_set_still_raises(
        run: RunPytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # `run` is requested for its clean-up of the outer run's variables; this sets the variable after
    # it.
    directory = pytester.mkdir("events")
    monkeypatch.setenv("PYTEST_NOCOMPILE_EVENTS", str(directory))
    script = pytester.makepyfile(block_script=BLOCK_SCRIPT)
    result = pytester.runpython(script)
    assert result.ret != 0, result.stdout.str()
    result.stderr.fnmatch_lines(["pytest_nocompile.exceptions.RecompileBudgetExceeded: "
                                 "1 recompile > assert_max_recompiles(0)"])
    assert "no exception" not in result.stdout.str()


# A watched test of the outer run starts a nested pytest run: the inner pytest process starts with
# the variable set (the outer test's children report through it) and must still watch its own tests.
NESTED_RUN = '''
import os, subprocess, sys

INNER = """
import pytest, torch

def scale(x, n):
    return x * n

@pytest.mark.max_recompiles(0)
def test_inner():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)
"""

def test_runs_pytest_in_a_subprocess(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    # set by the outer run for this test's children
    assert os.environ.get("PYTEST_NOCOMPILE_EVENTS")
    inner = subprocess.run([sys.executable, "-m", "pytest", "-p", "nocompile",
                            "-p", "no:cacheprovider", "-p", "no:randomly",
                            str(tmp_path / "test_inner.py")],
                           capture_output=True, text=True, cwd=tmp_path)
    print(inner.stdout)
    assert inner.returncode == 1
    assert "1 recompile > max_recompiles(0) (marker on the test)" in inner.stdout.splitlines()
'''


def test_a_nested_pytest_run_started_by_a_watched_test_watches_its_own_tests(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    # Both runs see the inner recompile: the inner run fails its own test, and the outer (watched,
    # unbudgeted) test counts it against the inner pytest process, one of its children.
    pytester.makepyfile(test_nested=NESTED_RUN)
    result = run("-p", "no:randomly", "--nocompile-report", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1)
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    children = [process for process in entry["processes"] if not process["test_process"]]
    assert [(process["compiles"], process["recompiles"]) for process in children] == [(2, 1)]


# -- 5. a suite that uses no budget has the same outcomes with and without the plugin --------------

UNBUDGETED = '''
import pytest, torch
from torch._dynamo.test_case import TestCase

def scale(x, n):
    return x * n

class TestDynamo(TestCase):
    def test_recompiles(self):
        f = torch.compile(scale, backend="eager")
        f(torch.ones(2), 2)
        f(torch.ones(2), 3)

    def test_counters(self):
        torch.compile(scale, backend="eager")(torch.ones(2), 2)
        self.assertEqual(torch._dynamo.utils.counters["stats"]["unique_graphs"], 1)

    def test_fails(self):
        self.assertEqual(1, 2)

def test_plain_recompiles():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)

def test_graph_break():
    def broken(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2
    assert torch.compile(broken, backend="eager")(torch.ones(2)).tolist() == [4.0, 4.0]

def test_plain_fails():
    torch.compile(scale, backend="eager")(torch.ones(2), 2)
    assert False
'''


def test_a_suite_without_budgets_has_the_same_outcomes_with_and_without_the_plugin(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_unbudgeted=UNBUDGETED)
    with_plugin = run("-p", "no:randomly", "-rA")
    without = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-rA")
    assert with_plugin.parseoutcomes() == without.parseoutcomes() == {"passed": 4, "failed": 2}

    def outcomes(result: pytest.RunResult) -> list[str]:
        return sorted(line for line in result.stdout.lines
                      if line.startswith(("PASSED ", "FAILED ")))

    assert outcomes(with_plugin) == outcomes(without)
