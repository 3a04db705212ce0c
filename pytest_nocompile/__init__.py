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
    from .judge.budget import RecompileBudget
    from .judge.result import TestResult, Verdict
    from .output.trace_dir import TraceWarning
    from .processes.child_lines import ChildReportWarning
    from .processes.hook import child_env, watch_this_process
    from .record.log import RecompileLog
    from .vocabulary.events import (
        CodeLocation,
        CompileEvent,
        GuardFailure,
        ProcessInfo,
        RecompileEvent,
        RecompileLimitHit,
        parse_recompile_message,
    )
    from .vocabulary.graph_break_events import GraphBreakEvent
    from .vocabulary.kinds import KINDS, BudgetKind
    from .vocabulary.module_names import CompiledModule
    from .watching.assertions import (
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
    from .watching.sweeps import SweptSize, sweep_sizes
    from .watching.warm_start import CompileRun, WarmStart, WarmStartRunner
    from .watching.watch import CaptureLostWarning, CompileTimeWarning, NotMeasuredWarning

__version__ = "0.1.0"

_PUBLIC_MODULES = {
    "AssertMaxRecompiles": ".watching.assertions",
    "BlockLog": ".watching.assertions",
    "assert_max_cache_misses": ".watching.assertions",
    "assert_max_compiles": ".watching.assertions",
    "assert_max_compile_instructions": ".watching.assertions",
    "assert_max_compile_seconds": ".watching.assertions",
    "assert_max_graph_breaks": ".watching.assertions",
    "assert_max_kernels": ".watching.assertions",
    "assert_max_syncs": ".watching.assertions",
    "assert_max_recompiles": ".watching.assertions",
    "assert_min_compiles": ".watching.assertions",
    "KINDS": ".vocabulary.kinds",
    "BudgetKind": ".vocabulary.kinds",
    "RecompileBudget": ".judge.budget",
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
    "CodeLocation": ".vocabulary.events",
    "CompileEvent": ".vocabulary.events",
    "CompiledModule": ".vocabulary.module_names",
    "GraphBreakEvent": ".vocabulary.graph_break_events",
    "GuardFailure": ".vocabulary.events",
    "ProcessInfo": ".vocabulary.events",
    "RecompileEvent": ".vocabulary.events",
    "RecompileLimitHit": ".vocabulary.events",
    "parse_recompile_message": ".vocabulary.events",
    "child_env": ".processes.hook",
    "watch_this_process": ".processes.hook",
    "RecompileLog": ".record.log",
    "SweptSize": ".watching.sweeps",
    "sweep_sizes": ".watching.sweeps",
    "TestResult": ".judge.result",
    "Verdict": ".judge.result",
    "CaptureLostWarning": ".watching.watch",
    "CompileTimeWarning": ".watching.watch",
    "TraceWarning": ".output.trace_dir",
    "NotMeasuredWarning": ".watching.watch",
    "SwallowedCompileErrorWarning": ".watching.swallowed",
    "CompileRun": ".watching.warm_start",
    "WarmStart": ".watching.warm_start",
    "WarmStartRunner": ".watching.warm_start",
    "ChildReportWarning": ".processes.child_lines",
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
    "CompiledModule",
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
