"""The plugin's exceptions. Pure code.

What a failed block assertion raises: one exception per budget kind, under
one base; each kind names its own in :data:`~.vocabulary.kinds.KINDS`
(``BudgetKind.exceeded``). And what a warm-start run that did not happen as
asked raises (:class:`WarmStartFailed`).
"""

from __future__ import annotations

__all__ = ["BudgetExceeded", "CacheMissBudgetExceeded", "CompileBudgetExceeded",
           "CompileInstructionBudgetExceeded", "CompileTimeBudgetExceeded",
           "CudagraphRerecordBudgetExceeded", "CudagraphSkipBudgetExceeded",
           "GraphBreakBudgetExceeded", "KernelBudgetExceeded", "RecompileBudgetExceeded",
           "SyncBudgetExceeded", "TooFewCompiles", "WarmStartFailed"]


class BudgetExceeded(AssertionError):
    """A block assertion failed: its block had more (with ``exact=True``: other) than
    allowed, or fewer than a floor.

    The base of one class per kind (:attr:`BudgetKind.exceeded`): catch this
    one for every kind, or the kind's own.
    """


class RecompileBudgetExceeded(BudgetExceeded):
    """A block went over its recompile budget.

    Before graph-break and compile budgets had exceptions of their own, this
    was raised for every kind; so that ``except RecompileBudgetExceeded`` in
    such code still catches them, it is also the base of
    :class:`GraphBreakBudgetExceeded` and :class:`CompileBudgetExceeded`. To
    catch recompile budgets only, test ``type(error) is RecompileBudgetExceeded``.
    The kinds that came later (compile health) derive from :class:`BudgetExceeded` only.
    """


class GraphBreakBudgetExceeded(RecompileBudgetExceeded):
    """A block went over its graph-break budget."""


class CompileBudgetExceeded(RecompileBudgetExceeded):
    """A block went over its compile budget (graphs compiled)."""


class CompileTimeBudgetExceeded(BudgetExceeded):
    """A block spent more seconds compiling than its budget (``assert_max_compile_seconds``)."""


class CompileInstructionBudgetExceeded(BudgetExceeded):
    """A block's compiles took more CPU instructions than its budget
    (``assert_max_compile_instructions``)."""


class CacheMissBudgetExceeded(BudgetExceeded):
    """A block went over its compile-cache miss budget (inductor FX graph and AOTAutograd
    cache misses and bypasses)."""


class TooFewCompiles(BudgetExceeded):
    """A block compiled fewer graphs than its ``min_compiles`` floor, or dynamo swallowed
    a compile error in it."""


class CudagraphRerecordBudgetExceeded(BudgetExceeded):
    """A block went over its CUDA-graph re-record budget."""


class CudagraphSkipBudgetExceeded(BudgetExceeded):
    """A block went over its CUDA-graph skip budget."""


class SyncBudgetExceeded(BudgetExceeded):
    """A block made more device-to-host syncs than its budget (``assert_max_syncs``)."""


class KernelBudgetExceeded(BudgetExceeded):
    """The graphs a block compiled hold more inductor kernels than its budget
    (``assert_max_kernels``)."""


class WarmStartFailed(Exception):
    """A run of ``nocompile_warm_start`` failed, did not end in time, or could not be watched.

    Its message says which run (cold or warm) of what, and ends with the end
    of that run's output (the traceback, when the code raised).
    """
