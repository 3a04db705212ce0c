"""Contracts: markers that judge how a test compiled rather than how much. ``dynamic_dims`` fails a
test where a call-phase recompile specialised a dim meant to stay dynamic (:mod:`.contracts`,
with the size guards read by :mod:`.size_guards`); ``same_across_ranks`` fails a test whose
processes (ranks, spawned children) did not compile alike (:mod:`.rank_comparison`); and
``sweep_sizes`` calls a compiled function over sizes and fails on each size that recompiled for a
reason not dynamo's own (:mod:`.sweeps`).

Hooks: ``pytest_nocompile_read_contract`` (a contract from its marker; the core judges it with
the budgets when the call ends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pytest

if TYPE_CHECKING:
    from ...judge.verdict import Contract


@pytest.hookimpl
def pytest_nocompile_read_contract(name: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                                   marked_on: str) -> Contract:
    from .contracts import read_contract  # here: a run without contracts never loads them

    return read_contract(name, args, kwargs, marked_on)
