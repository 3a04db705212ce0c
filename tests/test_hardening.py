"""Hardening: interrupted runs, tests that reconfigure torch logging, other plugins, any marker
input."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ElementTree

import pytest
from test_capture import STATE_CHECK_CONFTEST

from nocompile_testing import (
    RECOMPILE_ONCE,
    RunPytest,
    expect_lines,
    with_health_counts,
)


def test_state_is_restored_when_a_test_is_interrupted(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(STATE_CHECK_CONFTEST)
    pytester.makepyfile(test_interrupted=RECOMPILE_ONCE + '''
@pytest.mark.max_recompiles(0)
def test_interrupted():
    recompile_once()
    raise KeyboardInterrupt

def test_never_runs():
    pass
''')
    result = run("-p", "no:logging")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (pytester.path / "state-differences.txt").read_text() == "test_interrupted: []\n"


RECONFIGURING = RECOMPILE_ONCE + '''
import logging
import torch._dynamo  # capture starts at setup, before the test reconfigures logging
import torch._logging._internal as torch_logging

@pytest.mark.max_recompiles(0)
def test_set_logs_mid_test_is_still_counted():
    torch._logging.set_logs(dynamo=logging.INFO)  # re-initialises torch's logging: capture re-arms
    recompile_once()

@pytest.mark.max_recompiles(0)
def test_own_reset_keeps_counting():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    torch._dynamo.reset()
    f(torch.ones(2), 7)  # after a reset: a first compile again, not a recompile
    f(torch.ones(2), 8)  # and this one recompiles

@pytest.mark.max_recompiles(0)
def test_swaps_the_log_state_behind_torchs_back():
    torch._logging.set_logs()
    # no re-initialisation follows: nothing can re-arm
    torch_logging._set_log_state(torch_logging.LogState())
    recompile_once()

def test_later_test_is_captured_again(nocompile_recompiles):
    recompile_once()
    assert len(nocompile_recompiles) == 1
'''


def test_tests_that_reset_or_reconfigure_torch_logging(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_reconfiguring=RECONFIGURING)
    result = run("-p", "no:logging", "-p", "no:randomly")
    # the log state swapped: its recompile record is lost, but not its graph's compile id
    result.assert_outcomes(passed=1, failed=3, warnings=1)
    expect_lines(result, [
        "*_ test_swaps_the_log_state_behind_torchs_back _*",
        "1 recompile > max_recompiles(0) (marker on the test)",
        "    a lower bound: 1 recompile with no record in torch's recompiles log, counted "
        "from compile ids",
        "[1/1] recompiled scale (*)",
        "    no recompile record: counted from its compile id 0/1 *"])
    expect_lines(result, ["*_ test_set_logs_mid_test_is_still_counted _*",
                          "1 recompile > max_recompiles(0) (marker on the test)",
                          "[1/1] recompiled scale (*)",
                          "    guard failed: 0/0: n == 2"])
    expect_lines(result, ["*_ test_own_reset_keeps_counting _*",
                          "1 recompile > max_recompiles(0) (marker on the test)",
                          "[1/1] recompiled scale (*)", "    guard failed: 0/0: n == 7"])
    # Where capture truly cannot re-arm in time, the test is named; the next test is captured again.
    result.stdout.fnmatch_lines([
        "*CaptureLostWarning: recompile capture was switched off during "
        "test_reconfiguring.py::test_swaps_the_log_state_behind_torchs_back "
        "(torch's log state was replaced "
        "without torch._logging re-initialising it); its counts may be incomplete",
    ])


COUNTED = '''
import pytest, torch

@pytest.mark.parametrize("case", range(4))
def test_counted(case, nocompile_recompiles):
    f = torch.compile(lambda x: x * 2, backend="eager")
    for dtype in [torch.float32, torch.float64, torch.float16, torch.bfloat16][: case + 1]:
        f(torch.ones(2, dtype=dtype))  # each new dtype after the first recompiles
    assert len(nocompile_recompiles) == case
'''

FLAKY = RECOMPILE_ONCE + '''
@pytest.mark.max_recompiles(0)
def test_flaky_budget(tmp_path_factory):
    marker = tmp_path_factory.getbasetemp().parent / "ran-once"
    if not marker.exists():
        marker.write_text("")
        recompile_once()  # fails the budget on the first run only
'''


def test_beside_rerunfailures_timeout_and_without_logging(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytest.importorskip("pytest_rerunfailures")  # in the test extra; not on every machine
    pytest.importorskip("pytest_timeout")
    pytester.makepyfile(test_counted=COUNTED, test_flaky=FLAKY)
    result = run("-p", "rerunfailures", "--reruns", "1", "-p", "timeout", "--timeout", "120",
                 "-p", "no:logging", "-p", "no:randomly", "-rR")
    assert result.parseoutcomes() == {"passed": 5, "rerun": 1}
    result.stdout.fnmatch_lines(["RERUN test_flaky.py::test_flaky_budget"])


FAILS_ITS_FIRST_ATTEMPT = """
def test_flaky(tmp_path_factory):
{first}    marker = tmp_path_factory.getbasetemp().parent / "ran-once"
    if not marker.exists():
        marker.write_text("")
        assert False, "first attempt"
