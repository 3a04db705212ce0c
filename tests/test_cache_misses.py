"""max_cache_misses: inductor's FX graph cache and the AOTAutograd cache, with real inductor
compiles on CPU.

The docs' example (docs/cache-misses.md) is run as written. Each scenario compiles into its own
cache folder under the test's tmp_path (``TORCHINDUCTOR_CACHE_DIR``), never the user's shared cache.
The AOTAutograd cache is switched on by its variables: torch 2.5 and 2.6 leave it off. A cold
inductor compile costs seconds, so the scenarios are few and share their runs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from test_readme import Block, block_containing

from nocompile_testing import (
    COUNTERS_RENAMED,
    TORCH,
    RunPytest,
    expect_lines,
    metrics_count_cache_misses,
)
from pytest_nocompile.features.caches.cache_bypass_reasons import (
    AUTOGRAD_BYPASS,
    FX_GRAPH_BYPASS,
    CacheBypassReasons,
    short_reason,
)
from pytest_nocompile.features.caches.kind import CACHE_MISSES
from pytest_nocompile.record.process_events import ProcessEvents
from pytest_nocompile.vocabulary.events import HealthEvent

# 2.5 to 2.7 count a bypass found at lookup without logging why
LOGS_LOOKUP_BYPASS_REASON = TORCH >= (2, 8)

CLEARED = """
import pytest
import torch
from torch._dynamo.utils import counters

def shift(x):
    return torch.cos(x) + 1

@pytest.mark.max_cache_misses(2)
def test_cleared():
    compiled = torch.compile(shift)
    compiled(torch.ones(3))
    counters.clear()  # as torch's own TestCase does in setUp: what was counted stays counted
    compiled(torch.ones(3, 3))
"""

BYPASS = """
import pytest
import torch

