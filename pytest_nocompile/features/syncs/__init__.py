"""Syncs: ``max_syncs(N)`` fails a test whose call phase made more than N device-to-host syncs
(each synchronizing CUDA operation torch's sync debug mode warns of), and its failure lists them
by the user's line.

The kind and its failure lines are in :mod:`.kind`; its source, which counts torch's sync
warnings while armed, in :mod:`.sync_warnings`; the syncs torch warns of in C++ (DDP's reducer),
read from stderr through :mod:`..sync_relay`, in :mod:`.cpp_syncs`.

Hooks: ``pytest_nocompile_kinds`` (the ``syncs`` kind).
"""

from __future__ import annotations

from typing import Sequence

from ...vocabulary.kinds import BudgetKind
from .kind import SYNCS


def pytest_nocompile_kinds() -> Sequence[BudgetKind]:
    return (SYNCS,)
