"""max_syncs: device-to-host syncs, from torch's sync debug mode.

Without a GPU, torch never warns of a sync: a budgeted test runs, and the run
says once that syncs were not observed. What the plugin does with torch's
warnings is tested here too, by a stand-in for CUDA (``FAKE_CUDA``): torch's
sync-debug-mode getter and setter, and a synchronizing operation that warns
as c10 does (``TORCH_WARN``, the message torch's Python warning handler makes
of it), from a code object that claims a file in torch's folder, so that the
user's line is found as it is at a real sync. The same files run on a GPU in
tests/acceptance/test_cuda_syncs_kernels.py with real syncs.
"""

from __future__ import annotations

import json
import warnings

import pytest

from nocompile_testing import RunPytest, expect_lines
from pytest_nocompile.features.syncs.kind import SYNC_SIGNAL, sync_lines
from pytest_nocompile.features.syncs.sync_warnings import is_sync_warning
from pytest_nocompile.vocabulary.events import CodeLocation, HealthEvent

torch = pytest.importorskip("torch")

# What Python sees at a sync in "warn" mode: TORCH_WARN's text, and where in c10 it was raised.
TORCH_SYNC_WARNING = ("called a synchronizing CUDA operation (Triggered internally at "
                      "/pytorch/c10/cuda/CUDAFunctions.cpp:160.)")

FAKE_CUDA = f'''
import os
import warnings

import torch

MODE = [0]  # torch's sync debug mode: 0 default, 1 warn, 2 error
WARNED = []


def set_mode(mode):
    if not WARNED:  # TORCH_WARN_ONCE in torch's setter
        WARNED.append(True)
        warnings.warn("Synchronization debug mode is a prototype feature and does not yet detect "
                      "all synchronizing operations")
    MODE[0] = mode


torch._C._cuda_get_sync_debug_mode = lambda: MODE[0]
torch._C._cuda_set_sync_debug_mode = set_mode
torch.cuda.is_available = lambda: True
torch.cuda.set_sync_debug_mode = lambda mode: torch._C._cuda_set_sync_debug_mode(
    {{"default": 0, "warn": 1, "error": 2}}.get(mode, mode))
torch.cuda.get_sync_debug_mode = lambda: MODE[0]

# c10's warn_or_error_on_sync(), as a synchronizing operation of torch's own would call it.
SOURCE = """
def synchronize(value):
    if MODE[0] == 2:
        raise RuntimeError("called a synchronizing CUDA operation")
    if MODE[0] == 1:
        warnings.warn({TORCH_SYNC_WARNING!r}, UserWarning)
    return value
"""
namespace = {{"MODE": MODE, "warnings": warnings}}
exec(compile(SOURCE, os.path.join(os.path.dirname(torch.__file__), "cuda", "_synchronizing_op.py"),
             "exec"), namespace)
torch.fake_sync = namespace["synchronize"]
'''

SCHEDULER = '''
import pytest
import torch


class Scheduler:
    def __init__(self):
        self.timesteps = [3, 2, 1]

    def step(self, i):
        return torch.fake_sync(self.timesteps[i])


@pytest.fixture
def warmed_up():
    torch.fake_sync(0)


@pytest.mark.max_syncs(1)
def test_denoise(warmed_up):
    scheduler = Scheduler()
    for i in range(3):
        scheduler.step(i)
    torch.fake_sync(0)


@pytest.mark.max_syncs(0)
def test_none():
    pass
'''


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA observes syncs "
                                                      "(tests/acceptance/test_cuda_syncs.py)")
def test_on_cpu_a_budgeted_test_runs_and_the_run_says_once_that_syncs_were_not_observed(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_cpu='''
import pytest
import torch

@pytest.mark.max_syncs(0)
def test_marked():
    assert torch.ones(2).sum().item() == 2

def test_by_option():
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
''')
    result = run("-p", "no:randomly", "--max-syncs=0", "--nocompile-json=report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        # A CPU build says it is built without CUDA; a CUDA build on a machine without a GPU that
        # torch.cuda.is_available() is False.
        "*NotMeasuredWarning: test_cpu.py::test_marked: max_syncs(0) (marker on the test) is not "
        "checked: syncs were not observed: * Tests are judged on their other budgets; "
        "said once per run",
    ])
    output = result.stdout.str()
    assert output.count("syncs were not observed") == 1
    assert "0 syncs" not in output
    result.stdout.fnmatch_lines(
        ["compiles  recompiles  graph breaks  syncs  budget    verdict        test",
         "       1           0             0    n/a  syncs<=0  within budget  "
         "test_cpu.py::test_by_option"])
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert [(test["syncs"], test["max_syncs"], test["not_measured"]["syncs"][:26])
            for test in tests] == [
        (None, 0, "syncs were not observed: t")] * 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA observes syncs "
                                                      "(tests/acceptance/test_cuda_syncs.py)")