class Triple(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 3

def triple_plus_one(x):
    return Triple.apply(x) + 1

@pytest.mark.max_cache_misses(0)
def test_bypass():
    torch.compile(triple_plus_one)(torch.ones(3, requires_grad=True))
"""


@pytest.fixture
def private_cache(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A compile cache of the test's own, with the AOTAutograd cache switched on in every torch that
    has it."""
    if TORCH < (2, 5):  # (0, 0) without torch
        pytest.skip("max_cache_misses needs torch >= 2.5")
    folder = pytester.path / "inductor-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder))
    monkeypatch.setenv("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")  # torch 2.6's switch
    monkeypatch.setenv("ENABLE_AOT_AUTOGRAD_CACHE", "1")  # torch 2.5's
    return folder


def test_the_docs_warm_start_misses_in_a_cold_cache_and_hits_in_a_second_process_sharing_it(
        pytester: pytest.Pytester, run: RunPytest, private_cache: Path) -> None:
    warm_start = block_containing("def test_warm_start")
    pytester.makepyfile(**{warm_start.file_name[:-3]: warm_start.text}, test_cleared=CLEARED)
    result = run("-W", "ignore::DeprecationWarning")
    result.assert_outcomes(failed=2)
    # The docs' failure, as shown there.
    expect_lines(result, text_block_after(warm_start, "The first").splitlines())
    # Two graphs, each missing both caches; counters.clear() between them changes nothing.
    expect_lines(result, [
        "4 cache misses > max_cache_misses(2) (marker on the test)",
        "[1/4] aot_autograd.autograd_cache_miss in compile 0/0 of shift (test_cleared.py:5)",
        "    triggered by: test_cleared.py:11 in test_cleared: compiled(torch.ones(3))",
        "[2/4] inductor.fxgraph_cache_miss in compile 0/0 of shift (test_cleared.py:5)",
        "    triggered by: test_cleared.py:11 in test_cleared: compiled(torch.ones(3))",
        "[3/4] aot_autograd.autograd_cache_miss in compile 0/1 of shift (test_cleared.py:5)",
        "    triggered by: test_cleared.py:13 in test_cleared: compiled(torch.ones(3, 3))",
        "[4/4] inductor.fxgraph_cache_miss in compile 0/1 of shift (test_cleared.py:5)",
        "    triggered by: test_cleared.py:13 in test_cleared: compiled(torch.ones(3, 3))",
    ])
    assert private_cache.is_dir()

    result = run("-W", "ignore::DeprecationWarning", "--nocompile-report", warm_start.file_name)
    result.assert_outcomes(passed=1)
    expect_lines(result, text_block_after(warm_start, "The second").splitlines())


def text_block_after(block: Block, words: str) -> str:
    """The first ```text block after ``block`` in its page that follows a paragraph starting with
    ``words``."""
    page = block.page.read_text()
    after = page.index(block.text) + len(block.text)
    start = page.index("```text\n", page.index(words, after)) + len("```text\n")
    return page[start:page.index("```", start)].rstrip("\n")


def test_a_bypass_counts_as_a_miss_with_torchs_reason(pytester: pytest.Pytester, run: RunPytest,
                                                      private_cache: Path) -> None:
    pytester.makepyfile(test_bypass=BYPASS)
    result = run("-W", "ignore::DeprecationWarning", "--nocompile-report")
    result.assert_outcomes(failed=1)
    reason = (["    reason: Unsupported call_function target *autograd_function_apply*"]
              if LOGS_LOOKUP_BYPASS_REASON else [])
    expect_lines(result, [
        "2 cache misses > max_cache_misses(0) (marker on the test)",
        "[1/2] aot_autograd.autograd_cache_bypass in compile 0/0 of triple_plus_one "
        "(test_bypass.py:13)",
        *reason,
        "    triggered by: test_bypass.py:18 in test_bypass: "
        "torch.compile(triple_plus_one)(torch.ones(3, requires_grad=True))",
        "[2/2] inductor.fxgraph_cache_miss in compile 0/0 of triple_plus_one (test_bypass.py:13)",
    ])
    cause = ("test_bypass.py::test_bypass: aot_autograd.autograd_cache_bypass of triple_plus_one "
             "(test_bypass.py:13)")
    result.stdout.fnmatch_lines(
        [cause + (": Unsupported call_function target *" if LOGS_LOOKUP_BYPASS_REASON else "")])


OLD_TORCH = """
import pytest
import pytest_nocompile.judge.installed_versions as installed_versions

# The version the plugin reads from torch's metadata (never importing it); everything else asks
# the real one.
real_version = installed_versions.distribution_version
installed_versions.distribution_version = (
    lambda name: "2.4.1" if name == "torch" else real_version(name))
"""


def test_a_torch_without_the_counters_is_a_usage_error_naming_the_first_torch_with_them(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makeconftest(OLD_TORCH)
    pytester.makepyfile(
        test_old="import pytest\n\n@pytest.mark.max_cache_misses(0)\ndef test_cold():\n    pass\n")
    needs = ("max_cache_misses needs torch >= 2.5, the first with the AOTAutograd cache's "
             "counters; torch 2.4.1 is installed")
    result = run()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_cold*",
                                 "unusable max_cache_misses marker on "
                                 f"test_old.py::test_cold: {needs}"])
    result = run("--max-cache-misses=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --max-cache-misses: {needs}"])
    result = run("-o", "max_cache_misses=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ini key max_cache_misses: {needs}"])