"""
FLAKY_IDLE = FAILS_ITS_FIRST_ATTEMPT.format(first="")


def test_a_rerun_idle_test_carries_its_counts_once(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    # While idle the counts go on the item, which every attempt of a rerun shares.
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(test_flaky=FLAKY_IDLE)
    result = run("-p", "rerunfailures", "--reruns", "1", "-p", "no:randomly", "--max-recompiles=0",
                 "--junitxml=junit.xml")
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    # junitxml writes one per attempt
    attempts = list(ElementTree.parse(pytester.path / "junit.xml").iter("testcase"))
    assert len(attempts) == 2
    for case in attempts:
        assert [prop.get("name") for prop in case.iter("property")] == list(with_health_counts(
            {"compiles": 0, "recompiles": 0, "graph_breaks": 0}, "nocompile_"))


FLAKY_LATE_IMPORT = FAILS_ITS_FIRST_ATTEMPT.format(
    first="    import torch\n    torch.compile(lambda x: x + 1, backend='eager')(torch.ones(1))\n")


def test_a_rerun_first_attempt_that_imports_torch_is_watched_from_the_arrival(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    # dynamo arrives in the first attempt's call: that attempt is watched from there, the second
    # (after the isolating reset, a first compile again) from its setup.
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(test_flaky=FLAKY_LATE_IMPORT)
    result = run("-p", "rerunfailures", "--reruns", "1", "-p", "no:randomly", "--max-recompiles=0",
                 "--junitxml=junit.xml")
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    attempts = list(ElementTree.parse(pytester.path / "junit.xml").iter("testcase"))
    properties = list(with_health_counts({"compiles": 1, "recompiles": 0, "graph_breaks": 0},
                                         "nocompile_", as_text=True).items())
    assert [[(prop.get("name"), prop.get("value")) for prop in case.iter("property")]
            for case in attempts] == [properties, properties]

def test_random_order_gives_identical_counts(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytest.importorskip("pytest_randomly")
    pytester.makepyfile(
        test_counted=COUNTED,
        test_also=RECOMPILE_ONCE + "\ndef test_once(nocompile_recompiles):\n    recompile_once()\n")
    counts = []
    for seed in ("1", "2", "3"):
        run("-p", "randomly", "-p", "no:logging", "--randomly-seed", seed,
            f"--nocompile-json=report-{seed}.json").assert_outcomes(passed=5)
        tests = json.loads((pytester.path / f"report-{seed}.json").read_text())["tests"]
        counts.append({entry["nodeid"]: (entry["compiles"], entry["recompiles"])
                       for entry in tests})
    orders = [list(count) for count in counts]
    assert orders[0] != orders[1] or orders[0] != orders[2], "the seeds should shuffle the order"
    assert counts[0] == counts[1] == counts[2]


LATE_IMPORT = """
import json, pytest
{marker}
def test_plain():
    pass

def test_imports_torch_itself():
    import torch
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))

def test_recompiles_after_it():
    import torch
    f = torch.compile(lambda x, n: x * n, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)
"""


@pytest.mark.parametrize("marker", ["", "pytestmark = pytest.mark.max_recompiles(0)"],
                         ids=["run-wide budget only", "module marker"])
def test_a_test_that_imports_torch_is_watched_from_dynamos_arrival(
        pytester: pytest.Pytester, run: RunPytest, marker: str) -> None:
    # Without markers no per-test hook runs until dynamo is imported (the idle watcher);
    # with one, the watcher runs from the start and waits. Both must count from the arrival on.
    pytester.makepyfile(test_late=LATE_IMPORT.format(marker=marker))
    result = run("-p", "no:randomly", "--max-recompiles=0", "--nocompile-json=report.json",
                 "-W", "error")
    result.assert_outcomes(passed=2, failed=1)
    source = "marker on module test_late.py" if marker else "from --max-recompiles"
    expect_lines(result, ["*_ test_recompiles_after_it _*",
                          f"1 recompile > max_recompiles(0) ({source})"])
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert [(entry["nodeid"].split("::")[1], entry["outcome"], entry["compiles"],
             entry["recompiles"], entry["verdict"]) for entry in tests] == [
        ("test_plain", "passed", 0, 0, "within budget"),
        ("test_imports_torch_itself", "passed", 1, 0, "within budget"),
        ("test_recompiles_after_it", "failed", 2, 1, "over budget"),
    ]


BYPASSES_THE_IMPORT_HOOK = """
import sys

