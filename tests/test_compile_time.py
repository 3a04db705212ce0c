"""Compile-time budgets: max_compile_seconds (with its breakdown) and max_compile_instructions
(where torch can count them).

The seconds come from torch's compilation metrics, one entry per frame
compiled, read as each is recorded (features/compile_cost/compile_metrics.py); tests about
the plugin compile with backend="eager" (dynamo's own time). One test runs a
real inductor compile, cold, to show inductor's part in the breakdown.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from nocompile_testing import TORCH, RunPytest, expect_lines
from pytest_nocompile.features.compile_cost.compile_metrics import compile_seconds
from pytest_nocompile.features.compile_cost.kinds import (
    COMPILE_INSTRUCTIONS_KIND,
    COMPILE_SECONDS_KIND,
    breakdown_text,
)
from pytest_nocompile.judge.budget import BudgetUsageError, budget_from_marker, parse_option_count
from pytest_nocompile.judge.torch_support import too_old_for
from pytest_nocompile.vocabulary.kinds import RECOMPILES
from pytest_nocompile.vocabulary.measures import format_seconds

COMPILE_ONCE = '''
import pytest, torch

def scale(x, n):
    return x * n

def compile_once():
    torch.compile(scale, backend="eager")(torch.ones(2), 2)
'''


# -- pure: the measure, the text, the breakdown of torch's entries ------------

def test_seconds_take_any_number_and_counts_stay_ints() -> None:
    assert budget_from_marker((0.5,), {}, COMPILE_SECONDS_KIND).count == 0.5
    assert budget_from_marker((3,), {}, COMPILE_SECONDS_KIND).count == 3
    for bad, why in ((-1, "got -1"), ("1", "got '1' (str)"), (True, "got True (bool)"),
                     (float("nan"), "got nan")):
        with pytest.raises(BudgetUsageError) as raised:
            budget_from_marker((bad,), {}, COMPILE_SECONDS_KIND)
        assert f"expected a number of seconds >= 0 (an int or a float), {why}" in str(raised.value)
        assert str(raised.value).endswith("use @pytest.mark.max_compile_seconds(S), "
                                          "S a number of seconds >= 0 (an int or a float) or None")
    with pytest.raises(BudgetUsageError,
                       match=r"max_recompiles\(0\.5\): expected an int >= 0, got 0\.5 \(float\)"):
        budget_from_marker((0.5,), {}, RECOMPILES)
    with pytest.raises(BudgetUsageError,
                       match=r"max_compile_instructions\(0\.5\): expected an int >= 0"):
        budget_from_marker((0.5,), {}, COMPILE_INSTRUCTIONS_KIND)
    assert parse_option_count(" 2.5 ", "--max-compile-seconds", COMPILE_SECONDS_KIND.measure) == 2.5
    with pytest.raises(BudgetUsageError,
                       match=r"--max-compile-seconds: expected a number of seconds >= 0 .*got 'x'"):
        parse_option_count("x", "--max-compile-seconds", COMPILE_SECONDS_KIND.measure)
    with pytest.raises(BudgetUsageError,
                       match=r"--max-recompiles: expected an int >= 0, got '0.5'"):
        parse_option_count("0.5", "--max-recompiles")


def test_seconds_read_with_their_unit_and_three_figures_at_most() -> None:
    assert [format_seconds(s) for s in (0, 0.0004, 0.0716, 0.18, 8.349, 38.01)] == [
        "0 s", "0.4 ms", "71.6 ms", "0.18 s", "8.35 s", "38.0 s"]
    assert (COMPILE_SECONDS_KIND.headline(38.01, 0, "max_compile_seconds(0)")
            == "38.0 s of compile time > max_compile_seconds(0)")
    assert COMPILE_INSTRUCTIONS_KIND.headline(12345678, 1000, "max_compile_instructions(1000)") == (
        "12,345,678 compile instructions > max_compile_instructions(1000)")


def test_each_torch_versions_entries_break_down_into_parts_that_add_up() -> None:
    # torch 2.13 (and 2.6 on): microsecond columns, nested (backend inside dynamo, inductor inside
    # the backend).
    frame = SimpleNamespace(co_name="f", is_forward=True, entire_frame_compile_time_s=38.0,
                            backend_compile_time_s=37.9, inductor_compile_time_s=36.4,
                            aot_autograd_cumulative_compile_time_us=37_900_000,
                            inductor_cumulative_compile_time_us=36_400_000,
                            compile_time_autotune_time_us=400_000)
    measured = compile_seconds(frame)
    assert measured is not None
    total, parts, what = measured
    assert (total, what) == (38.0, "f")
    assert {name: round(seconds, 6) for name, seconds in parts.items()} == {
        "compile_seconds.dynamo": 0.1, "compile_seconds.aot_autograd": 1.5,
        "compile_seconds.inductor": 36.0, "compile_seconds.autotune": 0.4}
    assert (breakdown_text(parts)
            == "dynamo 0.10 s, AOT autograd 1.50 s, inductor 36.0 s, autotuning 0.40 s")
    backward = SimpleNamespace(is_forward=False, duration_us=1_330_603,
                               backward_cumulative_compile_time_us=1_330_603)
    assert compile_seconds(backward) == (
        1.330603, {"compile_seconds.backward": 1.330603}, "backward")
    # torch 2.4 and 2.5: seconds only, a backward of its own class, and a failed frame's time before
    # it gave up.
    BwdCompilationMetrics = type("BwdCompilationMetrics", (), {"inductor_compile_time_s": 1.25})
    assert compile_seconds(BwdCompilationMetrics()) == (
        1.25, {"compile_seconds.backward": 1.25}, "backward")
    failed = SimpleNamespace(co_name="g", entire_frame_compile_time_s=None,
                             backend_compile_time_s=None, dynamo_time_before_restart_s=0.5)
    assert compile_seconds(failed) == (0.5, {"compile_seconds.dynamo": 0.5,
                                             "compile_seconds.aot_autograd": 0.0,
                                             "compile_seconds.inductor": 0.0,
                                             "compile_seconds.autotune": 0.0}, "g")
    # torch 2.7 on: run-time entries; only autotuning is compile work.
    assert compile_seconds(
        SimpleNamespace(is_runtime=True, runtime_triton_autotune_time_us=2_000_000)) == (
        2.0, {"compile_seconds.autotune": 2.0}, "autotuning at run time")
    assert compile_seconds(SimpleNamespace(is_runtime=True, runtime_cudagraphify_time_us=5)) is None


def test_a_kind_needing_a_newer_torch_names_the_first_version_that_has_it() -> None:
    assert too_old_for(COMPILE_INSTRUCTIONS_KIND, "2.4.1+cu121") == (
        "max_compile_instructions needs torch >= 2.5, the first whose dynamo counts compile "
        "instructions; torch 2.4.1+cu121 is installed")
    assert too_old_for(COMPILE_INSTRUCTIONS_KIND, "2.5.0") is None
    assert too_old_for(COMPILE_INSTRUCTIONS_KIND, "not installed") is None
    # every supported torch records compile times
    assert too_old_for(COMPILE_SECONDS_KIND, "2.4.0") is None


# -- the source, in this process, with the real torch -------------------------

def test_the_source_reports_each_frame_as_torch_records_it_and_puts_torchs_deque_back() -> None:
    torch = pytest.importorskip("torch")
    import torch._dynamo.utils as dynamo_utils

    from pytest_nocompile.features.compile_cost.compile_metrics import CompileMetricsSource

    seen: list[tuple[Any, ...]] = []
    torchs = dynamo_utils._compilation_metrics
    source = CompileMetricsSource(lambda *args: seen.append(args),
                                  lambda: CompileMetricsSource.signals)
    source.arm()
    try:
        torch._dynamo.reset()
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
        # user code may: what is reported is reported as it happens
        dynamo_utils.clear_compilation_metrics()
        torch.compile(lambda x: x * 3, backend="eager")(torch.ones(2))
    finally:
        source.disarm()
    # torch's own deque, with what was recorded while armed
    assert dynamo_utils._compilation_metrics is torchs
    assert len(torchs) >= 1
    totals = [args for args in seen if args[0] == "compile_seconds"]
    assert len(totals) == 2 and all(isinstance(args[1], float) and args[1] > 0 for args in totals)
    assert all(str(args[2]).startswith("<lambda>: dynamo ") for args in totals), totals
    parts = [args for args in seen if args[0] == "compile_seconds.dynamo"]
    # dynamo's part is most of a frame's time with the eager backend, never more (a loaded machine
    # widens the rest)
    dynamo, total = sum(args[1] for args in parts), sum(args[1] for args in totals)
    assert len(parts) == 2 and 0.5 * total <= dynamo <= total + 1e-6


def test_a_torch_without_the_metrics_record_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import torch._dynamo.utils as dynamo_utils

    from pytest_nocompile.features.compile_cost.compile_metrics import (
        CompileMetricsSource,
        compile_time_not_measured,
    )

    assert compile_time_not_measured() is None
    monkeypatch.delattr(dynamo_utils, "_compilation_metrics")
    assert ("keeps no torch._dynamo.utils._compilation_metrics, "
            "where the plugin reads each compile's time") in str(compile_time_not_measured())
    source = CompileMetricsSource(lambda *args: None, lambda: CompileMetricsSource.signals)
    source.arm()  # nothing to hook: arms nothing, and disarming puts nothing back
    source.disarm()
    assert not hasattr(dynamo_utils, "_compilation_metrics")


def test_the_instruction_probe_prints_nothing_and_switches_torch_on_only_while_armed(
        capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    if TORCH < (2, 5):
        pytest.skip("torch < 2.5 has no compile instruction counter")
    import torch._dynamo.config as dynamo_config

    from pytest_nocompile.features.compile_cost.instruction_counter import (
        InstructionCounting,
        instruction_counter_problem,
    )

    instruction_counter_problem.cache_clear()
    counting = InstructionCounting()
    counting.arm()
    works = instruction_counter_problem() is None
    assert dynamo_config.record_compile_time_instruction_count is works
    counting.disarm()
    assert dynamo_config.record_compile_time_instruction_count is False
    # torch's C code says its failure on fd 2: captured, not shown
    assert capfd.readouterr() == ("", "")
    if not works:
        assert ("could not open a perf event to count instructions"
                in str(instruction_counter_problem()))


def test_instructions_are_read_as_deltas_that_survive_a_clear_and_the_counter_is_put_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Where perf events work, torch adds each compile's count to a class attribute; here it is added
    # by hand.
    pytest.importorskip("torch")
    if TORCH < (2, 5):
        pytest.skip("torch < 2.5 has no compile instruction counter")
    import torch._dynamo.config as dynamo_config
    from torch._dynamo.utils import CompileTimeInstructionCounter as counter

    from pytest_nocompile.features.compile_cost import instruction_counter

    monkeypatch.setattr(instruction_counter, "instruction_counter_problem", lambda: None)
    monkeypatch.setattr(counter, "_counter", 7)  # what earlier user code counted
    counting = instruction_counter.InstructionCounting()
    counting.arm()
    assert dynamo_config.record_compile_time_instruction_count is True
    counter._counter += 500
    assert counting.take() == 500 and counting.take() == 0
    counter.clear()  # as torch's benchmarks do
    counter._counter += 100
    assert counting.take() == 100
    counter._counter += 2**64 - 1  # torch's end(-1) after a failed start: not a count
    assert counting.take() is None
    counting.disarm()
    assert dynamo_config.record_compile_time_instruction_count is False and counter._counter == 7


# -- what users see -----------------------------------------------------------

def test_a_generous_bound_passes_and_a_bound_of_zero_fails_with_the_breakdown(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_time=COMPILE_ONCE + '''
# minutes of slack on a loaded machine: dynamo alone takes ~0.1 s
@pytest.mark.max_compile_seconds(120)
def test_generous():
    compile_once()

@pytest.mark.max_compile_seconds(0)
def test_zero():
    compile_once()
''')
    result = run("--nocompile-json=report.json")
    result.assert_outcomes(passed=1, failed=1)
    expect_lines(result, [
        "* of compile time > max_compile_seconds(0) (marker on the test)",
        "    breakdown: dynamo *",
        "[1/1] compile_seconds (*)*",
        "    reason: scale: dynamo *",
        "    triggered by: test_time.py:7 in compile_once: torch.compile(scale, "
        "backend=\"eager\")(torch.ones(2), 2)",
    ])
    result.stdout.re_match_lines([
        r"compiles  recompiles  graph breaks  compile s  budget +verdict +test",
        r" +1 +0 +0 +\d+\.\d\d  compile s<=0 +over budget +test_time\.py::test_zero"])
    tests = {test["nodeid"]: test
             for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    zero = tests["test_time.py::test_zero"]
    assert zero["max_compile_seconds"] == 0 and zero["over_budget"] == ["compile_seconds"]
    assert (0 < zero["compile_seconds"] < 120
            and round(zero["compile_seconds"], 3) == zero["compile_seconds"])
    assert zero["compile_seconds_breakdown"]["compile_seconds.dynamo"] > 0
    assert tests["test_time.py::test_generous"]["verdict"] == "within budget"


def test_seconds_budgets_from_the_option_and_a_block(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_time=COMPILE_ONCE + '''
from pytest_nocompile import CompileTimeBudgetExceeded, assert_max_compile_seconds

@pytest.mark.max_compile_seconds(None)  # out of the run's budget: only its blocks judge it
def test_block():
    with pytest.raises(CompileTimeBudgetExceeded) as raised:
        with assert_max_compile_seconds(0):
            compile_once()
    lines = str(raised.value).splitlines()
    assert lines[0].endswith(" of compile time > assert_max_compile_seconds(0)"), lines
    assert lines[1].startswith("    breakdown: dynamo "), lines
    with assert_max_compile_seconds(120.5):
        torch.compile(lambda x: x - 1, backend="eager")(torch.ones(2))

def test_run_wide():
    compile_once()
''')
    result = run("-v", "--max-compile-seconds=0.0")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["* of compile time > max_compile_seconds(0.0) (from --max-compile-seconds)"])
    assert "test_time.py::test_block PASSED" in result.stdout.str()


def test_a_child_processs_compile_time_counts_for_it(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_child='''
import subprocess, sys, pytest

CHILD = "import torch; torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))"

@pytest.mark.max_compile_seconds(0)
def test_child_compiles():
    subprocess.run([sys.executable, "-c", CHILD], check=True)
''')
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([
        r"pid \d+ \(python -c 'import torch; .*\): .* of compile time > max_compile_seconds\(0\) "
        r"\(marker on the test\)",
        r"    breakdown: dynamo .*"])


def test_bad_seconds_markers_are_usage_errors_naming_the_test_and_the_form(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.max_compile_seconds("1")
def test_text():
    pass

@pytest.mark.max_recompiles(0.5)
def test_float_count():
    pass
''')
    result = run()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([
        "invalid max_compile_seconds marker on test_bad.py::test_text: max_compile_seconds('1'): "
        "expected a number of seconds >= 0 "
        "(an int or a float), got '1' (str); use @pytest.mark.max_compile_seconds(S), "
        "S a number of seconds >= 0 (an int or a float) or None",
    ])
    result.stdout.fnmatch_lines(["invalid max_recompiles marker on test_bad.py::test_float_count: "
                                 "max_recompiles(0.5): expected an int >= 0, "
                                 "got 0.5 (float); use @pytest.mark.max_recompiles(N)*"])
    usage = run("--max-compile-seconds=-1")
    assert usage.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--max-compile-seconds: expected a number of seconds >= 0 (an int or a float), got -1"
            in usage.stderr.str())


def test_an_instruction_budget_counts_where_torch_can_and_says_once_where_it_cannot(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    if TORCH < (2, 5):
        pytest.skip("torch < 2.5: the marker is a usage error "
                    "(test_a_kind_needing_a_newer_torch_names_the_first_version_that_has_it)")
    # Asked in a process of its own: pytester drops the modules a test imported, and torch cannot be
    # imported twice.
    probe = ("import torch._dynamo; "
             "from pytest_nocompile.features.compile_cost.instruction_counter "
             "import instruction_counter_problem as p; print(p())")
    counted_here = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                  check=True).stdout.strip() == "None"
    pytester.makepyfile(test_instructions=COMPILE_ONCE + '''
@pytest.mark.max_compile_instructions(0)
def test_first():
    compile_once()

@pytest.mark.max_compile_instructions(0)
def test_second():
    compile_once()
''')
    result = run()
    if counted_here:  # a machine with perf events: counted, and over
        result.assert_outcomes(failed=2)
        result.stdout.fnmatch_lines(
            ["* compile instructions > max_compile_instructions(0) (marker on the test)"])
        return
    result.assert_outcomes(passed=2, warnings=1)  # judged on what is counted; said once
    result.stdout.fnmatch_lines([
        "*CompileTimeWarning: test_instructions.py::test_first: "
        "max_compile_instructions(0) (marker on the test) is not checked: "
        "torch * could not open a perf event to count instructions (*). Tests are judged on their "
        "other budgets*said once per run",
    ])


# A future torch that renamed the fields of its metrics entries: the class has none of the names
# the plugin reads a frame's time from, and its entries hold no time under them.
TIME_FIELDS_RENAMED = """
import torch._dynamo.utils as dynamo_utils

