"""``@pytest.mark.dynamic_dims``: a dim meant to stay dynamic that a recompile specialised fails the
test, naming it."""

from __future__ import annotations

import json
import re

import pytest

from nocompile_testing import TORCH, RunPytest


def literal(*lines: str) -> list[str]:
    """Regexes for output lines, '*' the only wildcard (fnmatch would read the [0] of a guard as a
    character class)."""
    return [".*".join(map(re.escape, line.split("*"))) + r"\Z" for line in lines]


# The user's functions: a branch on a size, and code that keeps the size dynamic.
FUNCTIONS = '''
import pytest, torch

def branchy(x):
    if x.shape[0] == 3:
        return x + 1
    return x * 2

def plain(x, y):
    return x * 2 + y.sum()
'''

CONTRACTS = FUNCTIONS + '''
@pytest.mark.dynamic_dims(x=0)
def test_kept():
    f = torch.compile(plain, backend="eager", dynamic=True)
    for n in (4, 5, 1, 7):  # 1: dynamo's own 0/1 specialisation, not counted by default
        f(torch.ones(n), torch.ones(2))

@pytest.mark.dynamic_dims(x=0)
def test_broken_by_a_branch():
    f = torch.compile(branchy, backend="eager", dynamic=True)
    f(torch.ones(4))
    f(torch.ones(3))

@pytest.mark.dynamic_dims(y=0, x=1)
def test_other_dims_are_not_the_contracts():
    f = torch.compile(branchy, backend="eager", dynamic=True)
    f(torch.ones(4, 2))
    f(torch.ones(3, 2))

@pytest.mark.dynamic_dims(x=0, framework_specialisation=True)
def test_dynamos_0_1_rule_counted_when_asked():
    f = torch.compile(plain, backend="eager", dynamic=True)
    f(torch.ones(4), torch.ones(2))
    f(torch.ones(1), torch.ones(2))

@pytest.mark.dynamic_dims(x=(0,))
def test_a_dim_compiled_static():
    f = torch.compile(plain, backend="eager")  # automatic dynamic: the first new size recompiles
    f(torch.ones(4), torch.ones(2))
    f(torch.ones(8), torch.ones(2))

@pytest.mark.dynamic_dims(x=0)
class TestClassContract:
    def test_inherits_it(self):
        f = torch.compile(branchy, backend="eager", dynamic=True)
        f(torch.ones(4))
        f(torch.ones(3))

    @pytest.mark.dynamic_dims(x=1)
    def test_its_own_wins(self):
        f = torch.compile(branchy, backend="eager", dynamic=True)
        f(torch.ones(4))
        f(torch.ones(3))
'''


def test_dynamic_dims_kept_and_broken(run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dims=CONTRACTS)
    result = run("-rA", "--nocompile-json=report.json")
    outcomes = {line.split()[1].partition("::")[2]: line.split()[0] for line in result.stdout.lines
                if line.startswith(("PASSED ", "FAILED "))}
    assert outcomes == {
        "test_kept": "PASSED",
        "test_broken_by_a_branch": "FAILED",
        "test_other_dims_are_not_the_contracts": "PASSED",
        "test_dynamos_0_1_rule_counted_when_asked": "FAILED",
        "test_a_dim_compiled_static": "FAILED",
        "TestClassContract::test_inherits_it": "FAILED",
        "TestClassContract::test_its_own_wins": "PASSED",
    }, result.stdout.str()
    # The argument, the dim, the size, the user's branch and the call (torch 2.4 writes the guard
    # Ne(L['x'].size()[0], 3)).
    branch = [
        "dynamic_dims(x=0) broken (marker on the test): a dim meant to stay dynamic was "
        "specialised once",
        "    branchy recompiled: x dim 0 at size 3: your code specialised it (guard failed: "
        "*x*.size()[0]*3*)",
        *(["        at: test_dims.py:4 in branchy: if x.shape[0] == 3:"]
          if TORCH >= (2, 6) else []),  # 2.4 names no line of the user's
        "        triggered by: test_dims.py:21 in test_broken_by_a_branch: f(torch.ones(3))",
        "        usual fix: your code branches on the size of x dim 0: move the branch out of the "
        "compiled function, or compute both sides with torch ops",
    ]
    result.stdout.re_match_lines(literal(*branch), consecutive=True)
    result.stdout.re_match_lines(literal(
        "dynamic_dims(x=0, framework_specialisation=True) broken (marker on the test): a dim meant "
        "to stay dynamic was specialised once",
        "    plain recompiled: x dim 0 at size 0 or 1: dynamo's own 0/1 specialisation (guard "
        "failed: *2 <= *x*.size()[0])",
        "        triggered by: test_dims.py:* in test_dynamos_0_1_rule_counted_when_asked: "
        "f(torch.ones(1), torch.ones(2))",
        "        usual fix: dynamo specialises sizes 0 and 1: keep x dim 0 at 2 or more, or call "
        "torch._dynamo.mark_unbacked(x, 0) *",
    ), consecutive=True)
    result.stdout.re_match_lines(literal(  # its headline reads as the branch's
        "    plain recompiled: x dim 0 at size 8: it was compiled static (guard failed: *size "
        "mismatch at index 0. expected 4, actual 8)",
        "        triggered by: test_dims.py:* in test_a_dim_compiled_static: f(torch.ones(8), "
        "torch.ones(2))",
        "        usual fix: compile with dynamic=True, or call torch._dynamo.mark_dynamic(x, 0) "
        "before the first call",
    ), consecutive=True)
    result.stdout.fnmatch_lines(["dynamic_dims(x=0) broken (marker on class TestClassContract): *"])
    # The recompiles are in the JSON report, as any watched test's; a test whose only marker is a
    # contract has no budget.
    tests = {test["nodeid"].partition("::")[2]: test
             for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    assert (tests["test_broken_by_a_branch"]["recompiles"] == 1
            and tests["test_broken_by_a_branch"]["outcome"] == "failed")
    assert tests["test_kept"]["recompiles"] == 1 and tests["test_kept"]["outcome"] == "passed"


def test_a_contract_and_a_budget_both_fail_in_one_text(run: RunPytest,
                                                       pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_both=FUNCTIONS + '''
@pytest.mark.max_recompiles(0)
@pytest.mark.dynamic_dims(x=0)
def test_both():
    f = torch.compile(branchy, backend="eager", dynamic=True)
    f(torch.ones(4))
    f(torch.ones(3))
''')
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["1 recompile > max_recompiles(0) (marker on the test)", "*",
                                 "dynamic_dims(x=0) broken (marker on the test): *"])
