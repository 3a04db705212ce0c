"""A source of health events: each increment of a counter in ``torch._dynamo.utils.counters`` that a
kind wants.

torch keeps compile-health tallies in one shared ``defaultdict(Counter)``
(``counters["inductor"]["fxgraph_cache_miss"] += 1``). User code and torch's
own ``TestCase`` clear it (``counters.clear()``), so a count read from it as a
difference is wrong. This source never reads a total: while armed, every
``Counter`` in it (and every one made after, through ``default_factory``) is
of a subclass whose ``__setitem__`` reports a rise as it happens. Clearing
the counters then loses nothing already reported. Disarming puts back torch's
own class on every counter and the original ``default_factory``: nothing of
ours is left behind.

Only the names the process wants (``"group.name"``, from
:attr:`~...vocabulary.kinds.BudgetKind.signals`, see :mod:`..wanted_signals`)
are reported; torch bumps dozens of others during each compile. Where none
is wanted, arming swaps nothing.
"""

from __future__ import annotations

import collections
import sys
from typing import Any, Callable, Collection, Optional

_GROUP = "_nocompile_group"  # the instance attribute that caches a counter's key in ``counters``


class _ReportingCounter(collections.Counter):
    """torch's Counter, reporting each rise of a wanted key to the armed source (instances are
    swapped in by class)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        before = self.get(key, 0)
        super().__setitem__(key, value)
        source = _ARMED
        if source is not None:
            source.rose(self, key, before, value)


# The armed source, if any: one per process (the capture's), read by every counter.
_ARMED: Optional[CounterIncrements] = None


class CounterIncrements:
    """The source: reports ``(what, amount)`` for each rise of a wanted counter while armed."""

    def __init__(self, emit: Callable[[str, float], None], wanted: Callable[[], Collection[str]],
                 every: Optional[Callable[[], Collection[str]]] = None,
                 not_counters: Callable[[], Collection[str]] = frozenset) -> None:
        self._emit = emit
        # the signals the process reports now (see observe.wanted_signals)
        self._wanted_names = wanted
        self._every = every or wanted  # every signal it could be asked for
        # other sources' groups of dotted signals ("compile_seconds", of "compile_seconds.dynamo")
        self._not_counters = not_counters
        self._signals: frozenset[str] = frozenset()
        self._signals_of: Optional[Collection[str]] = None  # the signals self._signals came from
        # the signals self._wanted was made from
        self._wanted_from: Optional[Collection[str]] = None
        self._wanted: frozenset[tuple[str, str]] = frozenset()
        self._counters: Any = None
        self._factory: Any = None

    @property
    def signals(self) -> frozenset[str]:
        """The counters it may report (``"group.name"``): every dotted signal it could be asked for
        but other sources' own."""
        every = self._every()
        if every is not self._signals_of:  # made again only when the kinds change
            self._signals_of = every
            others = tuple(f"{group}." for group in self._not_counters())
            self._signals = frozenset(name for name in every
                                      if "." in name and not name.startswith(others))
        return self._signals

    def arm(self) -> None:
        global _ARMED
        names = self._wanted_names()
        # the process wants other signals now: a new set, made once
        if names is not self._wanted_from:
            self._wanted_from = names
            self._wanted = frozenset(tuple(name.split(".", 1))  # type: ignore[misc]
                                     for name in self.signals.intersection(names))
        counters = getattr(sys.modules.get("torch._dynamo.utils"), "counters", None)
        if not isinstance(counters, collections.defaultdict) or _ARMED is self:
            # dynamo without its counters (a future torch): the kinds that need them say so
            # themselves
            return
        if not self._wanted:
            # no wanted signal is a counter of torch's: nothing to swap, in every watched test
            return
        self._counters, self._factory = counters, counters.default_factory
        if counters.default_factory is collections.Counter:
            counters.default_factory = _ReportingCounter
        for counter in list(counters.values()):
            if type(counter) is collections.Counter:
                counter.__class__ = _ReportingCounter
        _ARMED = self

    def disarm(self) -> None:
        global _ARMED
        if _ARMED is not self:
            return
        _ARMED = None
        counters = self._counters
        if counters.default_factory is _ReportingCounter:
            counters.default_factory = self._factory
        for counter in list(counters.values()):
            if type(counter) is _ReportingCounter:
                counter.__class__ = collections.Counter  # type: ignore[assignment]
                vars(counter).pop(_GROUP, None)
        self._counters = self._factory = None

    def rose(self, counter: _ReportingCounter, key: Any, before: Any, after: Any) -> None:
        """A counter was set: report the rise if it is one, of a wanted name.
        Never raises into torch."""
        try:
            group = vars(counter).get(_GROUP)
            if group is None:
                group = next((name for name, value in list(self._counters.items())
                              if value is counter), None)
                if group is None:
                    return  # a copy torch made for itself, not in ``counters``
                vars(counter)[_GROUP] = group
            if (group, key) not in self._wanted:
                return
            if (isinstance(after, (int, float)) and isinstance(before, (int, float))
                    and after > before):
                self._emit(f"{group}.{key}", after - before)
        # a counter we cannot read is a count we lack, not an error in the user's compile
        except Exception:
            pass
