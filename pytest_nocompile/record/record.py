"""What the plugin recorded for one test: each process's events, and the test's phase; taken as one
value by :meth:`RecompileRecord.snapshot`.

Every count is a count of events the plugin saw: one :class:`~.events.CompileEvent`
per graph dynamo compiled, one :class:`~.events.RecompileEvent` per recompile
that was not refused, one :class:`~.events.GraphBreakEvent` per graph break.
Nothing is read from torch's shared counters, which user code (and
``torch._dynamo.test_case.TestCase``) clears. Each event carries the phase it
happened in, so "only the call phase counts" is decided here and nowhere
else: a kind's count is its call-phase events (:attr:`~.kinds.BudgetKind.events`
names the list).

Other processes the test started (its children) reach the record through a
:class:`ProcessReports` a feature gives it (:meth:`RecompileRecord.read_children_from`; the
children feature's folders): each is a :class:`ProcessEvents` of the record, like the test's
own process, with its events placed in setup, call or teardown by when they were logged. A
budget applies to each process separately. What could not be read, and processes that could not
report, reach the test as warnings once it ends (or fail a budgeted test, when known as its call
ends).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator, Optional, Protocol, Sequence

from ..vocabulary.kinds import BudgetKind
from ..vocabulary.measures import Amount

if TYPE_CHECKING:
    import pytest

    from ..observe.metrics_entries import MetricsGraph
    from ..observe.sink import Event
    from ..vocabulary.events import (
        CompileEvent,
        Phase,
        ProcessInfo,
        RecompileEvent,
        RecompileLimitHit,
    )
    from ..vocabulary.graph_break_events import GraphBreakEvent
    from .log import RecompileLog
    from .process_events import ProcessEvents
    from .snapshot import TestSnapshot

# The events and their parser (.events), and a process's events (.process_events), load with the
# first event: a suite that never compiles makes a record per watched test and never needs them.

# Two threads' first events of one record make one ProcessEvents.
_MAKING_OWN = threading.Lock()


class ProcessReports(Protocol):
    """Where a test's other processes report (a feature's: the children feature's folders), told
    by the record of the test's phases: methods, not hooks, as they come for every watched test."""

    @property
    def path(self) -> str:
        """Where they report, as a problem names it."""

    def read_into(self, record: RecompileRecord, final: bool) -> None:
        """Add to ``record`` what the processes reported since the last read (``final``: the test
        ended): their events (to ``record.children``), what was skipped (``record._skipped``) and
        why they could not report (:meth:`RecompileRecord.note_folder_problem`)."""

    def warnings(self, skipped: dict[str, list[str]],
                 problems: list[str]) -> list[pytest.PytestWarning]:
        """The test's warnings for what was skipped (by where) and those problems."""

    def enter(self, phase: Phase) -> None:
        """The test's call or teardown begins: processes started from now on are that phase's."""

    def close(self, record: RecompileRecord) -> None:
        """The test ended: read into ``record`` a last time, and undo what was set up for it."""


class ProcessReporting(Protocol):
    """Where every watched test's other processes report (a feature's, which
    ``pytest_nocompile_process_reports`` gives the run): a method, not a hook, as it comes for
    every watched test."""

    def begin(self, nodeid: str) -> ProcessReports:
        """A test's setup begins: where its processes report, from now on."""


