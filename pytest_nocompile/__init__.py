"""pytest-nocompile: make torch.compile recompiles a test failure.

pytest loads it through its ``pytest11`` entry point (``-p nocompile`` only
where plugin autoloading is off); budget a test with
``@pytest.mark.max_recompiles(N)``. The names below are the public API, for
annotating fixtures and reading recorded recompiles, for sweeping a compiled
function over sizes (:func:`sweep_sizes`), and for child processes
the start-up hook cannot reach (:func:`watch_this_process`, :func:`child_env`),
and the ``nocompile_warm_start`` fixture's types (:class:`WarmStart`, :class:`CompileRun`).

They are imported on first use (PEP 562): pytest imports this package at
start-up to load the plugin, and a run that never compiles should not pay for
the parsing and reporting modules behind them.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test starts)

if TYPE_CHECKING:
    from typing import Any

    from .assertions import (
        AssertMaxRecompiles,
        BlockLog,
        assert_max_cache_misses,
        assert_max_compile_instructions,
        assert_max_compile_seconds,
        assert_max_compiles,
        assert_max_graph_breaks,
        assert_max_kernels,
        assert_max_recompiles,
        assert_max_syncs,
        assert_min_compiles,
    )
    from .budget import RecompileBudget
    from .child_lines import ChildReportWarning
    from .events import (
        CodeLocation,
        CompileEvent,
        GuardFailure,
        ProcessInfo,
        RecompileEvent,
        RecompileLimitHit,
        parse_recompile_message,
    )
    from .exceptions import (
        BudgetExceeded,
        CacheMissBudgetExceeded,
        CompileBudgetExceeded,
        CompileInstructionBudgetExceeded,
        CompileTimeBudgetExceeded,
        CudagraphRerecordBudgetExceeded,
        CudagraphSkipBudgetExceeded,
        GraphBreakBudgetExceeded,
        KernelBudgetExceeded,
        RecompileBudgetExceeded,
        SyncBudgetExceeded,
        TooFewCompiles,
        WarmStartFailed,
    )
    from .graph_break_events import GraphBreakEvent
    from .kinds import KINDS, BudgetKind
    from .observe.hook import child_env, watch_this_process
    from .record import RecompileLog
    from .result import TestResult, Verdict
    from .sweeps import SweptSize, sweep_sizes
    from .warm_start import CompileRun, WarmStart, WarmStartRunner
    from .watch import CaptureLostWarning, CompileTimeWarning, NotMeasuredWarning, TraceWarning

__version__ = "0.1.0"

_PUBLIC_MODULES = {
    "AssertMaxRecompiles": ".assertions",
    "BlockLog": ".assertions",
    "assert_max_cache_misses": ".assertions",
    "assert_max_compiles": ".assertions",
    "assert_max_compile_instructions": ".assertions",
    "assert_max_compile_seconds": ".assertions",
    "assert_max_graph_breaks": ".assertions",
    "assert_max_kernels": ".assertions",
    "assert_max_syncs": ".assertions",
    "assert_max_recompiles": ".assertions",
    "assert_min_compiles": ".assertions",
    "KINDS": ".kinds",
    "BudgetKind": ".kinds",
    "RecompileBudget": ".budget",
    "BudgetExceeded": ".exceptions",
    "RecompileBudgetExceeded": ".exceptions",
    "GraphBreakBudgetExceeded": ".exceptions",
    "CompileBudgetExceeded": ".exceptions",
    "CompileInstructionBudgetExceeded": ".exceptions",
    "CompileTimeBudgetExceeded": ".exceptions",
    "CacheMissBudgetExceeded": ".exceptions",
    "TooFewCompiles": ".exceptions",
    "CudagraphRerecordBudgetExceeded": ".exceptions",
    "CudagraphSkipBudgetExceeded": ".exceptions",
    "KernelBudgetExceeded": ".exceptions",
    "SyncBudgetExceeded": ".exceptions",
    "WarmStartFailed": ".exceptions",
    "CodeLocation": ".events",
    "CompileEvent": ".events",
    "GraphBreakEvent": ".graph_break_events",
    "GuardFailure": ".events",
    "ProcessInfo": ".events",
    "RecompileEvent": ".events",
    "RecompileLimitHit": ".events",
    "parse_recompile_message": ".events",
    "child_env": ".observe.hook",
    "watch_this_process": ".observe.hook",
    "RecompileLog": ".record",
    "SweptSize": ".sweeps",
    "sweep_sizes": ".sweeps",
    "TestResult": ".result",
    "Verdict": ".result",
    "CaptureLostWarning": ".watch",
    "CompileTimeWarning": ".watch",
    "TraceWarning": ".watch",
    "NotMeasuredWarning": ".watch",
    "SwallowedCompileErrorWarning": ".swallowed",
    "CompileRun": ".warm_start",
    "WarmStart": ".warm_start",
    "WarmStartRunner": ".warm_start",
    "ChildReportWarning": ".child_lines",
}

__all__ = [
    "KINDS",
    "AssertMaxRecompiles",
    "BlockLog",
    "BudgetExceeded",
    "BudgetKind",
    "CacheMissBudgetExceeded",
    "CaptureLostWarning",
    "ChildReportWarning",
    "CodeLocation",
    "CompileBudgetExceeded",
    "CompileEvent",
    "CompileInstructionBudgetExceeded",
    "CompileTimeBudgetExceeded",
    "CudagraphRerecordBudgetExceeded",
    "CudagraphSkipBudgetExceeded",
    "CompileRun",
    "GraphBreakBudgetExceeded",
    "GraphBreakEvent",
    "GuardFailure",
    "CompileTimeWarning",
    "KernelBudgetExceeded",
    "NotMeasuredWarning",
    "ProcessInfo",
    "RecompileBudget",
    "RecompileBudgetExceeded",
    "RecompileEvent",
    "RecompileLimitHit",
    "RecompileLog",
    "SwallowedCompileErrorWarning",
    "SyncBudgetExceeded",
    "SweptSize",
    "TestResult",
    "TooFewCompiles",
    "TraceWarning",
    "Verdict",
    "WarmStart",
    "WarmStartFailed",
    "WarmStartRunner",
    "__version__",
    "assert_max_compile_instructions",
    "assert_max_compile_seconds",
    "assert_max_cache_misses",
    "assert_max_compiles",
    "assert_max_graph_breaks",
    "assert_max_kernels",
    "assert_max_recompiles",
    "assert_max_syncs",
    "assert_min_compiles",
    "child_env",
    "parse_recompile_message",
    "sweep_sizes",
    "watch_this_process",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC_MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC_MODULES})
