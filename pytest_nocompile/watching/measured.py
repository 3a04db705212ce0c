"""Which of a test's counts were measured; its result has no count for the rest.

A count not measured is ``n/a`` in the table and ``null`` in JSON. A run
reads a compile-health kind (compile time, syncs, kernels, ...) only from
the moment a test or block budgets it (:mod:`..observe.wanted_signals`;
``--nocompile-report`` and the JSON report read every kind from the start),
and some kinds cannot be measured on some machines (syncs without CUDA).
Knowing which kinds a test read costs nothing: it is the signals wanted when
its call began, which the run keeps anyway.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping, Sequence

from ..vocabulary.kinds import KINDS, BudgetKind, Selection
from .planning import measured_where_possible
from .watch import not_measured


def health_kinds(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    """The kinds counted from health events, each with a count of its own."""
    return tuple(kind for kind in kinds if kind.events == "health" and not kind.same_count_as)


def _heard_without_dynamo(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    """The kinds whose source reports without dynamo (``needs_dynamo=False``, syncs): a record not
    attached when its call began (no dynamo yet, nothing budgeting them) missed theirs until
    dynamo came. The rest need dynamo, which attaches the record as it arrives, before anything
    compiled."""
    return tuple(kind for kind in health_kinds(kinds) if not kind.needs_dynamo)


HEALTH_KINDS = Selection(KINDS, health_kinds)
HEARD_WITHOUT_DYNAMO = Selection(KINDS, _heard_without_dynamo)

NOT_READ = ("not read in this test: a run reads it from the first test that budgets it on "
            "(--nocompile-report reads every count)")


def kinds_not_read(wanted: frozenset[str], heard: bool) -> Mapping[str, str]:
    """The health kinds a test did not read in its call, by key (shared: read it, do not change
    it), from the signals ``wanted`` when its call began and whether its record was attached then
    (``heard``)."""
    return _kinds_not_read(wanted, heard, KINDS.derived(health_kinds),
                           KINDS.derived(_heard_without_dynamo))


@lru_cache(maxsize=64)  # one entry per set of signals wanted: a run widens it a few times at most
def _kinds_not_read(wanted: frozenset[str], heard: bool, kinds: tuple[BudgetKind, ...],
                    unheard: tuple[BudgetKind, ...]) -> Mapping[str, str]:
    return {kind.key: NOT_READ for kind in kinds
            if not wanted.issuperset(kind.health_signals) or (not heard and kind in unheard)}


def counts_not_measured(not_read: Mapping[str, str]) -> Mapping[str, str]:
    """Why each count a test has no figure for is none, by key: the kinds it did not read
    (``not_read``), and those it read that cannot be measured here (syncs without CUDA)."""
    read = [kind for kind in KINDS.derived(measured_where_possible) if kind.key not in not_read]
    unmeasurable = not_measured(read)
    return {**not_read, **unmeasurable} if unmeasurable else not_read
