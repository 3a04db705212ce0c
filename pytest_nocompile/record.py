"""What the plugin recorded for one test: its budget, its events, and its phase.

The record owns its phase: the watcher tells it when the call starts and ends,
and it snapshots every kind's running tally there. A kind's count is the
difference of those snapshots, so "only the call phase counts" is decided here
and nowhere else.

Child processes the test started report through files (:mod:`.event_files`):
each is a :class:`ChildProcess` of the record, with its own events and the
running tallies it reported over time, placed in setup, call or teardown by
when they were logged. A budget applies to each process separately.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, overload

from .budget import COMPILES, GRAPH_BREAKS, KINDS, RECOMPILES, BudgetKind, RecompileBudget
from .events import (
    CodeLocation,
    GraphBreakEvent,
    Phase,
    ProcessInfo,
    RecompileEvent,
    RecompileLimitHit,
    UnrecognisedMessage,
    event_from_message,
    parse_graph_break_message,
    parse_limit_warning,
    process_label,
)

if TYPE_CHECKING:
    from .observe.event_files import EventDirectory


class RecompileLog(Sequence[RecompileEvent]):
    """A live, read-only view of the recompiles recorded so far in a test.

    This is what the ``nocompile_recompiles`` fixture gives: it grows as the
    test runs. Index it, iterate it, or filter it with :meth:`in_phase`.
    """

    def __init__(self, events: list[RecompileEvent], children: Optional[Callable[[], list[RecompileEvent]]] = None) -> None:
        self._events = events
        self._children = children  # child processes' recompiles, read anew at each look

    def _all(self) -> list[RecompileEvent]:
        return self._events if self._children is None else self._events + self._children()

    @overload
    def __getitem__(self, index: int) -> RecompileEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[RecompileEvent]: ...
    def __getitem__(self, index: int | slice) -> RecompileEvent | Sequence[RecompileEvent]:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[RecompileEvent]:
        return iter(list(self._all()))

    def in_phase(self, phase: Phase) -> list[RecompileEvent]:
        """The recompiles that happened during one test phase."""
        return [event for event in self._all() if event.phase == phase]

    def __repr__(self) -> str:
        return f"RecompileLog({self._all()!r})"


def _no_graphs() -> int:
    return 0


class ChildProcess:
    """A child process's share of a record: its events, and the running tallies it reported, over time."""

    __slots__ = ("info", "events", "limit_hits", "graph_breaks", "problems", "_timeline", "call_counts")

    def __init__(self, pid: int) -> None:
        self.info = ProcessInfo(pid)  # its rank as last reported
        self.events: list[RecompileEvent] = []
        self.limit_hits: list[RecompileLimitHit] = []
        self.graph_breaks: list[GraphBreakEvent] = []
        self.problems: list[str] = []  # why it could not watch itself
        self._timeline: list[tuple[float, list[int]]] = []  # (when, each kind's running tally in KINDS order)
        self.call_counts: Optional[dict[str, int]] = None  # fixed when the test's call ended

    def rename(self, info: ProcessInfo) -> None:
        """The process reported its rank (it initialised torch.distributed): its earlier events are that rank's too."""
        self.info = info
        self.events[:] = [replace(event, process=info) for event in self.events]
        self.limit_hits[:] = [replace(hit, process=info) for hit in self.limit_hits]
        self.graph_breaks[:] = [replace(event, process=info) for event in self.graph_breaks]

    def tallies_at(self, moment: Optional[float]) -> list[int]:
        """Each kind's running tally as last reported at or before ``moment`` (None: the latest)."""
        tallies = [0] * len(_KEYS)
        for when, reported in self._timeline:
            if moment is not None and when > moment:
                break
            tallies = reported
        return tallies

    def counts_between(self, start: Optional[float], end: Optional[float]) -> dict[str, int]:
        if start is None:
            return dict.fromkeys(_KEYS, 0)
        return {key: after - before for key, before, after in zip(_KEYS, self.tallies_at(start), self.tallies_at(end))}