def test_on_cpu_a_block_assertion_says_once_per_run_that_syncs_were_not_observed(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_blocks_cpu='''
import pytest
import torch

from pytest_nocompile import assert_max_syncs


def test_plain_block():
    with assert_max_syncs(0):
        torch.ones(2).sum().item()


def test_fixture_block(nocompile_assert_max_syncs):
    with nocompile_assert_max_syncs(0):
        torch.ones(2).sum().item()


@pytest.mark.max_syncs(0)
def test_marked_after_them():
    pass
''')
    result = run("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*test_blocks_cpu.py:8: NotMeasuredWarning: assert_max_syncs(0) is not checked: "
        "syncs were not observed: * Tests are judged on their other budgets; said once per run",
    ])
    # not again for the fixture's block, nor the marker
    assert result.stdout.str().count("syncs were not observed") == 1
    # In a watched test, the test's name first, as for a marker.
    result = run("-p", "no:randomly", "test_blocks_cpu.py::test_fixture_block")
    result.stdout.fnmatch_lines(["*NotMeasuredWarning: test_blocks_cpu.py::test_fixture_block: "
                                 "nocompile_assert_max_syncs(0) is not checked: *"])


CPU_ONLY = pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="a machine with CUDA observes syncs (tests/acceptance/test_cuda_syncs.py)")

# A user's training loop on a CPU runner, its sync budget meant for the GPU runner; -W error is
# the CI's.
TRAINING_ON_CPU = '''
import pytest
import torch

from pytest_nocompile import assert_max_syncs


def train(steps):
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        loss = model(torch.randn(2, 4)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        assert loss.item() >= 0  # a sync at every step, on a GPU


@pytest.mark.parametrize("steps", [2, 3])
@pytest.mark.max_recompiles(0)
@pytest.mark.max_syncs(0)
def test_train(steps):
    train(steps)


def test_block():
    with assert_max_syncs(0):
        train(2)
'''


def _no_test_fails_for_the_not_measured_notice(result: pytest.RunResult) -> None:
    """A not-measured gate under warnings as errors: every test passes, and the run says so once,
    as a summary line."""
    result.assert_outcomes(passed=3)
    output = result.stdout.str()
    for unwanted in ("warnings summary", "NotMeasuredWarning", "Traceback"):
        assert unwanted not in output
    result.stdout.fnmatch_lines([
        "nocompile: test_train.py::test_train[[]2]: max_syncs(0) (marker on the test) is not "
        "checked: syncs were not observed: * Tests are judged on their other budgets; said once "
        "per run (here: this run makes warnings errors)",
    ])
    # Not again for the block, nor the second case.
    assert output.count("syncs were not observed") == 1


@CPU_ONLY
def test_under_w_error_a_gate_not_measured_fails_no_test_and_is_said_once_in_the_summary(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_train=TRAINING_ON_CPU)
    _no_test_fails_for_the_not_measured_notice(run("-p", "no:randomly", "-W", "error"))
    # A filter naming the plugin's warning asks for the failure: the first test it is said in
    # fails, as a warning made an error does (said once per run, so not the others).
    error = "error::pytest_nocompile.NotMeasuredWarning"
    result = run("-p", "no:randomly", "-W", error)
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(
        ["NotMeasuredWarning: test_train.py::test_train[[]2]: max_syncs(0) *"])
    assert "Traceback" not in result.stdout.str()
    assert "(here: this run makes warnings errors)" not in result.stdout.str()
    # The block alone, outside any watched test: said the same way.
    result = run("-p", "no:randomly", "-W", "error", "test_train.py::test_block")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["nocompile: assert_max_syncs(0) is not checked: syncs were not "
                                 "observed: * said once per run (here: *)"])


@CPU_ONLY
def test_under_ini_filterwarnings_error_a_gate_not_measured_fails_no_test_in_xdist_workers_too(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_train=TRAINING_ON_CPU)
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    _no_test_fails_for_the_not_measured_notice(run("-p", "no:randomly"))
    pytest.importorskip("xdist")
    # A worker says it: the controller's summary shows it.
    result = run("-p", "no:randomly", "-p", "xdist", "-n", "1")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["nocompile: test_train.py::test_train[[]2]: max_syncs(0) "
                                 "(marker on the test) is not checked: *"])
    assert result.stdout.str().count("syncs were not observed") == 1