RENAMED = ("entire_frame_compile_time_s", "duration_us", "dynamo_time_before_restart_s")
entry_class = dynamo_utils.CompilationMetrics
for name in RENAMED:
    entry_class.__dataclass_fields__.pop(name, None)
made = entry_class.__init__

def without_them(self, *args, **kwargs):
    made(self, *args, **kwargs)
    for name in RENAMED:
        object.__setattr__(self, name, None)

entry_class.__init__ = without_them
"""


def test_metrics_whose_time_fields_were_renamed_leave_compile_time_not_measured(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(TIME_FIELDS_RENAMED)
    pytester.makepyfile(test_renamed=COMPILE_ONCE + '''
@pytest.mark.max_compile_seconds(0)
def test_timed():
    compile_once()
''')
    result = run("--nocompile-json=report.json")
    result.assert_outcomes(passed=1, warnings=1)  # never 0 seconds within the budget: not measured
    result.stdout.fnmatch_lines([
        "*CompileTimeWarning: test_renamed.py::test_timed: max_compile_seconds(0) (marker on the "
        "test) is not checked: torch *'s torch._dynamo.utils.CompilationMetrics has none of the "
        "fields entire_frame_compile_time_s, duration_us, dynamo_time_before_restart_s, where the "
        "plugin reads each compile's time (a field renamed)*"])
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert entry["compile_seconds"] is None and entry["compiles"] == 1


def test_a_real_inductor_compile_shows_inductor_in_the_breakdown(
        pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch) -> None:
    # The one test that pays for inductor (seconds, cold): a private cache folder, so nothing is a
    # cache hit.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", os.fspath(pytester.path / "inductor-cache"))
    pytester.makepyfile(test_inductor='''
import pytest, torch

def wave(x):
    return (x.sin() * 2 + 1).sum()

@pytest.mark.max_compile_seconds(0)
def test_inductor():
    torch.compile(wave)(torch.ones(3))
''')
    result = run()
    result.assert_outcomes(failed=1)
    expect_lines(result, ["* of compile time > max_compile_seconds(0) (marker on the test)",
                          "    breakdown: dynamo *, AOT autograd *, inductor *"])
