"""A test's record as one value: each process's counts and events, taken once, for
the judge and the outputs.

The judge decides from a :class:`TestSnapshot` alone and the outputs read the
same value: neither calls back into the record, whose lists a compiling
thread may still be adding to. Taking one copies references, not events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional

if TYPE_CHECKING:
    from ..vocabulary.events import (
        CompileEvent,
        HealthEvent,
        Phase,
        ProcessInfo,
        RecompileEvent,
        RecompileLimitHit,
    )
    from ..vocabulary.graph_break_events import GraphBreakEvent
    from ..vocabulary.measures import Amount
    from .process_events import ProcessEvents


class ProcessSnapshot:
    """One process of a test as it stood when taken: the test's own (``info`` None)
    or a child that reported.

    ``counts`` are its call phase's, by kind key; the event tuples hold every
    phase, each event with its phase; ``call_*`` are the call phase's alone.
    """

    __slots__ = ("info", "label", "world", "counts", "recompiles", "limit_hits", "graph_breaks",
                 "compiles", "health", "call_recompiles", "call_limit_hits", "call_graph_breaks",
                 "call_health")

    def __init__(self, events: ProcessEvents, label: str) -> None:
        self.info: Optional[ProcessInfo] = events.info
        self.label = label  # as reports name it, e.g. "rank 1 (pid 4242)"
        # a child's job's world size, where it said (with its rank)
        self.world: Optional[int] = events.world
        self.counts: Mapping[str, Amount] = events.counts()
        self.recompiles: tuple[RecompileEvent, ...] = tuple(events.recompiles)
        self.limit_hits: tuple[RecompileLimitHit, ...] = tuple(events.limit_hits)
        self.graph_breaks: tuple[GraphBreakEvent, ...] = tuple(events.graph_breaks)
        self.compiles: tuple[CompileEvent, ...] = tuple(events.compiles)
        self.health: tuple[HealthEvent, ...] = tuple(events.health)
        self.call_recompiles = tuple(event for event in self.recompiles if event.phase == "call")
        self.call_limit_hits = tuple(hit for hit in self.limit_hits if hit.phase == "call")
        self.call_graph_breaks = tuple(event for event in self.graph_breaks
                                       if event.phase == "call")
        self.call_health = tuple(event for event in self.health if event.phase == "call")

    def signals(self, names: tuple[str, ...], phase: Optional[Phase] = "call") -> list[HealthEvent]:
        """The health events of these names, of one phase (None: every phase), as
        :meth:`.ProcessEvents.signals` gives them."""
        events = self.call_health if phase == "call" else self.health
        return [event for event in events
                if event.what in names and (phase is None or event.phase == phase)]


class TestSnapshot:
    """A test's processes as they stood when taken: the test's own first, then
    each child that reported."""

    __test__ = False  # not a test class, whatever pytest collects

    __slots__ = ("processes", "with_children", "pid", "shown")

    def __init__(self, processes: tuple[ProcessSnapshot, ...], pid: int) -> None:
        self.processes = processes
        self.pid = pid  # the test's own process's
        self.with_children = len(processes) > 1  # a failure then names the process of each part
        # By kind key: its shown signals' call-phase totals over the processes (compile
        # time's breakdown), where any.
        self.shown: dict[str, dict[str, float]] = (
            _shown_totals(processes) if any(process.call_health for process in processes) else {})

    @property
    def own(self) -> ProcessSnapshot:
        return self.processes[0]

    @property
    def children(self) -> tuple[ProcessSnapshot, ...]:
        return self.processes[1:]


def _shown_totals(processes: tuple[ProcessSnapshot, ...]) -> dict[str, dict[str, float]]:
    from ..vocabulary.kinds import KINDS
    from ..vocabulary.measures import sum_by_signal

    found = {}
    for kind in KINDS:
        if kind.shown_signals and kind.shown_key:
            totals = sum_by_signal((event.what, event.amount) for process in processes
                                   for event in process.signals(kind.shown_signals))
            if totals:
                found[kind.key] = totals
    return found