class RecompileRecord:
    """Everything recorded for one test, and the phase it is in.

    A sink of :class:`~.observe.capture.DynamoLogs`: its ``add_*`` methods
    take what dynamo logs, in whatever thread compiled.
    """

    # Slots: a record is made for every watched test, nearly always to stay empty.
    __slots__ = ("phase", "_own", "_log", "call_started_at", "call_ended_at", "children",
                 "_reports", "_skipped", "_folder_problems", "_problems_shown", "pid")

    def __init__(self) -> None:
        self.phase: Phase = "setup"
        self._own: Optional[ProcessEvents] = None  # made when first asked for (see own)
        # made when asked for: it refers back to the record
        self._log: Optional[RecompileLog] = None
        # time.time(), to place children's events in a phase
        self.call_started_at: Optional[float] = None
        self.call_ended_at: Optional[float] = None
        # by token: the processes the test started that reported
        self.children: dict[str, ProcessEvents] = {}
        # where its child processes report
        self._reports: Optional[ProcessReports] = None
        # by where a child wrote: what was not counted, and why (its reports add to them)
        self._skipped: dict[str, list[str]] = {}
        self._folder_problems: list[str] = []  # why the test's processes could not report at all
        self._problems_shown: set[str] = set()  # in the call's failure: no warning repeats them
        self.pid = os.getpid()

    @property
    def own(self) -> ProcessEvents:
        """The test's own process's events: made when first asked for (its first event, or a
        reader), as nearly every record stays empty."""
        own = self._own
        if own is None:
            with _MAKING_OWN:
                own = self._own
                if own is None:
                    from .process_events import ProcessEvents

                    own = self._own = ProcessEvents()
        return own

    @property
    def log(self) -> RecompileLog:
        """The live view of the test's recompiles, in every process (the
        ``nocompile_recompiles`` fixture)."""
        if self._log is None:
            from .log import RecompileLog

            self._log = RecompileLog(self.own.recompiles, self._children_events)
        return self._log

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
        # the own process's events, by its count of them (every add_* counts)
        own = self._own
        return not ((own is not None and own.changes) or self.children or self._skipped
                    or self._folder_problems)

    def read_children_from(self, reports: ProcessReports) -> None:
        """Take child processes' events from this directory, at each phase's end and
        whenever they are looked at."""
        self._reports = reports

    # -- phases -----------------------------------------------------------------

    def start_call(self, at: Optional[float] = None) -> None:
        """The call starts (``at``: its ``time.time()``, for records built from written lines)."""
        if self._reports is not None:
            self._reports.enter("call")  # only processes started from here on count
        # children's events are placed by it when read
        self.call_started_at = time.time() if at is None else at
        self.phase = "call"

    def start_teardown(self) -> None:
        """The test's teardown begins: processes it starts from now on are teardown's."""
        if self._reports is not None:
            self._reports.enter("teardown")

    def end_test(self) -> None:
        """The test ended: its other processes' reports are read a last time (the teardown's, for
        its section), and what was set up for them is undone."""
        if self._reports is not None:
            self._reports.close(self)

    def end_call(self) -> None:
        """The call ended: later events are teardown's, and children's counts
        are fixed as read now."""
        if self.phase == "call":
            self.call_ended_at = time.time()
            self.phase = "teardown"
            self.read_children()
            for child in self.children.values():
                child.call_counts = child.counts()
        self.phase = "teardown"

    def add_metrics_graphs(self, graphs: Sequence[MetricsGraph]) -> None:
        """The graphs torch's compilation metrics say this process compiled in the call (read as
        it ends): a second witness of its compiles (:meth:`ProcessEvents.add_metrics_graphs`)."""
        if graphs:
            self.own.add_metrics_graphs(graphs)

    def add_metrics_witnesses(self, entries: Sequence[Any], wanted: frozenset[str]) -> None:
        """What the kinds read in the call (``wanted``: the signals) with a witness in torch's
        compilation metrics (:attr:`~.kinds.BudgetKind.metrics_witness`) find in its ``entries``
        that their signals did not count: events of this process's call."""
        from ..vocabulary.kinds import resolve
        from ..vocabulary.measures import sum_by_signal

        for kind in kinds_with_metrics_witness():
            if wanted.isdisjoint(kind.signals):
                continue
            own = self.own
            counted = sum_by_signal((event.what, event.amount) for event in own.health
                                    if event.phase == "call" and event.what in kind.signals)
            for event in resolve(kind.metrics_witness)(entries, counted):
                own.add(event)

    def end_setup(self) -> None:
        """Setup ended: what comes before a call (none, if setup failed) is not counted."""
        if self.phase == "setup":
            self.phase = "teardown"

    # -- counting ---------------------------------------------------------------

    def count(self, kind: BudgetKind) -> Amount:
        """How many of this kind the test's own process had in the call phase."""
        return self.own.count(kind)

    def counts(self) -> dict[str, Amount]:
        """Every kind's call-phase count in the test's own process, by kind key."""
        return self.own.counts()

    # -- processes ----------------------------------------------------------------

    def processes(self) -> Iterator[ProcessEvents]:
        """The test's own process, then each child that reported."""
        yield self.own
        yield from self.children.values()

    def snapshot(self) -> TestSnapshot:
        """The test's processes as they stand now, as one value for the judge and the outputs."""
        from .snapshot import ProcessSnapshot, TestSnapshot

        return TestSnapshot(tuple(ProcessSnapshot(process, self.process_label(process.info))
                                  for process in self.processes()), self.pid)

    def process_of(self, process: Optional[ProcessInfo]) -> ProcessEvents:
        """One process's events: the test's own (None), or a child's."""
        if process is None:
            return self.own
        return next(child for child in self.children.values() if child.info == process)

    def process_label(self, process: Optional[ProcessInfo]) -> str:
        from ..vocabulary.events import process_label

        return process_label(process, self.pid)

    def all_events(self) -> list[RecompileEvent]:
        """Every process's recompiles read so far: the test's own, then each child's."""
        return ([event for process in self.processes() for event in process.recompiles]
                if self.children else self.own.recompiles)

    def all_compiles(self) -> list[CompileEvent]:
        return [event for process in self.processes() for event in process.compiles]

    def any_health(self) -> bool:
        """Whether any process of the test recorded a health event (most tests: none)."""
        own = self._own
        return (own is not None and bool(own.health)) or any(
            child.health for child in self.children.values())

    def sizes_by_child(self) -> dict[str, int]:
        """How many recompiles each child has reported so far, by its key."""
        return {key: len(child.recompiles) for key, child in self.children.items()}

    def child_problems(self) -> list[str]:
        """Why processes of the test could not be watched, or could not report (each said once,
        here or in a warning)."""
        problems = self._all_problems()
        self._problems_shown.update(problems)
        return problems

    def _all_problems(self) -> list[str]:
        own = [f"{child.info}: {problem}" for child in self.children.values()
               for problem in child.problems]
        return self._folder_problems + own if self._folder_problems else own

    def child_warnings(self) -> list[pytest.PytestWarning]:
        """The test's warnings as it ends, each given once: what was skipped of its processes'
        reports, and processes that could not report (unless a failure said so already)."""
        reports = self._reports
        if reports is None or not (self._skipped or self.children or self._folder_problems):
            return []
        problems = [problem for problem in self._all_problems()
                    if problem not in self._problems_shown]
        found = reports.warnings(self._skipped, problems)
        self._skipped, self._problems_shown = {}, self._problems_shown.union(problems)
        return found

    def _children_events(self) -> list[RecompileEvent]:
        """For the fixture's live view: what children wrote until now."""
        self.read_children()
        return ([event for child in self.children.values() for event in child.recompiles]
                if self.children else [])

    def read_children(self, final: bool = False) -> None:
        """Add what child processes wrote since the last read, each event in
        the phase it was logged in.

        ``final``: the test ended, so a line still without its newline is cut
        off. Never raises: what cannot be read is skipped and said.
        """
        reports = self._reports
        if reports is None:
            return
        try:
            reports.read_into(self, final)
        except Exception as error:  # a defect of ours: the test must not pay for it
            self.note_folder_problem(f"could not read the reports in {reports.path}: "
                                     f"{type(error).__name__}: {error}")

    def note_folder_problem(self, problem: str) -> None:
        """Why the test's processes could not report at all (said once)."""
        if problem not in self._folder_problems:
            self._folder_problems.append(problem)

    # -- the sink: what capture hands over (in whatever thread compiled) --------

    def add(self, event: Event) -> None:
        """An event of the test's own process, placed in the test's phase now."""
        self.own.add(event if event.phase == self.phase else replace(event, phase=self.phase))


def kinds_with_metrics_witness() -> tuple[BudgetKind, ...]:
    """The kinds with a witness in torch's compilation metrics (few: read at every call's end)."""
    from ..vocabulary.kinds import KINDS

    return KINDS.derived(_with_metrics_witness)


def _with_metrics_witness(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    return tuple(kind for kind in kinds if kind.metrics_witness)