def test_a_torch_without_the_counters_refuses_the_block_assertions_and_the_warm_start(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    # Each would count nothing there, and pass: a warm start would seem to miss nothing.
    pytester.makeconftest(OLD_TORCH)
    pytester.makepyfile(test_old="""
import pytest
from pytest_nocompile import assert_max_cache_misses

def test_block():
    assert_max_cache_misses(0)

def test_fixture(nocompile_assert_max_cache_misses):
    nocompile_assert_max_cache_misses(0)

def test_warm_start(nocompile_warm_start):
    nocompile_warm_start("os:getcwd")
""")
    result = run("-p", "no:randomly")
    result.assert_outcomes(failed=3)
    needs = ("needs torch >= 2.5, the first with the AOTAutograd cache's counters; "
             "torch 2.4.1 is installed")
    result.stdout.fnmatch_lines([f"E *RuntimeError: pytest-nocompile cannot count: {what} {needs}"
                                 for what in ("assert_max_cache_misses",
                                              "nocompile_assert_max_cache_misses",
                                              "nocompile_warm_start")])


def test_torchs_reason_joins_the_bypass_just_counted_and_counts_nothing_itself() -> None:
    events = ProcessEvents()
    events.add_health(HealthEvent(AUTOGRAD_BYPASS, 1))
    events.add_health(HealthEvent("inductor.fxgraph_cache_miss", 1))
    events.add_health(HealthEvent(AUTOGRAD_BYPASS, 0, "Unsupported call_function target"))
    # its count was never seen
    events.add_health(HealthEvent(FX_GRAPH_BYPASS, 0, "a reason without its count"))
    assert [(event.what, event.amount, event.reason) for event in events.health] == [
        (AUTOGRAD_BYPASS, 1, "Unsupported call_function target"),
        ("inductor.fxgraph_cache_miss", 1, None),
        (FX_GRAPH_BYPASS, 0, "a reason without its count"),
    ]
    assert events.count(CACHE_MISSES) == 2


def test_the_reason_source_hears_torchs_bypass_messages_silently_and_leaves_the_loggers_as_they_were(  # noqa: E501
        caplog: pytest.LogCaptureFixture) -> None:
    heard: list[tuple[str, float, str | None]] = []
    source = CacheBypassReasons(lambda what, amount, reason: heard.append((what, amount, reason)),
                                lambda: {FX_GRAPH_BYPASS, AUTOGRAD_BYPASS})
    fx_graph, autograd = (logging.getLogger("torch._inductor.codecache"),
                          logging.getLogger("torch._functorch._aot_autograd.autograd_cache"))
    before = [(logger.level, dict(vars(logger))) for logger in (fx_graph, autograd)]
    source.arm()
    try:
        fx_graph.info("Bypassing FX Graph Cache because '%s'",
                      ValueError("Unsupported post grad custom pass"))
        fx_graph.info("fx graph cache miss for key %s", "abc")  # not a bypass
        autograd.warning("Bypassing autograd cache due to: %s",
                         "Unsupported call_function target\n Function module: m")
    finally:
        source.disarm()
    fx_graph.info("Bypassing FX Graph Cache because '%s'", "after disarming")
    assert heard == [(FX_GRAPH_BYPASS, 0, "Unsupported post grad custom pass"),
                     (AUTOGRAD_BYPASS, 0, "Unsupported call_function target Function module: m")]
    assert [(logger.level, dict(vars(logger))) for logger in (fx_graph, autograd)] == before
    # torch's WARNING still reaches the user's handlers; its INFO records are made no more than
    # before.
    assert ([record.getMessage()[:31] for record in caplog.records]
            == ["Bypassing autograd cache due to"])


def test_a_long_reason_is_cut_to_one_line() -> None:
    assert short_reason("'a\n  b'") == "a b"
    assert len(short_reason("x" * 1000)) == 300


SIGNALLING_BACKEND = """
import subprocess, sys
import pytest
import torch
from pytest_nocompile.observe.capture import DYNAMO_LOGS

def missing_backend(gm, example_inputs):
    # Stands in for inductor: reports a cache miss from inside the compile, as torch's counter
    # would.
    DYNAMO_LOGS.emit_health("inductor.fxgraph_cache_miss")
    return gm.forward

def scale(x):
    return x * 2

@pytest.mark.max_cache_misses(0)
def test_in_this_process():
    torch.compile(scale, backend=missing_backend)(torch.ones(2))

@pytest.mark.max_cache_misses(0)
def test_in_a_child():
    code = ("import test_signals as t, torch; "
            "torch.compile(t.scale, backend=t.missing_backend)(torch.ones(2))")
    subprocess.run([sys.executable, "-c", code], check=True)
"""


@pytest.mark.skipif(TORCH < (2, 5), reason="max_cache_misses needs torch >= 2.5")
def test_a_miss_names_the_function_compiled_in_this_process_and_in_a_child(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_signals=SIGNALLING_BACKEND)
    result = run()
    result.assert_outcomes(failed=2)
    expect_lines(result, [
        "1 cache miss > max_cache_misses(0) (marker on the test)",
        "[1/1] inductor.fxgraph_cache_miss in compile 0/0 of scale (test_signals.py:12)",
    ])
    expect_lines(result, [
        "pid * (python -c *): 1 cache miss > max_cache_misses(0) (marker on the test)",
        "[1/1] inductor.fxgraph_cache_miss in compile 0/0 of scale (test_signals.py:12)",
    ])


COLD = """
import pytest
import torch

def shift(x):
    return torch.cos(x) + 1

@pytest.mark.max_cache_misses(0)
def test_cold():
    torch.compile(shift)(torch.ones(3))
"""


def test_misses_torchs_counters_did_not_count_are_counted_from_compilation_metrics(
        pytester: pytest.Pytester, run: RunPytest, private_cache: Path) -> None:
    if not metrics_count_cache_misses():
        pytest.skip("torch's compilation metrics count no cache misses here")
    pytester.makeconftest(COUNTERS_RENAMED)
    pytester.makepyfile(test_cold=COLD)
    result = run("-W", "ignore::DeprecationWarning", "--nocompile-report",
                 "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "2 cache misses > max_cache_misses(0) (marker on the test)",
        "    a lower bound: 2 cache misses of inductor's FX graph cache and the AOTAutograd cache "
        "with no rise of torch's counters, counted from compilation metrics",
        "[1/2] inductor.fxgraph_cache_miss in compile 0/0 of shift (test_cold.py:4)",
        "    reason: no rise of torch's counter inductor.fxgraph_cache_miss: counted from the "
        "compilation metrics entry of compile 0/0",
        "[2/2] aot_autograd.autograd_cache_miss in compile 0/0 of shift (test_cold.py:4)",
        "    reason: no rise of torch's counter aot_autograd.autograd_cache_miss: counted from the "
        "compilation metrics entry of compile 0/0",
    ])
    said = [line for line in result.stdout.lines if line.startswith("nocompile: torch ")]
    assert len(said) == 1, said
    assert said[0].endswith(
        " did not count what its compilation metrics did: 2 cache misses of inductor's FX graph "
        "cache and the AOTAutograd cache with no rise of torch's counters, counted from "
        "compilation metrics (in test_cold.py::test_cold): counts of cache misses read >= where "
        "so; run `python -m pytest_nocompile doctor`")
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert (entry["cache_misses"], entry["lower_bound"]) == (2, {
        "cache_misses": "2 cache misses of inductor's FX graph cache and the AOTAutograd cache "
                        "with no rise of torch's counters, counted from compilation metrics"})


