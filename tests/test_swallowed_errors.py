"""Compile errors dynamo swallows (``suppress_errors``): counted, warned in every watched test,
failing min_compiles."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from nocompile_testing import RunPytest
from pytest_nocompile.observe.sources.swallowed_errors import compile_error_reason

# What ConvertFrame.__call__ logs where it swallows the error (torch 2.4 to 2.15; with
# config.verbose the same first line, then "========== TorchDynamo Stack Trace ==========").
WONT_CONVERT = ("WON'T CONVERT scale /work/test_a.py line 6 \ndue to: \n"
                "Traceback (most recent call last):\n...")
VERBOSE = ("WON'T CONVERT scale /work/test_a.py line 6\n"
           "========== TorchDynamo Stack Trace ==========\n...")


class BackendCompilerFailed(Exception):
    """As torch words it: ``backend='boom' raised:`` and the backend's error on the next line."""


def test_the_reason_names_the_function_and_the_error_in_one_line() -> None:
    failed = BackendCompilerFailed(
        "backend='boom' raised:\nRuntimeError: boom\n\nSet TORCHDYNAMO_VERBOSE=1 for ...")
    expected = ("scale (/work/test_a.py:6): BackendCompilerFailed: backend='boom' raised: "
                "RuntimeError: boom")
    assert compile_error_reason(WONT_CONVERT, failed) == expected
    assert compile_error_reason(VERBOSE, failed) == expected
    assert (compile_error_reason(WONT_CONVERT, KeyError("x"))
            == "scale (/work/test_a.py:6): KeyError: 'x'")
    assert compile_error_reason(WONT_CONVERT, None) == "scale (/work/test_a.py:6)"
    # The recompile-limit warning, and anything else convert_frame warns, is not a compile error.
    assert compile_error_reason("torch._dynamo hit config.recompile_limit (8)\n   function: 'f'",
                                None) is None


SWALLOWED = """
import pytest, torch

def boom(gm, example_inputs):
    raise RuntimeError("boom")

def scale(x):
    return x * 2

@pytest.fixture
def suppressed():
    with torch._dynamo.config.patch(suppress_errors=True):
        yield

def test_unbudgeted(suppressed):
    torch.compile(scale, backend=boom)(torch.ones(2))

@pytest.mark.min_compiles(1)
def test_floored(suppressed):
    torch.compile(scale, backend=boom)(torch.ones(2))

def test_not_suppressed():
    # raises: the user sees the error, nothing is swallowed
    torch.compile(scale, backend=boom)(torch.ones(2))
"""

REASON = "scale (test_a.py:6): BackendCompilerFailed: backend='boom' raised: RuntimeError: boom"


def test_a_swallowed_error_is_warned_in_every_watched_test_and_fails_min_compiles(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_a=SWALLOWED)
    result = run("--nocompile-report", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.re_match_lines([
        r"_+ test_floored _+$",
        re.escape("1 compile within min_compiles(1) (marker on the test), but dynamo swallowed a "
                  "compile error") + "$",
        "why:$",
        re.escape("    compile error swallowed (suppress_errors), the code ran uncompiled: "
                  f"{REASON}") + "$",
        re.escape("        called from: test_a.py:19 in test_floored: "
                  "torch.compile(scale, backend=boom)(torch.ones(2))") + "$",
    ], consecutive=True)
    for name, line in (("test_unbudgeted", 15), ("test_floored", 19)):
        result.stdout.fnmatch_lines([
            f"test_a.py::{name}",
            "  *SwallowedCompileErrorWarning: dynamo swallowed a compile error (suppress_errors) "
            f"and ran the code uncompiled: {REASON}; called from test_a.py:{line} in {name}: "
            "torch.compile(scale, backend=boom)(torch.ones(2))",
        ])
    # An error not swallowed reaches the test: no warning for it.
    assert "in test_not_suppressed: torch.compile" not in result.stdout.str()
    tests = {entry["nodeid"]: entry
             for entry in json.loads((pytester.path / "report.json").read_text())["tests"]}
    # other kinds' signals (a compile's seconds) are listed too
    def errors(nodeid: str) -> list[dict[str, Any]]:
        return [event for event in tests[nodeid]["health_events"]
                if event["what"] == "compile_error"]

    (event,) = errors("test_a.py::test_unbudgeted")
    assert (event["what"], event["reason"], event["phase"]) == ("compile_error", REASON, "call")
    assert re.fullmatch(r"\d+/\d+", event["compile_id"])  # the failed compile's, from the exception
    assert tests["test_a.py::test_floored"]["over_budget"] == ["min_compiles"]
    assert errors("test_a.py::test_not_suppressed") == []


def test_a_block_floor_fails_on_a_swallowed_error(pytester: pytest.Pytester,
                                                  run: RunPytest) -> None:
    pytester.makepyfile(test_a="""
import pytest, torch
from pytest_nocompile import TooFewCompiles, assert_min_compiles

def boom(gm, example_inputs):
    raise RuntimeError("boom")

def test_block():
    with torch._dynamo.config.patch(suppress_errors=True):
        with pytest.raises(TooFewCompiles, match="but dynamo swallowed a compile error"):
            with assert_min_compiles(1):
                torch.compile(lambda x: x * 2, backend=boom)(torch.ones(2))
""")
    run().assert_outcomes(passed=1)


CHILD = '''
import torch, torch._dynamo

def boom(gm, example_inputs):
    raise RuntimeError("boom")

def scale(x):
    return x * 2

if SWALLOW:
    torch._dynamo.config.suppress_errors = True
torch.compile(scale, backend=boom if SWALLOW else "eager")(torch.ones(2))
'''


def test_a_child_process_reports_its_swallowed_errors_and_its_compiles_meet_the_floor(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_a=f"""
import subprocess, sys
import pytest

def child(swallow):
    subprocess.run([sys.executable, "-c", f"SWALLOW = {{swallow}}\\n" + {CHILD!r}], check=True)

@pytest.mark.min_compiles(1)
def test_compiles_in_a_child():
    child(False)  # the test's own process compiles nothing: the floor counts every process

@pytest.mark.min_compiles(1)
def test_child_swallows():
    child(True)
""")
    result = run("-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["PASSED test_a.py::test_compiles_in_a_child"])
    result.stdout.re_match_lines([
        r"_+ test_child_swallows _+$",
        re.escape("1 compile within min_compiles(1) (marker on the test), but dynamo swallowed a "
                  "compile error") + "$",
        "why:$",
        r"    pid \d+ \(.*\): compile error swallowed \(suppress_errors\), "
        r"the code ran uncompiled: "
        + re.escape("scale (<string>:8): BackendCompilerFailed: backend='boom' raised: "
                    "RuntimeError: boom") + "$",
    ], consecutive=True)
    result.stdout.fnmatch_lines(["*SwallowedCompileErrorWarning: dynamo swallowed a compile error "
                                 "in pid * (suppress_errors) and ran the code uncompiled: "
                                 "scale (<string>:8): *RuntimeError: boom*"])
