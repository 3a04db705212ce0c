"""What the plugin recorded for one test: its budget, each process's events, and the test's phase.

Every count is a count of events the plugin saw: one :class:`~.events.CompileEvent`
per graph dynamo compiled, one :class:`~.events.RecompileEvent` per recompile
that was not refused, one :class:`~.events.GraphBreakEvent` per graph break.
Nothing is read from torch's shared counters, which user code (and
``torch._dynamo.test_case.TestCase``) clears. Each event carries the phase it
happened in, so "only the call phase counts" is decided here and nowhere
else: a kind's count is its call-phase events (:attr:`~.budget.BudgetKind.events`
names the list).

Child processes the test started report through files (:mod:`.observe.event_files`):
each is a :class:`ProcessEvents` of the record, like the test's own process,
with its events placed in setup, call or teardown by when they were logged.
A budget applies to each process separately.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, overload

from .budget import KINDS, BudgetKind, RecompileBudget

if TYPE_CHECKING:
    from .events import CodeLocation, CompileEvent, GraphBreakEvent, Phase, ProcessInfo, RecompileEvent, RecompileLimitHit
    from .observe.children import TestReports
    from .observe.event_files import EventDirectory

# The events and their parser (.events) load with the first event: a suite that
# never compiles makes a record per watched test and never needs them.

class RecompileLog(Sequence["RecompileEvent"]):
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


class ProcessEvents:
    """One process's events in a test: the test's own (``info`` None) or a child's that reported."""

    __slots__ = ("info", "recompiles", "limit_hits", "graph_breaks", "compiles", "problems", "call_counts", "_pending")

    def __init__(self, info: Optional[ProcessInfo] = None) -> None:
        self.info = info
        self.recompiles: list[RecompileEvent] = []
        self.limit_hits: list[RecompileLimitHit] = []
        self.graph_breaks: list[GraphBreakEvent] = []
        self.compiles: list[CompileEvent] = []
        self.problems: list[str] = []  # why a child could not watch itself
        self.call_counts: Optional[dict[str, int]] = None  # fixed when the test's call ended
        self._pending: Optional[RecompileEvent] = None  # the last recompile, until a graph compiles

    def add_recompile(self, event: RecompileEvent) -> None:
        self.recompiles.append(event)
        self._pending = event

    def add_compile(self, event: CompileEvent) -> None:
        self.compiles.append(event)
        self._pending = None

    def add_graph_break(self, event: GraphBreakEvent) -> None:
        self.graph_breaks.append(event)

    def add_limit_hit(self, hit: RecompileLimitHit, compile_id: Optional[str]) -> None:
        """A limit hit; the recompile dynamo logged just before it, for the same compile, was refused: it moves here."""
        pending = self._pending
        if pending is not None and self.recompiles and self.recompiles[-1] is pending and _same_attempt(pending, hit, compile_id):
            self.recompiles.pop()
            hit = replace(hit, refused=pending)
        self._pending = None
        self.limit_hits.append(hit)

    def count(self, kind: BudgetKind, phase: Phase = "call") -> int:
        """How many of this kind happened in one phase."""
        return sum(1 for event in getattr(self, kind.events) if event.phase == phase)

    def counts(self) -> dict[str, int]:
        """Every kind's call-phase count (as fixed when the call ended, once it has)."""
        if self.call_counts is not None:
            return self.call_counts
        return {kind.key: self.count(kind) for kind in KINDS}

    def of_phase(self, phase: Optional[Phase]) -> tuple[list[RecompileEvent], list[RecompileLimitHit], list[GraphBreakEvent]]:
        """Recompiles, limit hits and graph breaks of one phase (None: every phase)."""
        if phase is None:
            return self.recompiles, self.limit_hits, self.graph_breaks
        return ([event for event in self.recompiles if event.phase == phase],
                [hit for hit in self.limit_hits if hit.phase == phase],
                [event for event in self.graph_breaks if event.phase == phase])

    def sizes(self) -> tuple[int, int, int, int]:
        """How many recompiles, limit hits, graph breaks and compiles so far (a block's starting point)."""
        return len(self.recompiles), len(self.limit_hits), len(self.graph_breaks), len(self.compiles)

    def rename(self, info: ProcessInfo) -> None:
        """The process reported its rank (it initialised torch.distributed): its earlier events are that rank's too."""
        self.info = info
        self.recompiles[:] = [replace(event, process=info) for event in self.recompiles]
        self.limit_hits[:] = [replace(hit, process=info) for hit in self.limit_hits]
        self.graph_breaks[:] = [replace(event, process=info) for event in self.graph_breaks]
        self.compiles[:] = [replace(event, process=info) for event in self.compiles]


