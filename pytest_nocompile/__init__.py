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

# typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test
# starts)
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from .exceptions import (
        BudgetExceeded as BudgetExceeded,
        CacheMissBudgetExceeded as CacheMissBudgetExceeded,
        CompileBudgetExceeded as CompileBudgetExceeded,
        CompileInstructionBudgetExceeded as CompileInstructionBudgetExceeded,
        CompileTimeBudgetExceeded as CompileTimeBudgetExceeded,
        CudagraphRerecordBudgetExceeded as CudagraphRerecordBudgetExceeded,
        CudagraphSkipBudgetExceeded as CudagraphSkipBudgetExceeded,
        GraphBreakBudgetExceeded as GraphBreakBudgetExceeded,
        KernelBudgetExceeded as KernelBudgetExceeded,
        RecompileBudgetExceeded as RecompileBudgetExceeded,
        SyncBudgetExceeded as SyncBudgetExceeded,
        TooFewCompiles as TooFewCompiles,
        WarmStartFailed as WarmStartFailed,
    )
    from .features.block_assertions.assertions import (
        AssertMaxRecompiles as AssertMaxRecompiles,
        BlockLog as BlockLog,
        assert_max_cache_misses as assert_max_cache_misses,
        assert_max_compile_instructions as assert_max_compile_instructions,
        assert_max_compile_seconds as assert_max_compile_seconds,
        assert_max_compiles as assert_max_compiles,
        assert_max_graph_breaks as assert_max_graph_breaks,
        assert_max_kernels as assert_max_kernels,
        assert_max_recompiles as assert_max_recompiles,
        assert_max_syncs as assert_max_syncs,
        assert_min_compiles as assert_min_compiles,
    )
    from .features.caches.warm_start import (
        CompileRun as CompileRun,
        WarmStart as WarmStart,
        WarmStartRunner as WarmStartRunner,
    )
    from .features.child_events.child_lines import ChildReportWarning as ChildReportWarning
    from .features.child_startup.hook import (
        child_env as child_env,
        watch_this_process as watch_this_process,
    )
    from .features.contracts.sweeps import SweptSize as SweptSize, sweep_sizes as sweep_sizes
    from .features.traces.folders import TraceWarning as TraceWarning
    from .judge.budget import RecompileBudget as RecompileBudget
    from .judge.result import TestResult as TestResult, Verdict as Verdict
    from .record.log import RecompileLog as RecompileLog
    from .vocabulary.events import (
        CodeLocation as CodeLocation,
        CompileEvent as CompileEvent,
        GuardFailure as GuardFailure,
        ProcessInfo as ProcessInfo,
        RecompileEvent as RecompileEvent,
        RecompileLimitHit as RecompileLimitHit,
        parse_recompile_message as parse_recompile_message,
    )
    from .vocabulary.graph_break_events import GraphBreakEvent as GraphBreakEvent
    from .vocabulary.kinds import KINDS as KINDS, BudgetKind as BudgetKind
    from .vocabulary.module_names import CompiledModule as CompiledModule
    from .watching.swallowed import SwallowedCompileErrorWarning as SwallowedCompileErrorWarning
    from .watching.watch import (
        CaptureLostWarning as CaptureLostWarning,
        CompileTimeWarning as CompileTimeWarning,
        NotMeasuredWarning as NotMeasuredWarning,
    )

__version__ = "0.1.0"

# The built-in gates, each a feature adding kinds of budget (its pytest_nocompile_kinds), in the
# summary table's column order: read by vocabulary.kinds.KINDS the first time it is read, in every
# process (a script and a child process too, which have no pytest hooks).
BUILT_IN_GATES = ("pytest_nocompile.features.compile_cost", "pytest_nocompile.features.caches",
                  "pytest_nocompile.features.cudagraphs", "pytest_nocompile.features.syncs",
                  "pytest_nocompile.features.kernels")

_PUBLIC_MODULES = {
    "AssertMaxRecompiles": ".features.block_assertions.assertions",
    "BlockLog": ".features.block_assertions.assertions",
    "assert_max_cache_misses": ".features.block_assertions.assertions",
    "assert_max_compiles": ".features.block_assertions.assertions",
    "assert_max_compile_instructions": ".features.block_assertions.assertions",
    "assert_max_compile_seconds": ".features.block_assertions.assertions",
    "assert_max_graph_breaks": ".features.block_assertions.assertions",
    "assert_max_kernels": ".features.block_assertions.assertions",
    "assert_max_syncs": ".features.block_assertions.assertions",
    "assert_max_recompiles": ".features.block_assertions.assertions",
    "assert_min_compiles": ".features.block_assertions.assertions",
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
    "child_env": ".features.child_startup.hook",
    "watch_this_process": ".features.child_startup.hook",
    "RecompileLog": ".record.log",
    "SweptSize": ".features.contracts.sweeps",
    "sweep_sizes": ".features.contracts.sweeps",
    "TestResult": ".judge.result",
    "Verdict": ".judge.result",
    "CaptureLostWarning": ".watching.watch",
    "CompileTimeWarning": ".watching.watch",
    "TraceWarning": ".features.traces.folders",
    "NotMeasuredWarning": ".watching.watch",
    "SwallowedCompileErrorWarning": ".watching.swallowed",
    "CompileRun": ".features.caches.warm_start",
    "WarmStart": ".features.caches.warm_start",
    "WarmStartRunner": ".features.caches.warm_start",
    "ChildReportWarning": ".features.child_events.child_lines",
}

# each also imported above for type checkers, "as" itself: a re-export
__all__ = ["__version__", *_PUBLIC_MODULES]


def __getattr__(name: str) -> Any:
    module = _PUBLIC_MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC_MODULES})
