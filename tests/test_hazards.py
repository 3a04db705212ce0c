"""Each recompile hazard fails under max_recompiles(0) and names its guard; clean controls pass."""

from __future__ import annotations

import re

import pytest

from nocompile_testing import LIMIT_CONFIG, RunPytest, expect_lines

HAZARDS = '''
import threading
import pytest, torch

def double(x):
    return x * 2

def scale(x, n):
    return x * n

class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.factor = 2

    def forward(self, x):
        return x * self.factor

class Branchy(torch.nn.Module):
    def forward(self, x):
        return x + 1 if self.training else x - 1

def call_twice(f):
    f(torch.ones(2), 2)
    f(torch.ones(2), 5)  # recompiles

pytestmark = pytest.mark.max_recompiles(0)

def test_shape_change():
    f = torch.compile(double, backend="eager")
    f(torch.ones(2))
    f(torch.ones(3))  # recompiles

def test_int_argument():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)  # recompiles

def test_module_attribute():
    m = Scaled()
    f = torch.compile(m, backend="eager")
    f(torch.ones(2))
    m.factor = 3
    f(torch.ones(2))  # recompiles

def test_requires_grad():
    f = torch.compile(double, backend="eager")
    f(torch.ones(2))
    f(torch.ones(2, requires_grad=True))  # recompiles

def test_dtype():
    f = torch.compile(double, backend="eager")
    f(torch.ones(2))
    f(torch.ones(2, dtype=torch.float64))  # recompiles

def test_train_eval():
    m = Branchy()
    f = torch.compile(m, backend="eager")
    f(torch.ones(2))
    m.eval()
    f(torch.ones(2))  # recompiles

def test_grad_mode():
    f = torch.compile(double, backend="eager")
    f(torch.ones(2))
    with torch.no_grad():
        f(torch.ones(2))  # recompiles

def test_default_dtype():
    f = torch.compile(double, backend="eager")
    f(torch.ones(2))
    torch.set_default_dtype(torch.float64)
    try:
        f(torch.ones(2, dtype=torch.float32))  # recompiles
    finally:
        torch.set_default_dtype(torch.float32)

def test_parameter_vs_tensor():
    f = torch.compile(double, backend="eager")
    f(torch.nn.Parameter(torch.ones(2), requires_grad=False))
    f(torch.ones(2))  # recompiles

def test_recompile_in_helper():
    call_twice(torch.compile(scale, backend="eager"))

def test_recompile_in_thread():
    f = torch.compile(double, backend="eager")
    f(torch.ones(2))
    worker = threading.Thread(target=f, args=(torch.ones(2, dtype=torch.float64),), name="worker")
    worker.start()
    worker.join()
'''