def _same_attempt(recompile: RecompileEvent, hit: RecompileLimitHit, compile_id: Optional[str]) -> bool:
    if compile_id is not None and recompile.compile_id is not None:
        return compile_id == recompile.compile_id
    # No compile ids: the limit warning names the function as "'f' (file:line)".
    return hit.function.strip("'").startswith(recompile.function)


class RecompileRecord:
    """Everything recorded for one test, and the phase it is in.

    A sink of :class:`~.observe.capture.DynamoLogs`: its ``add_*`` methods
    take what dynamo logs, in whatever thread compiled.
    """

    def __init__(self, budget: RecompileBudget | None = None) -> None:
        self.budget = budget or RecompileBudget()
        self.phase: Phase = "setup"
        self.own = ProcessEvents()
        self.log = RecompileLog(self.own.recompiles)
        self.call_started_at: Optional[float] = None  # time.time(), to place children's events in a phase
        self.call_ended_at: Optional[float] = None
        self.children: dict[int, ProcessEvents] = {}  # by pid: the processes the test started that reported
        self._reports: Optional[EventDirectory | TestReports] = None
        self.pid = os.getpid()

    # The test's own process's events, as lists.
    @property
    def events(self) -> list[RecompileEvent]:
        return self.own.recompiles

    @property
    def limit_hits(self) -> list[RecompileLimitHit]:
        return self.own.limit_hits

    @property
    def graph_breaks(self) -> list[GraphBreakEvent]:
        return self.own.graph_breaks

    @property
    def compiles(self) -> list[CompileEvent]:
        return self.own.compiles

    def empty(self) -> bool:
        """Nothing was recorded in any process (the usual case for a test that never compiles)."""
        own = self.own
        return not (own.compiles or own.recompiles or own.limit_hits or own.graph_breaks or self.children)

    def read_children_from(self, reports: EventDirectory | TestReports) -> None:
        """Take child processes' events from this directory, at each phase's end and whenever they are looked at."""
        self._reports = reports
        self.log = RecompileLog(self.own.recompiles, self._children_events)

    # -- phases -----------------------------------------------------------------

    def start_call(self, at: Optional[float] = None) -> None:
        """The call starts (``at``: its ``time.time()``, for records built from written lines)."""
        self.call_started_at = time.time() if at is None else at  # children's events are placed by it when read
        self.phase = "call"

    def end_call(self) -> None:
        """The call ended: later events are teardown's, and children's counts are fixed as read now."""
        if self.phase == "call":
            self.call_ended_at = time.time()
            self.phase = "teardown"
            self.read_children()
            for child in self.children.values():
                child.call_counts = child.counts()
        self.phase = "teardown"

    def end_setup(self) -> None:
        """Setup reported: what comes before a call (none, if setup failed) is not counted."""
        if self.phase == "setup":
            self.phase = "teardown"

    # -- counting ---------------------------------------------------------------

    def count(self, kind: BudgetKind) -> int:
        """How many of this kind the test's own process had in the call phase."""
        return self.own.count(kind)

    def counts(self) -> dict[str, int]:
        """Every kind's call-phase count in the test's own process, by kind key."""
        return self.own.counts()

    def call_limit_hits(self) -> list[RecompileLimitHit]:
        return self.limit_hits_in("call") if self.own.limit_hits else []

    # -- processes ----------------------------------------------------------------

    def processes(self) -> Iterator[ProcessEvents]:
        """The test's own process, then each child that reported."""
        yield self.own
        yield from self.children.values()

    def counts_by_process(self) -> dict[Optional[ProcessInfo], dict[str, int]]:
        """Each process's call-phase counts: the test's own (key None), then each child that reported."""
        return {process.info: process.counts() for process in self.processes()}

    def process_label(self, process: Optional[ProcessInfo]) -> str:
        from .events import process_label

        return process_label(process, self.pid)

    def process_of(self, process: Optional[ProcessInfo]) -> ProcessEvents:
        return self.own if process is None else self.children[process.pid]

    def events_of(self, process: Optional[ProcessInfo], phase: Optional[Phase] = None
                  ) -> tuple[list[RecompileEvent], list[RecompileLimitHit], list[GraphBreakEvent]]:
        """One process's recompiles, limit hits and graph breaks (None: the test's own), of one phase or every phase."""
        return self.process_of(process).of_phase(phase)

    def all_events(self) -> list[RecompileEvent]:
        """Every process's recompiles read so far: the test's own, then each child's."""
        return [event for process in self.processes() for event in process.recompiles] if self.children else self.own.recompiles

    def all_limit_hits(self) -> list[RecompileLimitHit]:
        return [hit for process in self.processes() for hit in process.limit_hits]

    def all_graph_breaks(self) -> list[GraphBreakEvent]:
        return [event for process in self.processes() for event in process.graph_breaks]

    def all_compiles(self) -> list[CompileEvent]:
        return [event for process in self.processes() for event in process.compiles]

    def child_problems(self) -> list[str]:
        return [f"{child.info}: {problem}" for child in self.children.values() for problem in child.problems]

    def _children_events(self) -> list[RecompileEvent]:
        """For the fixture's live view: what children wrote until now."""
        self.read_children()
        return [event for child in self.children.values() for event in child.recompiles]

    def read_children(self) -> None:
        """Add what child processes wrote since the last read, each event in the phase it was logged in."""
        reports = self._reports
        if reports is None:
            return
        for entry in reports.read_new():
            try:
                self._add_child_entry(entry)
            except (KeyError, TypeError, ValueError, IndexError):
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
        from .events import CompileEvent, ProcessInfo, parse_limit_warning

        pid = int(entry["pid"])
        moment = float(entry["t"])
        child = self.children.get(pid)
        if child is None:
            child = self.children[pid] = ProcessEvents(ProcessInfo(pid))
        rank = entry.get("rank")
        if rank is not None and rank != child.info.rank:  # type: ignore[union-attr]  # a child always has its info
            child.rename(ProcessInfo(pid, int(rank)))
        # A process started in setup or teardown (a fixture's) is that phase's whenever it logs: never counted.
        started_in = entry.get("started_in")
        phase = started_in if started_in in ("setup", "teardown") else self._phase_at(moment)
        what = entry["event"]
        info = child.info
        if what == "recompile":
            event = _recompile_event(entry["message"], phase, entry.get("compile_id"), _location(entry.get("user_code")), entry.get("thread"))
            child.add_recompile(replace(event, process=info))
        elif what == "compile":
            child.add_compile(CompileEvent(entry.get("compile_id"), _location(entry.get("user_code")), phase, entry.get("thread"), info))
        elif what == "limit":
            hit = parse_limit_warning(entry["message"], phase)
            if hit is not None:
                child.add_limit_hit(replace(hit, process=info), entry.get("compile_id"))
        elif what == "graph_break":
            child.add_graph_break(replace(_graph_break_event(entry["message"], phase), process=info))
        elif what == "problem":
            child.problems.append(str(entry["message"]))

    # -- the sink: what capture hands over (in whatever thread compiled) --------

    def add_recompile(self, message: str, compile_id: str | None, user_code: CodeLocation | None, thread: str | None) -> None:
        self.own.add_recompile(_recompile_event(message, self.phase, compile_id, user_code, thread))

    def add_compile(self, compile_id: str | None, user_code: CodeLocation | None, thread: str | None) -> None:
        from .events import CompileEvent

        self.own.add_compile(CompileEvent(compile_id, user_code, self.phase, thread))

    def add_limit_warning(self, message: str, compile_id: str | None = None, thread: str | None = None) -> None:
        from .events import parse_limit_warning

        hit = parse_limit_warning(message, self.phase)
        if hit is not None:
            self.own.add_limit_hit(hit, compile_id)

    def add_graph_break(self, message: str) -> None:
        self.own.add_graph_break(_graph_break_event(message, self.phase))

    def in_phase(self, phase: Phase) -> list[RecompileEvent]:
        """Every process's recompiles of one phase, as read at the phase ends (the fixture's view reads anew)."""
        return [event for event in self.all_events() if event.phase == phase]

    def limit_hits_in(self, phase: Phase) -> list[RecompileLimitHit]:
        return [hit for hit in self.own.limit_hits if hit.phase == phase]


def _location(fields: Any) -> Optional[CodeLocation]:
    """A child's ``[file, line, function, code]``, as written by :mod:`.observe.startup`."""
    from .events import CodeLocation

    return CodeLocation(str(fields[0]), int(fields[1]), str(fields[2]), fields[3]) if fields else None


def _recompile_event(message: str, phase: Phase, compile_id: str | None, user_code: CodeLocation | None,
                     thread: str | None) -> RecompileEvent:
    from .events import RecompileEvent, UnrecognisedMessage, event_from_message

    try:
        return event_from_message(message, phase, compile_id, user_code, thread)
    except UnrecognisedMessage:
        # Count it anyway: a recompile we cannot parse is still a recompile.
        return RecompileEvent("<unparsed>", "?", 0, (), message, phase, compile_id, user_code, thread)


def _graph_break_event(message: str, phase: Phase) -> GraphBreakEvent:
    from .events import GraphBreakEvent, UnrecognisedMessage, parse_graph_break_message

    try:
        return parse_graph_break_message(message, phase)
    except UnrecognisedMessage:
        return GraphBreakEvent("?", 0, message.splitlines()[0] if message else "<unparsed>", None, message, phase)
