"""The usual fix, named: each row of the guard-class table with a fix, caused for real on the installed torch (run on every torch of the matrix)."""

from __future__ import annotations

import json
import re

import pytest

from nocompile_testing import TORCH, RunPytest
from pytest_nocompile.judge.guard_classes import ALL_CLASSES

HAZARDS = '''
import gc
import torch

def scale(x, n):
    return x * n

def double(x):
    return x * 2

def branch(x):
    if x.shape[0] == 3:
        return x + 1
    return x - 1

def test_python_float():  # a learning rate set by a scheduler
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 0.5)
    f(torch.ones(2), 0.25)

def test_size():
    f = torch.compile(double, backend="eager")
    f(torch.ones(2))
    f(torch.ones(3))

def test_size_zero_one():
    f = torch.compile(double, backend="eager", dynamic=True)
    f(torch.ones(4))
    f(torch.ones(1))

def test_size_compared():
    f = torch.compile(branch, backend="eager", dynamic=True)
    f(torch.ones(4))
    f(torch.ones(3))

def test_global_state():
    f = torch.compile(double, backend="eager")
    f(torch.ones(2))
    with torch.no_grad():
        f(torch.ones(2))

params = [torch.nn.Parameter(torch.ones(2))]
params[0].grad = torch.ones(2)
kept = []

def test_object_id():  # an optimizer built per step, each kept alive
    for _ in range(2):
        opt = torch.optim.SGD(params, lr=torch.tensor(0.1))
        kept.append(opt)
        torch.compile(opt.step, backend="eager")()

def test_deallocated_object():  # an optimizer built per step, each freed
    for _ in range(2):
        opt = torch.optim.SGD(params, lr=torch.tensor(0.1))
        torch.compile(opt.step, backend="eager")()
        del opt
        gc.collect()
'''

# The test of each row, and the subject its fix names (None: it differs between torch versions, args[0] or self).
ROWS = {
    "python float": ("test_python_float", "n"),
    "size": ("test_size", "x dim 0"),
    "size 0/1": ("test_size_zero_one", "x dim 0"),
    "size compared": ("test_size_compared", "x dim 0"),
    "global state": ("test_global_state", "grad_mode"),
    "object id": ("test_object_id", None),
    "deallocated object": ("test_deallocated_object", None),
}
# Torch 2.4 and 2.5 compile a freed object's method anew, as a first compile: no recompile, so no guard to name.
NOT_A_RECOMPILE = {"deallocated object"} if TORCH < (2, 6) else set()


def test_every_row_with_a_fix_has_a_test_here() -> None:
    assert sorted(row.name for row in ALL_CLASSES if row.fix) == sorted(ROWS)


def test_each_row_names_its_fix(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_rows=HAZARDS)
    result = run("-p", "no:randomly", "-p", "no:logging", "--max-recompiles=0", "--nocompile-json=report.json")
    result.assert_outcomes(failed=len(ROWS) - len(NOT_A_RECOMPILE), passed=len(NOT_A_RECOMPILE))
    tests = {test["nodeid"].partition("::")[2]: test for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    # Each test's failure text, by its name: the text between its "____ name ____" header and the next.
    # (Up to pytest's short summary: with CI set, it repeats each failure's whole message.)
    parts = re.split(r"^_{3,} (\w+) _{3,}$", result.stdout.str().partition("short test summary info")[0], flags=re.M)
    failures = dict(zip(parts[1::2], parts[2::2]))
    for name, (test, subject) in ROWS.items():
        if name in NOT_A_RECOMPILE:
            assert tests[test]["recompiles"] == 0 and test not in failures
            continue
        reasons = [reason for event in tests[test]["recompile_events"] for reason in event["reasons"] if reason["class"] == name]
        assert reasons, f"{test}: no guard of class {name!r} in {[r['guard'] for e in tests[test]['recompile_events'] for r in e['reasons']]}"
        row = next(row for row in ALL_CLASSES if row.name == name)
        for reason in reasons:
            if subject is not None:
                assert reason["subject"] == subject
            tensor, _, dim = (reason["subject"] or "").partition(" dim ")
            assert reason["fix"] == row.fix.format(subject=reason["subject"], tensor=tensor, dim=dim)  # type: ignore[union-attr]
            # The failure text says it once, under the guard that needs it.
            assert failures[test].count(f"      usual fix: {reason['fix']}\n") == 1