# For each hazard: the lines users read, from the "[1/1]" line on.
EXPECTED = {
    "test_shape_change": [
        "[1/1] recompiled double (test_hazards_user.py:{def double})",
        "    guard failed: 0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
        "      usual fix: compile with dynamic=True, "
        "or call torch._dynamo.mark_dynamic(x, 0) before the first call",
        "    triggered by: test_hazards_user.py:{# recompiles@test_shape_change} in "
        "test_shape_change: f(torch.ones(3))  # recompiles",
    ],
    "test_int_argument": [
        "[1/1] recompiled scale (test_hazards_user.py:{def scale})",
        "    guard failed: 0/0: n == 2",
        "      guarded at: test_hazards_user.py:{return x * n} in scale: return x * n",
        "      usual fix: n is a Python int that changes*",
        "    triggered by: test_hazards_user.py:{# recompiles@test_int_argument} in "
        "test_int_argument: f(torch.ones(2), 3)  # recompiles",
    ],
    "test_module_attribute": [
        # Compiled whole: named by its class, compiled at the user's torch.compile line
        # (module_names).
        "[1/1] recompiled Scaled.forward "
        "(compiled at test_hazards_user.py:{f = torch.compile(m@test_module_attribute})",
        "    guard failed: 0/0: self.factor == 2",
        "      guarded at: test_hazards_user.py:{return x * self.factor} in forward: "
        "return x * self.factor",
        "      usual fix: self.factor is a Python int that changes*allow_unspec_int_on_nn_module*",
        "    triggered by: test_hazards_user.py:{# recompiles@test_module_attribute} in "
        "test_module_attribute: f(torch.ones(2))  # recompiles",
    ],
    "test_requires_grad": [
        "[1/1] recompiled double (test_hazards_user.py:{def double})",
        "    guard failed: 0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0",
        "    triggered by: test_hazards_user.py:{# recompiles@test_requires_grad} in "
        "test_requires_grad: f(torch.ones(2, requires_grad=True))  # recompiles",
    ],
    "test_dtype": [
        "[1/1] recompiled double (test_hazards_user.py:{def double})",
        "    guard failed: 0/0: tensor 'x' dtype mismatch. expected Float, actual Double",
        "    triggered by: test_hazards_user.py:{# recompiles@test_dtype} in test_dtype: "
        "f(torch.ones(2, dtype=torch.float64))  # recompiles",
    ],
    "test_train_eval": [
        "[1/1] recompiled Branchy.forward "
        "(compiled at test_hazards_user.py:{f = torch.compile(m@test_train_eval})",
        # self.training == True; ___check_obj_id(self.training, ...) up to torch 2.6
        "    guard failed: 0/0: *self.training*",
        "      guarded at: test_hazards_user.py:{return x + 1 if} in forward: "
        "return x + 1 if self.training else x - 1",
        "      usual fix: self.training is a Python bool flag*",
        "    triggered by: test_hazards_user.py:{# recompiles@test_train_eval} in test_train_eval: "
        "f(torch.ones(2))  # recompiles",
    ],
    "test_grad_mode": [
        "[1/1] recompiled double (test_hazards_user.py:{def double})",
        "    guard failed: 0/0: GLOBAL_STATE changed: grad_mode",
        "      usual fix: grad_mode changed since the compile (no_grad, autocast, a default dtype "
        "or device): *",
        "    triggered by: test_hazards_user.py:{# recompiles@test_grad_mode} in test_grad_mode: "
        "f(torch.ones(2))  # recompiles",
    ],
    "test_default_dtype": [
        "[1/1] recompiled double (test_hazards_user.py:{def double})",
        "    guard failed: 0/0: GLOBAL_STATE changed: default_dtype",
        "      usual fix: default_dtype changed since the compile (no_grad, autocast, "
        "a default dtype or device): *",
        "    triggered by: test_hazards_user.py:{# recompiles@test_default_dtype} in "
        "test_default_dtype: f(torch.ones(2, dtype=torch.float32))  # recompiles",
    ],
    "test_parameter_vs_tensor": [
        "[1/1] recompiled double (test_hazards_user.py:{def double})",
        # torch 2.13: "... to be a tensor type, ..."; 2.15: "... to be <class '...Parameter'>, but
        # found <class 'torch.Tensor'>".
        "    guard failed: 0/0: expected type of 'x' to be *",
        "    triggered by: test_hazards_user.py:{# recompiles@test_parameter_vs_tensor} in "
        "test_parameter_vs_tensor: f(torch.ones(2))  # recompiles",
    ],
    "test_recompile_in_helper": [
        "[1/1] recompiled scale (test_hazards_user.py:{def scale})",
        "    guard failed: 0/0: n == 2",
        "      guarded at: test_hazards_user.py:{return x * n} in scale: return x * n",
        "      usual fix: n is a Python int that changes*",
        "    triggered by: test_hazards_user.py:{# recompiles@call_twice} in call_twice: "
        "f(torch.ones(2), 5)  # recompiles",
    ],
    "test_recompile_in_thread": [
        "[1/1] recompiled double (test_hazards_user.py:{def double})",
        "    guard failed: 0/0: tensor 'x' dtype mismatch. expected Float, actual Double",
        "    in thread: worker",
    ],
}


def resolve_lines(lines: list[str], source: list[str]) -> list[str]:
    """Replace ``{text}`` by the number of the line holding text (``{text@func}``: within func;
    ``-1``: the line before)."""

    def line_number(match: re.Match[str]) -> str:
        text, _, function = match["text"].partition("@")
        start = (next(i for i, line in enumerate(source) if f"def {function}(" in line)
                 if function else 0)
        number = next(i for i in range(start, len(source)) if text in source[i]) + 1
        return str(number - int(match["minus"] or 0))

    return [re.sub(r"\{(?P<text>[^}]+)\}(?:-(?P<minus>\d))?", line_number, line) for line in lines]


def test_every_hazard_fails_and_names_its_guard(pytester: pytest.Pytester, run: RunPytest) -> None:
    source = pytester.makepyfile(test_hazards_user=HAZARDS).read_text().splitlines()
    result = run("-p", "no:logging")
    result.assert_outcomes(failed=len(EXPECTED))
    for test_name, lines in EXPECTED.items():
        expect_lines(result,
                     [f"*_ {test_name} _*",
                      "1 recompile > max_recompiles(0) (marker on module test_hazards_user.py)",
                      *resolve_lines(lines, source)])