def test_imports_dynamo_past_the_hook():
    # What a custom importer would do: load dynamo where no meta path finder sees it.
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if type(finder).__name__ != "_ArrivalFinder"]
    import torch
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))

def test_after_it():
    import torch
    f = torch.compile(lambda x, n: x * n, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)
"""


def test_dynamo_imported_past_the_hook_is_warned_about_and_watched_after(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_bypass=BYPASSES_THE_IMPORT_HOOK)
    result = run("-p", "no:randomly", "--max-recompiles=0")
    result.assert_outcomes(passed=1, failed=1, warnings=1)
    result.stdout.fnmatch_lines([
        "*CaptureLostWarning: torch._dynamo was first imported inside "
        "test_bypass.py::test_imports_dynamo_past_the_hook "
        "past pytest-nocompile's import hook, so its compiles were not watched; "
        "import torch._dynamo at module level "
        "(or in a conftest) to watch it",
    ])
    expect_lines(result, ["*_ test_after_it _*",
                          "1 recompile > max_recompiles(0) (from --max-recompiles)"])


def test_that_warning_under_w_error_is_an_error_of_that_test(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    # The idle watcher warns from the teardown hook: as an error it must fail that
    # test's teardown, never the run (INTERNALERROR).
    pytester.makepyfile(test_bypass=BYPASSES_THE_IMPORT_HOOK)
    result = run("-p", "no:randomly", "--max-recompiles=0",
                 "-W", "error::pytest_nocompile.plugin.CaptureLostWarning")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*_ ERROR at teardown of test_imports_dynamo_past_the_hook _*",
        "E   *CaptureLostWarning: torch._dynamo was first imported inside "
        "test_bypass.py::test_imports_dynamo_past_the_hook *",
    ])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


# Marker arguments and option values no user should be able to crash the run with.
ARGUMENTS = ["0", "3", "None", "-1", "1.5", "'0'", "True", "[]", "{}", "object()", "float('nan')",
             "10**30"]
KEYWORDS = ["", ", isolate=False", ", strict=True", ", isolate='no'", ", exact=True", ", **{'': 1}"]


def test_no_marker_input_gives_internalerror(pytester: pytest.Pytester, run: RunPytest) -> None:
    body = ["import pytest", ""]
    cases = list(itertools.product(["max_recompiles", "max_graph_breaks"], ARGUMENTS + ["", "0, 1"],
                                   KEYWORDS))
    for index, (marker, argument, keyword) in enumerate(cases):
        arguments = (argument + keyword).lstrip(", ")
        body += [f"@pytest.mark.{marker}({arguments})", f"def test_{index}():", "    pass", ""]
    pytester.makepyfile(test_fuzz="\n".join(body))
    result = run("-p", "no:randomly", "-q")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("errors", 0) == len(cases)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    errors = [line for line in result.stdout.lines if line.startswith("invalid max_")]
    assert len(errors) == outcomes.get("errors", 0)


@pytest.mark.parametrize("value", ["0", "7", "-1", "x", "", "1e3", "0x10", "  2  ", "١"])
def test_no_option_value_gives_internalerror(
        pytester: pytest.Pytester, run: RunPytest, value: str) -> None:
    pytester.makepyfile("def test_a(): pass")
    for args in ([f"--max-recompiles={value}"], [f"--max-graph-breaks={value}"]):
        result = run(*args)
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.USAGE_ERROR), (args, result.ret)
        assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    pytester.makeini(f"[pytest]\nmax_recompiles = {value}\n")
    result = run()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.USAGE_ERROR)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("compiled_before", [False, True],
                         ids=["fresh process", "compiled before the tests"])
def test_reset_is_skipped_only_when_nothing_compiled_since(
        pytester: pytest.Pytester, run: RunPytest, compiled_before: bool) -> None:
    compile_first = ('torch.compile(lambda x: x - 1, backend="eager")(torch.ones(1))'
                     if compiled_before else "")
    pytester.makeconftest(f'''
        import torch, torch._dynamo

        original_reset = torch._dynamo.reset

        def counting_reset():
            with open("resets.txt", "a") as out:
                out.write("reset\\n")
            original_reset()

        torch._dynamo.reset = counting_reset
        {compile_first}
    ''')
    pytester.makepyfile(test_resets='''
        import pytest, torch

        @pytest.mark.parametrize("case", range(5))
        @pytest.mark.max_recompiles(0)
        def test_no_compile(case):
            pass

        @pytest.mark.parametrize("case", range(3))
        @pytest.mark.max_recompiles(0)
        def test_compiles(case):
            torch.compile(lambda x: x + case, backend="eager")(torch.ones(1))
    ''')
    run("-p", "no:randomly").assert_outcomes(passed=8)
    # The first watched test resets only if something compiled before it (in a fresh
    # process the caches are empty: torch 2.11's reset would import inductor for
    # nothing); the other four non-compiling tests need not; each test after a
    # compiling one must (the first compiling test follows a clean cache).
    resets = ((pytester.path / "resets.txt").read_text().count("reset")
              if (pytester.path / "resets.txt").exists() else 0)
    assert resets == (1 if compiled_before else 0) + 2


@pytest.mark.fresh_interpreter(
    "checks that the inner run never imports torch: a forked run finds it imported")
def test_tests_that_never_import_torch_do_not_import_it(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_plain='''
        import sys

        def test_a():
            pass

        def test_b():
            assert "torch" not in sys.modules
    ''', test_late_import='''
        import pytest

        @pytest.mark.max_recompiles(0)
        def test_imports_torch_itself():
            import torch
            torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    ''')
    result = run("-p", "no:randomly", "--max-recompiles=0", "--nocompile-json=report.json",
                 "test_plain.py", "test_late_import.py")
    # no warning: dynamo's arrival started capture in the test that imported it
    result.assert_outcomes(passed=3)
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert [(entry["nodeid"], entry["compiles"]) for entry in tests][-1] == (
        "test_late_import.py::test_imports_torch_itself", 1)


# A future torch simulated on the installed one: a method of torch's LogState the capture calls to
# switch its recompiles and graph_breaks logs on is gone (torch's own code does not call it).
LOG_STATE_MOVED = '''
import torch._logging._internal as torch_logging

del torch_logging.LogState.enable_artifact
'''


@pytest.mark.parametrize("dynamo_before", [True, False], ids=["at-setup", "mid-test"])
def test_a_missing_internal_leaves_its_gates_not_measured_and_the_others_going(
    pytester: pytest.Pytester, run: RunPytest, dynamo_before: bool
) -> None:
    # dynamo imported before the test: the capture arms in its setup; else when it arrives
    pytester.makeconftest(LOG_STATE_MOVED + ("import torch._dynamo\n" if dynamo_before else ""))
    pytester.makepyfile(test_moved=RECOMPILE_ONCE + '''
@pytest.mark.max_recompiles(0)
def test_recompiles():
    recompile_once()

@pytest.mark.max_compiles(1)
def test_compiles_twice():
    recompile_once()
''')
    result = run("--nocompile-json=report.json")
    result.assert_outcomes(passed=1, failed=1)
    moved = ("torch * moved what pytest-nocompile calls to read its recompiles log "
             "(AttributeError: 'LogState' object has no attribute 'enable_artifact'); run "
             "`python -m pytest_nocompile doctor`")
    result.stdout.fnmatch_lines([
        f"*NotMeasuredWarning: test_moved.py::test_recompiles: max_recompiles(0) (marker on the "
        f"test) is not checked: {moved}. Tests are judged on their other budgets; said once per "
        "run",
    ])
    # the gate whose log still reads goes on
    result.stdout.fnmatch_lines(["*test_moved.py::test_compiles_twice: 2 compiles > "
                                 "max_compiles(1) (marker on the test)"])
    text = result.stdout.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    tests = {test["nodeid"]: test for test in json.loads(
        (pytester.path / "report.json").read_text())["tests"]}
    recompiles = tests["test_moved.py::test_recompiles"]
    assert (recompiles["recompiles"], recompiles["graph_breaks"], recompiles["compiles"]) == (
        None, None, 2)
    assert recompiles["not_measured"]["recompiles"].startswith("torch ")
    assert "graph_breaks log" in recompiles["not_measured"]["graph_breaks"]
