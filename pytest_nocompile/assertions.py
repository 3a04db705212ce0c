"""The block assertions' first import path, ``pytest_nocompile.assertions``, kept for code that imports from it.

Their home is :mod:`.watching.assertions`; every name is also on ``pytest_nocompile``.
"""

from .exceptions import BudgetExceeded, RecompileBudgetExceeded
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

__all__ = [
    "AssertMaxRecompiles", "BlockLog", "BudgetExceeded", "RecompileBudgetExceeded", "assert_max_cache_misses",
    "assert_max_compile_instructions", "assert_max_compile_seconds", "assert_max_compiles", "assert_max_graph_breaks",
    "assert_max_kernels", "assert_max_recompiles", "assert_max_syncs", "assert_min_compiles",
]
