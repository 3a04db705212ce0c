"""Kernels: ``max_kernels(N)`` fails a test whose compiled graphs hold more than N inductor
kernels (a graph taken from the FX graph cache counts the kernels it holds), and its failure
lists each graph with its kernels.

The kind is in :mod:`.kind`; its source, which reads each graph's kernel count
from inductor's metrics as the graph is compiled or loaded, in
:mod:`.kernel_counts`.

Hooks: ``pytest_nocompile_kinds`` (the ``kernels`` kind).
"""

from __future__ import annotations

from typing import Sequence

from ...vocabulary.kinds import BudgetKind
from .kind import KERNELS


def pytest_nocompile_kinds() -> Sequence[BudgetKind]:
    return (KERNELS,)