class RecompileRecord:
    """Everything recorded for one test, and the phase it is in.

    ``graphs_compiled`` reads the process's running count of graphs dynamo
    compiled (from capture); without it (torch not imported) nothing compiles.
    """

    def __init__(self, budget: RecompileBudget | None = None, graphs_compiled: Callable[[], int] = _no_graphs) -> None:
        self.budget = budget or RecompileBudget()
        self.phase: Phase = "setup"
        self.events: list[RecompileEvent] = []
        self.limit_hits: list[RecompileLimitHit] = []
        self.graph_breaks: list[GraphBreakEvent] = []
        self.log = RecompileLog(self.events)
        self._graphs_compiled = graphs_compiled
        self._call_start: Optional[list[int]] = None  # each kind's tally when the call started, in KINDS order
        self._call_counts: Optional[dict[str, int]] = None  # fixed when the call ended
        self.call_started_at: Optional[float] = None  # time.time(), to place children's events in a phase
        self.call_ended_at: Optional[float] = None
        self.children: dict[int, ChildProcess] = {}  # by pid: the processes the test started that reported
        self._reports: Optional[EventDirectory] = None
        self.pid = os.getpid()

    def read_children_from(self, reports: EventDirectory) -> None:
        """Take child processes' events from this directory, at each phase's end and whenever they are looked at."""
        self._reports = reports
        self.log = RecompileLog(self.events, self._children_events)

    # -- phases -----------------------------------------------------------------

    def start_call(self, at: Optional[float] = None) -> None:
        """The call starts (``at``: it started then, before this record was made)."""
        self.call_started_at = time.time() if at is None else at  # children's events are placed by it when read
        self._call_start = self._tallies()
        self.phase = "call"

    def end_call(self) -> None:
        if self.phase == "call":
            self.call_ended_at = time.time()
            self.read_children()
            self._call_counts = self._counts_since_call_start()
            for child in self.children.values():
                child.call_counts = child.counts_between(self.call_started_at, self.call_ended_at)
        self.phase = "teardown"

    def end_setup(self) -> None:
        """Setup reported: what comes before a call (none, if setup failed) is not counted."""
        if self.phase == "setup":
            self.phase = "teardown"

    # -- counting ---------------------------------------------------------------

    def tally(self, kind: BudgetKind) -> int:
        """The running total of one kind in this test so far, every phase included: the kind's counter."""
        return _COUNTERS[kind.key](self)

    def _tallies(self) -> list[int]:
        return [counter(self) for counter in _COUNTERS_IN_ORDER]

    def count(self, kind: BudgetKind) -> int:
        """How many of this kind the call phase had (so far, while it runs)."""
        return self.counts()[kind.key]

    def counts(self) -> dict[str, int]:
        """Every kind's call-phase count, by kind key (fixed once the call has ended)."""
        if self._call_counts is not None:
            return self._call_counts
        if self._call_start is None:
            return dict.fromkeys(_KEYS, 0)
        return self._counts_since_call_start()

    def _counts_since_call_start(self) -> dict[str, int]:
        return {key: after - before for key, before, after in zip(_KEYS, self._call_start or (), self._tallies())}

    def call_limit_hits(self) -> list[RecompileLimitHit]:
        return self.limit_hits_in("call") if self.limit_hits else []

    # -- processes ----------------------------------------------------------------

    def counts_by_process(self) -> dict[Optional[ProcessInfo], dict[str, int]]:
        """Each process's call-phase counts: the test's own (key None), then each child that reported."""
        counts: dict[Optional[ProcessInfo], dict[str, int]] = {None: self.counts()}
        for child in self.children.values():
            counts[child.info] = child.call_counts if child.call_counts is not None else child.counts_between(self.call_started_at, None)
        return counts

    def process_label(self, process: Optional[ProcessInfo]) -> str:
        return process_label(process, self.pid)

    def child_of(self, process: ProcessInfo) -> ChildProcess:
        return self.children[process.pid]

    def events_of(self, process: Optional[ProcessInfo], phase: Optional[Phase] = None
                  ) -> tuple[list[RecompileEvent], list[RecompileLimitHit], list[GraphBreakEvent]]:
        """One process's recompiles, limit hits and graph breaks (None: the test's own), of one phase or every phase."""
        if process is None:
            recompiles, hits, breaks = self.events, self.limit_hits, self.graph_breaks
        else:
            child = self.child_of(process)
            recompiles, hits, breaks = child.events, child.limit_hits, child.graph_breaks
        if phase is None:
            return recompiles, hits, breaks
        return ([event for event in recompiles if event.phase == phase], [hit for hit in hits if hit.phase == phase],
                [event for event in breaks if event.phase == phase])

    def all_events(self) -> list[RecompileEvent]:
        """Every process's recompiles read so far: the test's own, then each child's."""
        return self.events + [event for child in self.children.values() for event in child.events] if self.children else self.events

    def all_limit_hits(self) -> list[RecompileLimitHit]:
        return self.limit_hits + [hit for child in self.children.values() for hit in child.limit_hits]

    def all_graph_breaks(self) -> list[GraphBreakEvent]:
        return self.graph_breaks + [event for child in self.children.values() for event in child.graph_breaks]

    def child_problems(self) -> list[str]:
        return [f"{child.info}: {problem}" for child in self.children.values() for problem in child.problems]

    def tallies_by_process(self, kind: BudgetKind) -> dict[Optional[ProcessInfo], int]:
        """Each process's running tally of one kind now (children's as last reported)."""
        self.read_children()
        index = _KEYS.index(kind.key)
        tallies: dict[Optional[ProcessInfo], int] = {None: self.tally(kind)}
        for child in self.children.values():
            tallies[child.info] = child.tallies_at(None)[index]
        return tallies

    def _children_events(self) -> list[RecompileEvent]:
        """For the fixture's live view: what children wrote until now."""
        self.read_children()
        return [event for child in self.children.values() for event in child.events]

    def read_children(self) -> None:
        """Add what child processes wrote since the last read, each event in the phase it was logged in."""
        reports = self._reports
        if reports is None:
            return
        for entry in reports.read_new():
            try:
                self._add_child_entry(entry)
            except (KeyError, TypeError, ValueError):
                continue  # not a line of ours

    def _phase_at(self, moment: float) -> Phase:
        if self.call_started_at is None:
            return self.phase  # no call yet: setup, or teardown after a failed setup
        if moment < self.call_started_at:
            return "setup"
        if self.call_ended_at is None or moment < self.call_ended_at:
            return "call"
        return "teardown"

    def _add_child_entry(self, entry: dict[str, Any]) -> None:
        pid = int(entry["pid"])
        moment = float(entry["t"])
        child = self.children.get(pid)
        if child is None:
            child = self.children[pid] = ChildProcess(pid)
        rank = entry.get("rank")
        if rank is not None and rank != child.info.rank:
            child.rename(ProcessInfo(pid, int(rank)))
        phase = self._phase_at(moment)
        what = entry["event"]
        if what == "recompile":
            location = entry.get("user_code")
            user_code = CodeLocation(location[0], int(location[1]), location[2], location[3]) if location else None
            event = self._recompile_event(entry["message"], phase, entry.get("compile_id"), user_code, entry.get("thread"))
            child.events.append(replace(event, process=child.info))
        elif what == "limit":
            hit = parse_limit_warning(entry["message"], phase)
            if hit is not None:
                child.limit_hits.append(replace(hit, process=child.info))
        elif what == "graph_break":
            child.graph_breaks.append(replace(self._graph_break_event(entry["message"], phase), process=child.info))
        elif what == "problem":
            child.problems.append(str(entry["message"]))
        totals = entry.get("totals")
        if totals:
            child._timeline.append((moment, [int(totals.get(key, 0)) for key in _KEYS]))

    # -- events, added by capture's sinks (in whatever thread compiled) ---------

    def add_recompile(
        self, message: str, compile_id: str | None, user_code: CodeLocation | None, thread: str | None
    ) -> None:
        self.events.append(self._recompile_event(message, self.phase, compile_id, user_code, thread))

    @staticmethod
    def _recompile_event(message: str, phase: Phase, compile_id: str | None, user_code: CodeLocation | None,
                         thread: str | None) -> RecompileEvent:
        try:
            return event_from_message(message, phase, compile_id, user_code, thread)
        except UnrecognisedMessage:
            # Count it anyway: a recompile we cannot parse is still a recompile.
            return RecompileEvent("<unparsed>", "?", 0, (), message, phase, compile_id, user_code, thread)

    def add_limit_warning(self, message: str) -> None:
        hit = parse_limit_warning(message, self.phase)
        if hit is not None:
            self.limit_hits.append(hit)

    def add_graph_break(self, message: str) -> None:
        self.graph_breaks.append(self._graph_break_event(message, self.phase))

    @staticmethod
    def _graph_break_event(message: str, phase: Phase) -> GraphBreakEvent:
        try:
            return parse_graph_break_message(message, phase)
        except UnrecognisedMessage:
            return GraphBreakEvent("?", 0, message.splitlines()[0] if message else "<unparsed>", None, message, phase)

    def in_phase(self, phase: Phase) -> list[RecompileEvent]:
        """Every process's recompiles of one phase, as read at the phase ends (the fixture's view reads anew)."""
        return [event for event in self.all_events() if event.phase == phase]

    def limit_hits_in(self, phase: Phase) -> list[RecompileLimitHit]:
        return [hit for hit in self.limit_hits if hit.phase == phase]


# Each budget kind's counter: its running total in a record. A new kind in
# budget.KINDS needs one here; importing this module fails loudly without it.
_COUNTERS: dict[str, Callable[[RecompileRecord], int]] = {
    RECOMPILES.key: lambda record: len(record.events),
    GRAPH_BREAKS.key: lambda record: len(record.graph_breaks),
    COMPILES.key: lambda record: record._graphs_compiled(),
}
_COUNTERS_IN_ORDER = tuple(_COUNTERS[kind.key] for kind in KINDS)
_KEYS = tuple(kind.key for kind in KINDS)
