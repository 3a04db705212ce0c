"""Which health sources arm: only those whose signals the run reads (a budget, a block assertion, a
report), and all in a child.

A watched test in a run that budgets no compile-health kind pays for no
health source but the swallowed-error one (every watched test reports those).
The inner tests look at torch's own objects while their test is watched: the
class of ``counters``' default factory, the metrics deque, the CUDA-graph and
cache loggers.
"""

from __future__ import annotations

import json

import pytest
from test_syncs import FAKE_CUDA

from nocompile_testing import TORCH, RunPytest

pytest.importorskip("torch")

SOURCES_SEEN = '''
import collections, logging, sys, warnings
import pytest, torch, torch._dynamo
import torch._dynamo.utils as dynamo_utils


def armed_sources():
    """The health sources armed now, by what they leave in torch while armed."""
    armed = set()
    if dynamo_utils.counters.default_factory is not collections.Counter:
        armed.add("counters")
    if type(dynamo_utils._compilation_metrics) is not collections.deque:
        armed.add("compile metrics")
    if "info" in vars(logging.getLogger("torch._inductor.codecache")):
        armed.add("cache bypass reasons")
    if logging.getLogger("torch._inductor.cudagraph_trees.__cudagraphs").filters:
        armed.add("cudagraph logs")
    if logging.getLogger("torch._dynamo.convert_frame").handlers:
        armed.add("convert_frame warnings")  # recompile-limit hits and swallowed compile errors
    metrics = sys.modules.get("torch._inductor.metrics")
    if (metrics is not None
            and vars(metrics.CachedMetricsHelper)["get_deltas"].__module__ != metrics.__name__):
        armed.add("kernel counts")
    if warnings._showwarnmsg.__module__ != "warnings":
        armed.add("sync warnings")
    return armed


def scale(x, n):
    return x * n
'''


def test_a_run_that_budgets_no_health_kind_arms_no_health_source_but_the_swallowed_errors_handler(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_sources=SOURCES_SEEN + '''
def test_recompile_budget_only():
    assert armed_sources() == {"convert_frame warnings"}
    torch.compile(scale, backend="eager")(torch.ones(2), 2)

@pytest.mark.max_compile_seconds(100)
def test_compile_time_budget():
    assert armed_sources() == {"compile metrics", "convert_frame warnings"}

@pytest.mark.max_cache_misses(5)
def test_cache_budget():
    assert armed_sources() == {"counters", "compile metrics", "cache bypass reasons",
                               "convert_frame warnings"}
''')
    # One process, in this order: a budget of a later test arms its sources from that test on.
    tests = ["test_recompile_budget_only", "test_compile_time_budget",
             "test_cache_budget"][: 3 if TORCH >= (2, 5) else 2]
    result = run("-p", "no:randomly", "--max-recompiles=0",
                 *(f"test_sources.py::{name}" for name in tests))
    result.assert_outcomes(passed=len(tests))


def test_a_report_arms_every_source_and_holds_every_tests_compile_time(pytester: pytest.Pytester,
                                                                       run: RunPytest) -> None:
    pytester.makepyfile(test_sources=SOURCES_SEEN + '''
def test_compiles():
    assert armed_sources() == {"counters", "compile metrics", "cache bypass reasons",
                               "cudagraph logs", "kernel counts",
                               "convert_frame warnings"}  # syncs too where torch has CUDA
    torch.compile(scale, backend="eager")(torch.ones(2), 2)
''')
    result = run("--nocompile-json=report.json")
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert "compile_seconds" in {event["what"] for event in test["health_events"]}


def test_the_kernel_and_sync_sources_arm_from_the_first_test_that_reads_them(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(FAKE_CUDA)  # the sync source arms only where torch has CUDA
    pytester.makepyfile(test_sources=SOURCES_SEEN + '''
def test_neither():
    assert not {"kernel counts", "sync warnings"} & armed_sources()

@pytest.mark.max_kernels(5)
def test_kernel_budget():
    assert armed_sources() == {"kernel counts", "convert_frame warnings"}

@pytest.mark.max_syncs(5)
def test_sync_budget():
    assert armed_sources() == {"kernel counts", "sync warnings", "convert_frame warnings"}
''')
    result = run("-p", "no:randomly", "--max-recompiles=0")
    result.assert_outcomes(passed=3)


def test_a_block_assertion_of_a_health_kind_arms_its_source_in_a_run_that_budgets_none(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_sources=SOURCES_SEEN + '''
from pytest_nocompile import CompileTimeBudgetExceeded, assert_max_compile_seconds

def test_block():
    assert armed_sources() == {"convert_frame warnings"}
    with pytest.raises(CompileTimeBudgetExceeded,
                       match=r"of compile time > assert_max_compile_seconds\\(0\\.0\\)"):
        with assert_max_compile_seconds(0.0):
            assert "compile metrics" in armed_sources()
            torch.compile(scale, backend="eager")(torch.ones(2), 2)

def test_fixture(nocompile_assert_max_compile_seconds):
    with pytest.raises(CompileTimeBudgetExceeded):
        with nocompile_assert_max_compile_seconds(0.0):
            torch.compile(scale, backend="eager")(torch.ones(2), 3)
''')
    result = run("-p", "no:randomly", "--max-recompiles=5")
    result.assert_outcomes(passed=2)


def test_a_pytest_run_started_by_a_watched_test_reports_every_signal_its_test_reads(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    # The inner run budgets recompiles only; its parent test budgets compile time. The inner run
    # imports dynamo in its test's call, after its collection: only a capture that kept every
    # source reports the compile's time to the parent.
    pytester.makepyfile(test_inner='''
def test_compiles():
    import torch
    torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2))
''')
    pytester.makepyfile(test_outer='''
import os, subprocess, sys
import pytest

@pytest.mark.max_compile_seconds(0)
def test_outer():
    inner = subprocess.run([sys.executable, "-m", "pytest", "-p", "nocompile",
                            "-p", "no:cacheprovider", "-q",
                            "--max-recompiles=0", "test_inner.py"], capture_output=True, text=True)
    assert inner.returncode == 0, inner.stdout + inner.stderr
''')
    result = run("test_outer.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*of compile time > max_compile_seconds(0)*"])


def test_a_forked_child_reports_every_signal_for_a_block_opened_after_the_fork(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    # The child is forked from a run that reads no health signal, before the parent opens a
    # compile-time block: only a child that reads every source reports the compile it makes while
    # the block is open.
    pytester.makepyfile(test_fork='''
import multiprocessing
import pytest, torch, torch._dynamo
from pytest_nocompile import CompileTimeBudgetExceeded, assert_max_compile_seconds

def compile_when_told(go):
    go.wait()
    torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2))

def test_block_over_a_forked_child():
    context = multiprocessing.get_context("fork")
    go = context.Event()
    child = context.Process(target=compile_when_told, args=(go,))
    child.start()
    with pytest.raises(CompileTimeBudgetExceeded,
                       match=r"of compile time > assert_max_compile_seconds\\(0\\.0\\)"):
        with assert_max_compile_seconds(0.0):
            go.set()
            child.join(60)
    assert child.exitcode == 0
''')
    result = run("--max-recompiles=0")
    result.assert_outcomes(passed=1)
