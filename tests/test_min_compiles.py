"""min_compiles(N): a floor on the graphs compiled in the call phase, "this really ran compiled"."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree

import pytest

from nocompile_testing import TORCH, RunPytest

NOTHING_COMPILED = [
    "0 compiles < min_compiles(1) (marker on the test)",
    "why:",
    "    nothing recorded says why; dynamo compiles no graph when the compiled code does not "
    'run, runs under torch.compiler.disable or set_stance("force_eager"), runs from dynamo\'s '
    "cache (compiled before the call: in a fixture, or by an earlier test without isolation), or "
    "holds no tensor operation",
]

FLOORED = """
import pytest, torch

def scale(x):
    return x * 2

@pytest.mark.min_compiles(1)
def test_compiled():
    torch.compile(scale, backend="eager")(torch.ones(2))

@pytest.mark.min_compiles(1)
def test_compile_forgotten():
    scale(torch.ones(2))  # a compile=True test whose model was never compiled

@pytest.mark.min_compiles(2)
def test_one_graph_of_two():
    torch.compile(scale, backend="eager")(torch.ones(2))
"""


def test_a_test_that_compiled_too_little_fails_saying_why(pytester: pytest.Pytester,
                                                          run: RunPytest) -> None:
    pytester.makepyfile(test_a=FLOORED)
    result = run("--junitxml=junit.xml", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.re_match_lines([r"_+ test_compile_forgotten _+$",
                                  *map(_literal, NOTHING_COMPILED)], consecutive=True)
    # Something compiled, too little: the headline alone (no "why:" made up).
    result.stdout.re_match_lines([r"_+ test_one_graph_of_two _+$",
                                  _literal("1 compile < min_compiles(2) (marker on the test)"),
                                  r"[-=]+ .*"], consecutive=True)
    # The table shows the floor as a budget, in the compiles column's count.
    result.stdout.fnmatch_lines(["*0*0*0*compiles>=1*over budget*test_a.py::test_compile_forgotten",
                                 "*1*0*0*compiles>=1*within budget*test_a.py::test_compiled"])
    tests = {entry["nodeid"]: entry
             for entry in json.loads((pytester.path / "report.json").read_text())["tests"]}
    forgotten = tests["test_a.py::test_compile_forgotten"]
    assert (forgotten["compiles"], forgotten["min_compiles"], forgotten["over_budget"]) == (
        0, 1, ["min_compiles"])
    assert tests["test_a.py::test_compiled"]["verdict"] == "within budget"
    properties = {prop.get("name")
                  for prop in ElementTree.parse(pytester.path / "junit.xml").iter("property")}
    assert "nocompile_compiles" in properties and "nocompile_min_compiles" not in properties


def _literal(line: str) -> str:
    return re.escape(line) + "$"


def test_option_and_ini_key_floor_every_test_and_a_marker_lifts_it(pytester: pytest.Pytester,
                                                                   run: RunPytest) -> None:
    pytester.makepyfile(test_a="""
import pytest, torch

def test_eager():
    torch.ones(2) * 2

@pytest.mark.min_compiles(None)
def test_eager_on_purpose():
    torch.ones(2) * 2
""")
    result = run("--min-compiles=1")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["0 compiles < min_compiles(1) (from --min-compiles)"])
    pytester.makeini("[pytest]\nmin_compiles = 1\n")
    result = run()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["0 compiles < min_compiles(1) (from nocompile ini key min_compiles in tox.ini)"])


def test_a_bad_floor_is_a_usage_error_naming_the_test_and_the_form(pytester: pytest.Pytester,
                                                                   run: RunPytest) -> None:
    pytester.makepyfile(test_a="""
import pytest

@pytest.mark.min_compiles(1.5)
def test_a():
    pass
""")
    result = run()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["invalid min_compiles marker on test_a.py::test_a: "
                                 "min_compiles(1.5): expected an int >= 0, got 1.5 (float); use "
                                 "@pytest.mark.min_compiles(N), N an int >= 0 or None"])
    result = run("--min-compiles=-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--min-compiles: expected an int >= 0, got -1*"])


@pytest.mark.skipif(TORCH < (2, 6), reason="torch.compiler.set_stance is new in torch 2.6")
def test_a_stance_left_in_force_is_named(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_a="""
import pytest, torch

@pytest.fixture
def eager_stance():
    torch.compiler.set_stance("force_eager")
    yield
    torch.compiler.set_stance("default")

@pytest.mark.min_compiles(1)
def test_a(eager_stance):
    torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2))
""")
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["0 compiles < min_compiles(1) (marker on the test)", "why:",
                                 '    torch.compiler.set_stance("force_eager") was in force when '
                                 'the call ended'])


def test_a_block_floor(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_a="""
import pytest, torch
from pytest_nocompile import TooFewCompiles, assert_min_compiles

def scale(x):
    return x * 2

def test_fixture(nocompile_assert_min_compiles):
    with nocompile_assert_min_compiles(1) as block:
        torch.compile(scale, backend="eager")(torch.ones(2))
    assert block.counted == 1
    with nocompile_assert_min_compiles(1):
        scale(torch.ones(2))

def test_plain_function_outside_any_budget():
    with pytest.raises(TooFewCompiles, match=r"^0 compiles < assert_min_compiles\\(1\\)\\nwhy:"):
        with assert_min_compiles(1):
            scale(torch.ones(2))
""")
    result = run()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E * pytest_nocompile.exceptions.TooFewCompiles: 0 compiles < "
                                 "nocompile_assert_min_compiles(1)",
                                 "E *why:", "test_a.py:11: TooFewCompiles"])
