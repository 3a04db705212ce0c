"""The usual fix, named: each row of the guard-class table with a fix, caused for real on the
installed torch (run on every torch of the matrix)."""

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

def train_step(x, step):
    return x * step

def test_python_int():  # a step counter passed to the compiled step
    f = torch.compile(train_step, backend="eager")
    for step in range(3):
        f(torch.ones(2), step)

def forward(x, use_cache):
    return x * 2 if use_cache else x + 1

def test_python_bool():  # a flag the loop switches
    f = torch.compile(forward, backend="eager")
    f(torch.ones(2), True)
    f(torch.ones(2), False)

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

# The test of each row, and the subject its fix names (None: it differs between torch versions,
# args[0] or self).
ROWS = {
    "python float": ("test_python_float", "n"),
    "python int": ("test_python_int", "step"),
    "python bool": ("test_python_bool", "use_cache"),
    "size": ("test_size", "x dim 0"),
    "size 0/1": ("test_size_zero_one", "x dim 0"),
    "size compared": ("test_size_compared", "x dim 0"),
    "global state": ("test_global_state", "grad_mode"),
    "object id": ("test_object_id", None),
    "deallocated object": ("test_deallocated_object", None),
}
# Torch 2.4 and 2.5 compile a freed object's method anew, with no recompile record: no guard to
# name. Its graph's compile id (an attempt of 1 at the frame) still counts it, a second witness.
WITNESSED_ONLY = {"deallocated object"} if TORCH < (2, 6) else set()


def test_every_row_with_a_fix_has_a_test_here() -> None:
    assert sorted(row.name for row in ALL_CLASSES if row.fix) == sorted(ROWS)


def test_each_row_names_its_fix(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_rows=HAZARDS)
    result = run("-p", "no:randomly", "-p", "no:logging", "--max-recompiles=0",
                 "--nocompile-json=report.json")
    result.assert_outcomes(failed=len(ROWS))
    tests = {test["nodeid"].partition("::")[2]: test
             for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    # Each test's failure text, by its name: the text between its "____ name ____" header and the
    # next. (Up to pytest's short summary: with CI set, it repeats each failure's whole message.)
    parts = re.split(r"^_{3,} (\w+) _{3,}$",
                     result.stdout.str().partition("short test summary info")[0], flags=re.M)
    failures = dict(zip(parts[1::2], parts[2::2]))
    for name, (test, subject) in ROWS.items():
        if name in WITNESSED_ONLY:
            events = tests[test]["recompile_events"]
            assert events and {event["witness"] for event in events} == {"compile id"}, events
            assert "no recompile record: counted from its compile id" in failures[test]
            continue
        reasons = [reason for event in tests[test]["recompile_events"]
                   for reason in event["reasons"] if reason["class"] == name]
        assert reasons, (
            f"{test}: no guard of class {name!r} in "
            f"{[r['guard'] for e in tests[test]['recompile_events'] for r in e['reasons']]}")
        row = next(row for row in ALL_CLASSES if row.name == name)
        for reason in reasons:
            if subject is not None:
                assert reason["subject"] == subject
            tensor, _, dim = (reason["subject"] or "").partition(" dim ")
            fix = row.fix_for(held=False)  # each test's subject is an argument
            assert fix is not None
            assert reason["fix"] == fix.format(subject=reason["subject"], tensor=tensor, dim=dim)
            # The failure text says it once, under the guard that needs it.
            assert failures[test].count(f"      usual fix: {reason['fix']}\n") == 1


TRAINING_LOOP = '''
import pytest
import torch


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=64, width=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.head = torch.nn.Linear(width, vocab)
        self.step = 0  # counted by the model itself

    def forward(self, idx):
        self.step += 1
        return self.head(self.embed(idx)) * min(1, self.step)


def batch():
    return torch.randint(0, 64, (3, 8))  # (batch, seq)


def train_step(model, idx, step):
    logits = model(idx)
    return logits.float().mean() * (step + 1)


@pytest.mark.max_recompiles(0)
def test_step_argument():
    model = TinyLM()
    compiled = torch.compile(train_step, backend="eager")
    for step in range(3):
        compiled(model, batch(), step)


@pytest.mark.max_recompiles(0)
def test_step_attribute():
    model = torch.compile(TinyLM(), backend="eager")
    for _ in range(3):
        model(batch())
'''


def test_an_int_step_counter_names_its_fix_as_an_argument_and_as_an_attribute(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_loop=TRAINING_LOOP)
    result = run("-p", "no:randomly", "-p", "no:logging")
    result.assert_outcomes(failed=2)
    # torch up to 2.6 names the local L['step'] (and L['self'].step), later torch step (self.step);
    # from 2.5 the guard's compile id comes first (0/0: ).
    result.stdout.re_match_lines([
        r".*_ test_step_argument _.*",
        r".*recompiles? > max_recompiles\(0\).*",  # one or two, by torch version
        r".*recompiled train_step.*",
        r"    guard failed: (?:\d+/\d+(?:_\d+)?: )?(?:L\['step'\]|step) == 0$",
        r"      usual fix: " + re.escape(
            "step is a Python int that changes (as a step or epoch counter does): compile with "
            "dynamic=True, or pass it as a tensor, e.g. torch.tensor(step)"),
    ])
    result.stdout.re_match_lines([
        r".*_ test_step_attribute _.*",
        r".*recompiles? > max_recompiles\(0\).*",  # one or two, by torch version
        r".*TinyLM\.forward.*",
        r"    guard failed: (?:\d+/\d+(?:_\d+)?: )?(?:L\['self'\]|self)\.step == 0$",
        r"      usual fix: self\.step is a Python int that changes.*hold it in a tensor.*"
        + re.escape("torch._dynamo.config.allow_unspec_int_on_nn_module = True"),
    ])