@CPU_ONLY
def test_the_not_measured_warning_points_at_the_marker_that_asked_for_the_gate(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_train=TRAINING_ON_CPU + '''

class TestSteps:
    pytestmark = pytest.mark.max_syncs(0)

    def test_in_class(self):
        train(1)
''')
    result = run("-p", "no:randomly", "test_train.py::test_train")
    result.assert_outcomes(passed=2)
    # Line 20: @pytest.mark.max_syncs(0), under the parametrize and max_recompiles decorators.
    result.stdout.fnmatch_lines([
        "  test_train.py:20: NotMeasuredWarning: test_train.py::test_train[[]2]: max_syncs(0) *",
        "    @pytest.mark.max_syncs(0)"])
    # A class's marker: the test's def line (the message names the class).
    result = run("-p", "no:randomly", "test_train.py::TestSteps")
    result.stdout.fnmatch_lines([
        "  test_train.py:33: NotMeasuredWarning: *: max_syncs(0) (marker on class TestSteps) *",
        "    def test_in_class(self):"])


def test_each_sync_is_counted_and_listed_by_the_users_line_and_a_fixtures_shown_not_counted(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makeconftest(FAKE_CUDA)
    pytester.makepyfile(test_sched=SCHEDULER)
    # an error filter does not turn a counted sync into a crash
    result = run("-p", "no:randomly", "-W", "error")
    result.assert_outcomes(failed=1, passed=1)
    expect_lines(result, [
        "4 syncs > max_syncs(1) (marker on the test)",
        "3 × test_sched.py:10 in step: return torch.fake_sync(self.timesteps[i])",
        "1 × test_sched.py:23 in test_denoise: torch.fake_sync(0)",
        "not counted (in fixtures, outside the call phase): 1 sync",
        "1 × test_sched.py:15 in warmed_up: torch.fake_sync(0)",
    ])
    result.stdout.fnmatch_lines(["test_sched.py::test_denoise: 3 × test_sched.py:10 in step: "
                                 "return torch.fake_sync(self.timesteps[i])"])
    # nothing shown that the user did not ask for
    assert "warnings summary" not in result.stdout.str()


USERS_OWN = '''
import warnings

import pytest
import torch

from conftest import MODE

SHOW = warnings._showwarnmsg


@pytest.mark.max_syncs(0)
def test_sees_its_own_mode():
    assert MODE[0] == 1  # torch warns, for the plugin
    assert torch.cuda.get_sync_debug_mode() == 0  # the user's, as the test reads it


@pytest.mark.max_syncs(5)
def test_sets_warn_itself():
    torch.cuda.set_sync_debug_mode("warn")
    torch.fake_sync(0)  # counted, and shown: the user asked torch to warn


def test_after_them():
    assert MODE[0] == 1  # the mode the last test set, left to it
    assert warnings._showwarnmsg is SHOW
    assert not any("synchronizing" in str(entry[1]) for entry in warnings.filters)
    # none waits for CUDA
    assert not [call for call, _ in torch.cuda._queued_calls
                if call.__module__.startswith("pytest_nocompile")]
    torch.cuda.set_sync_debug_mode("default")
'''


def test_the_users_mode_and_warning_filters_are_theirs_and_a_mode_they_set_is_kept(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makeconftest(FAKE_CUDA)
    pytester.makepyfile(test_own=USERS_OWN)
    # no report: the last test is not watched, and sees what the others left
    result = run("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["test_own.py::test_sets_warn_itself",
                                 "  *: UserWarning: called a synchronizing CUDA operation*"])
    result.stdout.fnmatch_lines(
        ["compiles  recompiles  graph breaks  syncs  budget    verdict        test",
         "       0           0             0      1  syncs<=5  within budget  "
         "test_own.py::test_sets_warn_itself"])


def test_a_report_counts_the_syncs_of_every_test_though_none_compiles(pytester: pytest.Pytester,
                                                                      run: RunPytest) -> None:
    pytester.makeconftest(FAKE_CUDA)
    pytester.makepyfile(
        test_plain="import torch\n\n\ndef test_unbudgeted():\n    torch.fake_sync(0)\n")
    result = run("--nocompile-json=report.json")
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert (test["syncs"], test.get("not_measured")) == (1, None)


BLOCKS = '''
import multiprocessing

import pytest
import torch

from pytest_nocompile import SyncBudgetExceeded, assert_max_syncs


def test_plain_block():
    with pytest.raises(SyncBudgetExceeded, match=r"^2 syncs > assert_max_syncs\\(1\\)\\n"
                                                 r"2 × test_blocks.py:14 in test_plain_block: "):
        with assert_max_syncs(1):
            for _ in range(2):
                torch.fake_sync(0)
    torch.fake_sync(0)  # after the block: nothing counts it, nothing shows it


def test_fixture_block(nocompile_assert_max_syncs):
    with nocompile_assert_max_syncs(0):
        pass
    with pytest.raises(SyncBudgetExceeded):
        with nocompile_assert_max_syncs(0):
            torch.fake_sync(0)


def sync_twice():
    torch.fake_sync(0)
    torch.fake_sync(1)


@pytest.mark.max_syncs(0)
def test_forked_child():
    child = multiprocessing.get_context("fork").Process(target=sync_twice)
    child.start()
    child.join(60)
    assert child.exitcode == 0
'''


def test_block_assertions_count_their_block_and_a_child_process_counts_its_own(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makeconftest(FAKE_CUDA)
    pytester.makepyfile(test_blocks=BLOCKS)
    result = run("-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "pid * (*): 2 syncs > max_syncs(0) (marker on the test)",
        "1 × test_blocks.py:27 in sync_twice: torch.fake_sync(0)",
        "1 × test_blocks.py:28 in sync_twice: torch.fake_sync(1)",
    ])
    assert "warnings summary" not in result.stdout.str()


def sync(user_line: int | None, thread: str | None = None, phase: str = "call") -> HealthEvent:
    where = None if user_line is None else CodeLocation("/work/sched.py", user_line,
                                                        "step", f"line {user_line}")
    return HealthEvent(SYNC_SIGNAL, 1, user_code=where, thread=thread,
                       phase=phase)  # type: ignore[arg-type]


def test_syncs_are_grouped_by_line_and_thread_first_seen_first() -> None:
    events = [sync(88), sync(12), sync(88), sync(88, "loader"), sync(None), sync(88)]
    assert sync_lines(events) == [
        "3 × /work/sched.py:88 in step: line 88",
        "1 × /work/sched.py:12 in step: line 12",
        "1 × /work/sched.py:88 in step: line 88 (in thread loader)",
        "1 × (no line outside torch on the stack)",
    ]


def test_torchs_sync_warning_is_told_from_other_warnings() -> None:
    assert is_sync_warning(TORCH_SYNC_WARNING, UserWarning)
    assert is_sync_warning(
        warnings.WarningMessage(TORCH_SYNC_WARNING, UserWarning, "x.py", 1).message, UserWarning)
    assert not is_sync_warning(TORCH_SYNC_WARNING, DeprecationWarning)
    assert not is_sync_warning("an operation called a synchronizing CUDA operation", UserWarning)


# dynamo's frame compile, as compiling_code finds it: _compile(code, ...) in a file ending in
# _dynamo/convert_frame.py.
COMPILING = '''
import os
import pytest
import torch

SOURCE = """
def _compile(code, value):
    return torch.fake_sync(value)
"""
namespace = {"torch": torch}
exec(compile(SOURCE, os.path.join(os.path.dirname(torch.__file__), "_dynamo", "convert_frame.py"),
             "exec"), namespace)

def step(value):
    return torch.fake_sync(value)

@pytest.mark.max_syncs(1)
def test_step_after_its_compile():
    namespace["_compile"](step.__code__, 1)  # inductor's own sync, while a frame compiles
    namespace["_compile"](step.__code__, 2)
    step(3)  # the step's own
'''


def test_a_sync_made_while_a_frame_compiles_is_shown_not_counted(pytester: pytest.Pytester,
                                                                 run: RunPytest) -> None:
    pytester.makeconftest(FAKE_CUDA)
    pytester.makepyfile(test_compiling=COMPILING)
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert (test["syncs"], test["syncs_while_compiling"]) == (1, {"compile_sync": 2})
    pytester.makepyfile(test_compiling=COMPILING.replace("max_syncs(1)", "max_syncs(0)"))
    result = run("-p", "no:randomly", "-p", "no:logging")
    result.assert_outcomes(failed=1)
    expect_lines(result, ["1 sync > max_syncs(0) (marker on the test)",
                          "    not counted: 2 while dynamo compiled",
                          "1 × test_compiling.py:14 in step: return torch.fake_sync(value)"])
