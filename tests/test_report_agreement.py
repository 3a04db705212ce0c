"""Every failure the plugin causes shows in its test's report entry: a broken contract, a rise
against the baseline (issue 35)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from typing import Any

import pytest

from nocompile_testing import RunPytest

BROKEN = '''
import pytest, torch

def branchy(x):
    if x.shape[0] == 3:
        return x + 1
    return x * 2

@pytest.mark.dynamic_dims(x=0)
def test_broken():
    f = torch.compile(branchy, backend="eager", dynamic=True)
    f(torch.ones(4))
    f(torch.ones(3))

@pytest.mark.dynamic_dims(x=0)
@pytest.mark.max_recompiles(0)
def test_over_and_broken():
    f = torch.compile(branchy, backend="eager", dynamic=True)
    f(torch.ones(4))
    f(torch.ones(3))

@pytest.mark.dynamic_dims(x=0)
def test_kept():
    f = torch.compile(branchy, backend="eager", dynamic=True)
    f(torch.ones(4))
    f(torch.ones(5))
'''


def _entries(pytester: pytest.Pytester, name: str = "report.json") -> dict[str, dict[str, Any]]:
    document = json.loads((pytester.path / name).read_text())
    return {entry["nodeid"].split("::")[1]: entry for entry in document["tests"]}


def _properties(pytester: pytest.Pytester, test: str) -> dict[str, str]:
    case = next(case for case in ElementTree.parse(pytester.path / "junit.xml").iter("testcase")
                if case.get("name") == test)
    return {prop.get("name") or "": prop.get("value") or "" for prop in case.iter("property")}


def test_a_broken_contract_is_the_verdict_in_the_json_the_table_and_junit(pytester: pytest.Pytester,
                                                                          run: RunPytest) -> None:
    pytester.makepyfile(test_contracts=BROKEN)
    result = run("--nocompile-json=report.json", "--junitxml=junit.xml", "--nocompile-table=all")
    result.assert_outcomes(passed=1, failed=2)
    entries = _entries(pytester)
    broken = entries["test_broken"]
    assert (broken["verdict"], broken["broken_contracts"], broken["over_budget"]) == (
        "broken contract", ["dynamic_dims"], [])
    assert broken["cause"].startswith("dynamic_dims(x=0) broken (marker on the test): a dim meant "
                                      "to stay dynamic was specialised once")
    # Over a budget too: the budget is the verdict and the cause; the contract is still named.
    both = entries["test_over_and_broken"]
    assert (both["verdict"], both["broken_contracts"], both["over_budget"]) == (
        "over budget", ["dynamic_dims"], ["recompiles"])
    assert both["cause"].startswith("branchy recompiled: ")
    kept = entries["test_kept"]
    assert (kept["verdict"], kept["broken_contracts"], kept["cause"]) == ("no budget", [], None)
    # The table lists it as the test's outcome reads, with its cause under the table.
    result.stdout.re_match_lines([r"^.*\s-\s+broken contract\s+test_contracts\.py::test_broken$",
                                  r"^test_contracts\.py::test_broken: dynamic_dims\(x=0\) broken "
                                  r"\(marker on the test\)"])
    assert _properties(pytester, "test_broken")["nocompile_broken_contracts"] == "dynamic_dims"
    assert "nocompile_broken_contracts" not in _properties(pytester, "test_kept")


RISING = '''
import torch

def scale(x, n):
    return x * n

def test_step():
    f = torch.compile(scale, backend="eager")
    for n in {sizes}:
        f(torch.ones(2), n)

def test_steady():
    torch.compile(scale, backend="eager")(torch.ones(2), 2)
'''


def test_a_test_that_fails_the_run_against_the_baseline_says_what_rose_in_its_json_entry(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_rise=RISING.format(sizes="(2,)"))
    run("--nocompile-save=baseline.json").assert_outcomes(passed=2)
    pytester.makepyfile(test_rise=RISING.format(sizes="(2, 3)"))
    result = run("--nocompile-compare=baseline.json", "--nocompile-json=report.json")
    # every test passed: the baseline failed the run
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    entries = _entries(pytester)
    rose = entries["test_step"]["baseline_regressions"]
    assert rose[:2] == ["compiles rose 1 -> 2", "recompiles rose 0 -> 1"]
    assert rose[2].startswith("new reason: recompile scale (test_rise.py): ")
    assert "baseline_regressions" not in entries["test_steady"]
