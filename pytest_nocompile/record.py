"""What the plugin recorded for one test: its budget, each process's events, and the test's phase.

Every count is a count of events the plugin saw: one :class:`~.events.CompileEvent`
per graph dynamo compiled, one :class:`~.events.RecompileEvent` per recompile
that was not refused, one :class:`~.events.GraphBreakEvent` per graph break.
Nothing is read from torch's shared counters, which user code (and
``torch._dynamo.test_case.TestCase``) clears. Each event carries the phase it
happened in, so "only the call phase counts" is decided here and nowhere
else: a kind's count is its call-phase events (:attr:`~.kinds.BudgetKind.events`
names the list).

Child processes the test started report through files (:mod:`.observe.event_files`):
each is a :class:`ProcessEvents` of the record, like the test's own process,
with its events placed in setup, call or teardown by when they were logged.
A budget applies to each process separately. A process is known by the token
it writes (its pid and a random id), not by its pid: an ``exec`` keeps the
pid but is another process, shown as ``pid N #2``. Each line is checked
before it counts (:mod:`.child_lines`); what is skipped, and processes that
could not report, reach the test as a :class:`~.child_lines.ChildReportWarning`
once it ends (or fail a budgeted test, when known as its call ends).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence, overload

from .budget import RecompileBudget
from .kinds import BudgetKind
from .measures import Amount
from .process_events import ProcessEvents

if TYPE_CHECKING:
    from .child_lines import ChildLine, ChildReportWarning
    from .events import CodeLocation, CompileEvent, Phase, ProcessInfo, RecompileEvent, RecompileLimitHit
    from .graph_break_events import GraphBreakEvent
    from .module_names import CompiledModule
    from .observe.children import TestReports
    from .observe.event_files import EventDirectory, Reading

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


# The phases whose processes (a fixture's) are never counted, whenever they compile.
_FIXTURE_PHASES: dict[str, Phase] = {"setup": "setup", "teardown": "teardown"}


class RecompileRecord:
    """Everything recorded for one test, and the phase it is in.

    A sink of :class:`~.observe.capture.DynamoLogs`: its ``add_*`` methods
    take what dynamo logs, in whatever thread compiled.
    """

    # Slots: a record is made for every watched test, nearly always to stay empty.
    __slots__ = ("budget", "phase", "own", "_log", "call_started_at", "call_ended_at", "children", "_reports", "_skipped",
                 "_folder_problems", "_problems_shown", "pid")

    def __init__(self, budget: RecompileBudget | None = None) -> None:
        self.budget = budget or RecompileBudget()
        self.phase: Phase = "setup"
        self.own = ProcessEvents()
        self._log: Optional[RecompileLog] = None  # made when asked for: it refers back to the record
        self.call_started_at: Optional[float] = None  # time.time(), to place children's events in a phase
        self.call_ended_at: Optional[float] = None
        self.children: dict[str, ProcessEvents] = {}  # by token: the processes the test started that reported
        self._reports: Optional[EventDirectory | TestReports] = None  # where its child processes report
        self._skipped: dict[str, list[str]] = {}  # by child's file: the lines not counted, and why
        self._folder_problems: list[str] = []  # why the test's processes could not report at all
        self._problems_shown: set[str] = set()  # in the call's failure: no warning repeats them
        self.pid = os.getpid()

    @property
    def log(self) -> RecompileLog:
        """The live view of the test's recompiles, in every process (the ``nocompile_recompiles`` fixture)."""
        if self._log is None:
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
        own = self.own
        return not (own.compiles or own.recompiles or own.limit_hits or own.graph_breaks or own.health or self.children
                    or self._skipped or self._folder_problems)

    def read_children_from(self, reports: EventDirectory | TestReports) -> None:
        """Take child processes' events from this directory, at each phase's end and whenever they are looked at."""
        self._reports = reports

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

    def call_limit_hits(self) -> list[RecompileLimitHit]:
        return self.limit_hits_in("call") if self.own.limit_hits else []

    # -- processes ----------------------------------------------------------------

    def processes(self) -> Iterator[ProcessEvents]:
        """The test's own process, then each child that reported."""
        yield self.own
        yield from self.children.values()

    def counts_by_process(self) -> dict[Optional[ProcessInfo], dict[str, Amount]]:
        """Each process's call-phase counts: the test's own (key None), then each child that reported."""
        return {process.info: process.counts() for process in self.processes()}

    def process_label(self, process: Optional[ProcessInfo]) -> str:
        from .events import process_label

        return process_label(process, self.pid)

    def process_of(self, process: Optional[ProcessInfo]) -> ProcessEvents:
        if process is None:
            return self.own
        return next(child for child in self.children.values() if child.info == process)

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

    def any_health(self) -> bool:
        """Whether any process of the test recorded a health event (most tests: none)."""
        return bool(self.own.health) or any(child.health for child in self.children.values())

    def sizes_by_child(self) -> dict[str, int]:
        """How many recompiles each child has reported so far, by its key."""
        return {key: len(child.recompiles) for key, child in self.children.items()}

    def child_problems(self) -> list[str]:
        """Why processes of the test could not be watched, or could not report (each said once, here or in a warning)."""
        problems = self._all_problems()
        self._problems_shown.update(problems)
        return problems

    def _all_problems(self) -> list[str]:
        own = [f"{child.info}: {problem}" for child in self.children.values() for problem in child.problems]
        return self._folder_problems + own if self._folder_problems else own

    def child_warnings(self) -> list[ChildReportWarning]:
        """The test's warnings as it ends, each given once: a file's skipped lines, and processes that could not report
        (unless a failure said so already)."""
        if not (self._skipped or self.children or self._folder_problems):
            return []
        from .child_lines import skipped_warning, unreported_warning

        found = [skipped_warning(path, reasons) for path, reasons in self._skipped.items()]
        problems = [problem for problem in self._all_problems() if problem not in self._problems_shown]
        if problems:
            found.append(unreported_warning(problems))
        self._skipped, self._problems_shown = {}, self._problems_shown.union(problems)
        return found

    def _children_events(self) -> list[RecompileEvent]:
        """For the fixture's live view: what children wrote until now."""
        self.read_children()
        return [event for child in self.children.values() for event in child.recompiles] if self.children else []

    def read_children(self, final: bool = False) -> None:
        """Add what child processes wrote since the last read, each event in the phase it was logged in.

        ``final``: the test ended, so a line still without its newline is cut
        off. Never raises: what cannot be read is skipped and said.
        """
        reports = self._reports
        if reports is None:
            return
        try:
            reading = reports.read(final)
            if reading is not None and (reading.files or reading.unreported or reading.problem):  # else nothing to load .child_lines for
                self._take(reading)
        except Exception as error:  # a defect of ours: the test must not pay for it
            self._note_folder_problem(f"could not read the reports in {reports.path}: {type(error).__name__}: {error}")

    def _take(self, reading: Reading) -> None:
        from .child_lines import checked

        lines, skipped = checked(reading)
        for path, reasons in skipped.items():
            self._skipped.setdefault(path, []).extend(reasons)
        for line in lines:
            try:
                self._add_child_entry(line)
            except Exception as error:  # the event's text defeated a parser: say so rather than raise
                self._note_folder_problem(f"could not take a line of pid {line.pid}: {type(error).__name__}: {error}")
        for token, reason in reading.unreported:
            pid = token.partition("-")[0]
            child = self._child(token, int(pid) if pid.isdecimal() and len(pid) < 10 else 0)
            child.problems.append(f"could not write its report to {self._reports.path if self._reports else '?'} ({reason})")
        if reading.problem is not None:
            self._note_folder_problem(f"the test's processes {reading.problem}")

    def _note_folder_problem(self, problem: str) -> None:
        if problem not in self._folder_problems:
            self._folder_problems.append(problem)

    def _child(self, key: str, pid: int) -> ProcessEvents:
        child = self.children.get(key)
        if child is None:
            from .events import ProcessInfo

            nth = 1 + sum(1 for other in self.children.values() if other.info is not None and other.info.pid == pid)
            child = self.children[key] = ProcessEvents(ProcessInfo(pid, nth=nth))
        return child

    def _phase_at(self, moment: float) -> Phase:
        if self.call_started_at is None:
            return self.phase  # no call yet: setup, or teardown after a failed setup
        if moment < self.call_started_at:
            return "setup"
        if self.call_ended_at is None or moment < self.call_ended_at:
            return "call"
        return "teardown"

    def _add_child_entry(self, line: ChildLine) -> None:
        from .events import CompileEvent, parse_limit_warning

        child = self._child(line.key, line.pid)
        if line.world is not None:
            child.world = line.world
        info = child.info
        assert info is not None  # a child always has its info
        if line.rank is not None and line.rank != info.rank or line.command and not info.command:
            info = replace(info, rank=info.rank if line.rank is None else line.rank, command=info.command or line.command)
            child.rename(info)
        # A process started in setup or teardown (a fixture's) is that phase's whenever it logs: never counted.
        phase = _FIXTURE_PHASES.get(line.started_in or "") or self._phase_at(line.moment)
        what = line.event
        if what == "recompile":
            child.add_recompile(replace(_recompile_event(line.message, phase, line.compile_id, line.user_code, line.thread, line.module), process=info))
        elif what == "compile":
            child.add_compile(CompileEvent(line.compile_id, line.user_code, phase, line.thread, info, line.compiling, line.module))
        elif what == "limit":
            hit = parse_limit_warning(line.message, phase)
            if hit is not None:
                child.add_limit_hit(replace(hit, process=info), line.compile_id)
        elif what == "graph_break":
            child.add_graph_break(replace(_graph_break_event(line.message, phase), process=info, module=line.module))
        elif what == "health":
            from .events import HealthEvent

            child.add_health(HealthEvent(line.what or "?", _whole(line.amount), line.message or None, line.compile_id,
                                         line.user_code, phase, line.thread, info, line.compiling, line.module))
        elif what == "problem":
            child.problems.append(line.message)

    # -- the sink: what capture hands over (in whatever thread compiled) --------

    def add_recompile(self, message: str, compile_id: str | None, user_code: CodeLocation | None, thread: str | None, module: CompiledModule | None = None) -> None:
        self.own.add_recompile(_recompile_event(message, self.phase, compile_id, user_code, thread, module))

    def add_compile(self, compile_id: str | None, user_code: CodeLocation | None, thread: str | None, compiling: CodeLocation | None = None,
                    module: CompiledModule | None = None) -> None:
        from .events import CompileEvent

        self.own.add_compile(CompileEvent(compile_id, user_code, self.phase, thread, compiling=compiling, module=module))

    def add_limit_warning(self, message: str, compile_id: str | None = None, thread: str | None = None) -> None:
        from .events import parse_limit_warning

        hit = parse_limit_warning(message, self.phase)
        if hit is not None:
            self.own.add_limit_hit(hit, compile_id)

    def add_graph_break(self, message: str, module: CompiledModule | None = None) -> None:
        self.own.add_graph_break(replace(_graph_break_event(message, self.phase), module=module))

    def add_health(self, what: str, amount: float, reason: str | None, compile_id: str | None, user_code: CodeLocation | None,
                   thread: str | None, compiling: CodeLocation | None = None, module: CompiledModule | None = None) -> None:
        from .events import HealthEvent

        self.own.add_health(HealthEvent(what, amount, reason, compile_id, user_code, self.phase, thread, compiling=compiling, module=module))

    def in_phase(self, phase: Phase) -> list[RecompileEvent]:
        """Every process's recompiles of one phase, as read at the phase ends (the fixture's view reads anew)."""
        return [event for event in self.all_events() if event.phase == phase]

    def limit_hits_in(self, phase: Phase) -> list[RecompileLimitHit]:
        return [hit for hit in self.own.limit_hits if hit.phase == phase]


def _whole(amount: float) -> float:
    """A child's amount as it was sent: JSON keeps 2 as 2, but a count stays an int through our own checks too."""
    return int(amount) if float(amount).is_integer() else amount


def _recompile_event(message: str, phase: Phase, compile_id: str | None, user_code: CodeLocation | None, thread: str | None, module: CompiledModule | None) -> RecompileEvent:
    from .events import RecompileEvent, UnrecognisedMessage, event_from_message

    try:
        return event_from_message(message, phase, compile_id, user_code, thread, module)
    except UnrecognisedMessage:
        # Count it anyway: a recompile we cannot parse is still a recompile.
        return RecompileEvent("<unparsed>", "?", 0, (), message, phase, compile_id, user_code, thread, module=module)


def _graph_break_event(message: str, phase: Phase) -> GraphBreakEvent:
    from .events import UnrecognisedMessage
    from .graph_break_events import GraphBreakEvent, parse_graph_break_message

    try:
        return parse_graph_break_message(message, phase)
    except UnrecognisedMessage:
        return GraphBreakEvent("?", 0, message.splitlines()[0] if message else "<unparsed>", None, message, phase)