def test_the_metrics_witness_adds_only_what_the_counters_did_not_count() -> None:
    from types import SimpleNamespace

    from pytest_nocompile.features.caches.cache_witness import witnessed

    def entry(compile_id: str, fx: int, aot: int, fx_remote_hits: int = 0) -> SimpleNamespace:
        return SimpleNamespace(compile_id=compile_id, co_name="f", co_filename="/x.py",
                               co_firstlineno=3, inductor_fx_local_cache_miss_count=fx,
                               inductor_fx_remote_cache_hit_count=fx_remote_hits,
                               aotautograd_local_cache_miss_count=aot)

    entries = [entry("0/0", 1, 1), entry("0/1", 2, 1), entry("1/0", 1, 0, fx_remote_hits=1)]
    counted = {"inductor.fxgraph_cache_miss": 3, "aot_autograd.autograd_cache_miss": 2}
    assert witnessed(entries, counted) == []  # the counters saw it all; a remote hit is no miss
    # one FX miss the counter did not see: the newest entry's
    events = witnessed(entries, {**counted, "inductor.fxgraph_cache_miss": 2})
    assert [(event.what, event.amount, event.compile_id) for event in events] == [
        ("inductor.fxgraph_cache_miss", 1, "0/1"), ("cache_misses_unseen", 1, None)]
    assert events[0].compiling is not None and events[0].compiling.function == "f"
    assert events[1].reason == ("1 cache miss of inductor's FX graph cache with no rise of "
                                "torch's counters, counted from compilation metrics")
    # a torch whose entries count no misses: nothing
    assert witnessed([SimpleNamespace(compile_id="0/0")], {}) == []