CONTROLS = '''
import pytest, torch

def scale(x, n):
    return x * n

@pytest.mark.max_recompiles(0)
def test_same_inputs_many_calls():
    f = torch.compile(scale, backend="eager")
    for _ in range(20):
        f(torch.ones(4), 2)

@pytest.mark.max_recompiles(0)
def test_mark_dynamic_shapes():
    f = torch.compile(scale, backend="eager")
    for size in (2, 3, 4, 5):
        x = torch.ones(size)
        torch._dynamo.mark_dynamic(x, 0)
        f(x, 2)

@pytest.mark.max_recompiles(1)
def test_one_automatic_dynamic_recompile_allowed():
    f = torch.compile(scale, backend="eager")
    for size in (2, 3, 4, 5, 6):
        f(torch.ones(size), 2)
'''


def test_clean_controls_pass(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(CONTROLS)
    run().assert_outcomes(passed=3)


def test_automatic_dynamic_recompile_counts_once(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(CONTROLS.replace("max_recompiles(1)", "max_recompiles(0)"))
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=2, failed=1)
    expect_lines(result, ["1 recompile > max_recompiles(0) (marker on the test)",
                          "[1/1] recompiled scale (*)",
                          "    guard failed: 0/0: tensor 'x' size mismatch at index 0. "
                          "expected 2, actual 3"])


ORDER = '''
import pytest, torch

def scale(x, n):
    return x * n

compiled = torch.compile(scale, backend="eager")

@pytest.mark.max_recompiles(0)
def test_a():
    compiled(torch.ones(2), 2)

@pytest.mark.max_recompiles(0)
def test_b():
    compiled(torch.ones(2), 3)
'''


@pytest.mark.parametrize("order", [["test_a", "test_b"], ["test_b", "test_a"]])
def test_counts_do_not_depend_on_test_order(pytester: pytest.Pytester, run: RunPytest,
                                            order: list[str]) -> None:
    pytester.makepyfile(test_order=ORDER)
    result = run(*[f"test_order.py::{name}" for name in order])
    result.assert_outcomes(passed=2)


def test_without_isolation_an_earlier_compile_counts(pytester: pytest.Pytester,
                                                     run: RunPytest) -> None:
    # Proves isolation is what makes the order test pass: without the reset, test_b recompiles.
    pytester.makepyfile(test_order=ORDER)
    result = run("--nocompile-no-isolate", "-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    expect_lines(result, ["*_ test_b _*", "1 recompile > max_recompiles(0) (marker on the test)"])


def test_isolation_opt_out_by_marker_and_ini(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_order=ORDER.replace(
        "def test_b", "@pytest.mark.max_recompiles(0, isolate=False)\ndef test_b"))
    run("-p", "no:logging").assert_outcomes(passed=1, failed=1)
    pytester.makepyfile(test_order=ORDER)
    pytester.makeini("[pytest]\nnocompile_isolate = false\n")
    run("-p", "no:logging").assert_outcomes(passed=1, failed=1)


# The limit is config.recompile_limit from torch 2.7, config.cache_size_limit before.
LIMIT = f'''
import pytest, torch

def tag(x, name):
    return x + len(name)

@pytest.mark.max_recompiles(100)
def test_limit_hit():
    f = torch.compile(tag, backend="eager")
    with torch._dynamo.config.patch({LIMIT_CONFIG}=3):
        for name in ["a", "b", "c", "d", "e", "f"]:
            f(torch.ones(1), name)
'''


def test_recompile_limit_hit_fails_a_budgeted_test(pytester: pytest.Pytester,
                                                   run: RunPytest) -> None:
    pytester.makepyfile(LIMIT)
    result = run("-p", "no:logging")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        # a (first compile), b and c (recompiles), d refused at the limit: a limit hit, not a
        # recompile
        "2 recompiles within max_recompiles(100) (marker on the test), but dynamo hit its "
        "recompile limit",
        "[1/2] recompiled tag (*)",
        "    guard failed: 0/0: name == 'a'",
    ])
    expect_lines(result, [
        f"dynamo hit config.{LIMIT_CONFIG} (3) for 'tag' (*): later calls run uncompiled and log "
        "no recompiles, so the count above is a lower bound",
    ])
