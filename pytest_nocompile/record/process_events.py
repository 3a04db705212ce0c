"""One process's events in a test: the test's own, or a child's that reported;
counted per kind and phase. Loaded with a test's first event."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ..vocabulary.events import (
    METRICS_WITNESS,
    CodeLocation,
    CompileEvent,
    HealthEvent,
    RecompileEvent,
    RecompileLimitHit,
    frame_attempt,
    recompile_attempt,
    unlogged_recompile,
)
from ..vocabulary.graph_break_events import GraphBreakEvent, unlogged_graph_break
from ..vocabulary.kinds import COUNTED_KINDS, LOGS_NOT_READ, BudgetKind
from ..vocabulary.measures import Amount
from ..vocabulary.resume_names import RESUME_PREFIX

if TYPE_CHECKING:
    from ..observe.metrics_entries import MetricsGraph
    from ..observe.sink import Event
    from ..vocabulary.events import Phase, ProcessInfo


class ProcessEvents:
    """One process's events in a test: the test's own (``info`` None) or a child's that reported."""

    __slots__ = ("info", "world", "recompiles", "limit_hits", "graph_breaks", "compiles", "health",
                 "problems", "call_counts", "_pending", "_unconfirmed", "_break_places",
                 "_attempts", "changes", "_counts")

    def __init__(self, info: Optional[ProcessInfo] = None) -> None:
        self.info = info
        # a child's job's world size, where it said (with its rank)
        self.world: Optional[int] = None
        self.recompiles: list[RecompileEvent] = []
        self.limit_hits: list[RecompileLimitHit] = []
        self.graph_breaks: list[GraphBreakEvent] = []
        self.compiles: list[CompileEvent] = []
        # compile-health signals (cache misses, CUDA-graph re-records, ...)
        self.health: list[HealthEvent] = []
        self.problems: list[str] = []  # why a child could not watch itself
        self.call_counts: Optional[dict[str, Amount]] = None  # fixed when the test's call ended
        self._pending: Optional[RecompileEvent] = None  # the last recompile, until a graph compiles
        # a limit hit whose warning was not read: one only while its attempt compiles no graph
        self._unconfirmed: Optional[RecompileLimitHit] = None
        # made at the first graph break
        self._break_places: Optional[set[tuple[str, str, int, str]]] = None
        # the recompiles' attempts, "0/1", that a record or a compile id told of (made at the first)
        self._attempts: Optional[set[str]] = None
        # Events added so far, counted after each is in (a compiling thread may add one while
        # counts() runs), and counts() as of that many: the judge, the result and the
        # properties read one dict. Every add_* counts here: 0 is "nothing recorded" (the record's
        # empty(), asked several times of every test).
        self.changes = 0
        self._counts: Optional[tuple[int, dict[str, Amount]]] = None

    def add(self, event: Event) -> None:
        """An event of this process, by its type (a limit hit, a graph break: see each adder)."""
        _ADDERS[type(event)](self, event)

    def add_recompile(self, event: RecompileEvent) -> None:
        self.recompiles.append(event)
        self._pending = event
        self.changes += 1
        attempt = recompile_attempt(event.compile_id)
        if attempt is not None:
            self._attempts_told().add(attempt)

    def add_compile(self, event: CompileEvent) -> None:
        """A graph compiled; its second witnesses: its compile id may tell of a recompile, and a
        resume function of a graph break, that no record came for (both then counted)."""
        self.compiles.append(event)
        self._pending = None
        self.changes += 1
        if self._unconfirmed is not None and self._unconfirmed.compile_id == event.compile_id:
            self._not_refused(self._unconfirmed)
        # Where a log could not be switched on at all, its kind is not measured (LOGS_NOT_READ):
        # no second witness makes it a count the test is judged on.
        attempt = recompile_attempt(event.compile_id)
        if attempt is not None and "recompiles" not in LOGS_NOT_READ:
            told = self._attempts_told()
            if attempt not in told:
                told.add(attempt)
                self.recompiles.append(unlogged_recompile(event))
        compiling = event.compiling
        if (compiling is not None and compiling.function.startswith(RESUME_PREFIX)
                and "graph_breaks" not in LOGS_NOT_READ):
            unlogged = unlogged_graph_break(event, self.graph_breaks)
            if unlogged is not None:
                self.add_graph_break(unlogged)

    def add_metrics_graphs(self, graphs: Sequence[MetricsGraph]) -> None:
        """The graphs torch's compilation metrics say the call compiled: each that no record of
        the call's came for (by its compile id; without ids, those past the records' count) is a
        compile of its own, told by that witness."""
        if "graph_code" in LOGS_NOT_READ:  # not measured: see add_compile
            return
        logged = [event for event in self.compiles if event.phase == "call"]
        if all(graph.compile_id is not None for graph in graphs):
            # by the frame's attempt ("0/0_1", a restart of the trace, is "0/0"), whichever the two
            # give; an id in a form not known, as it is
            ids = {frame_attempt(event.compile_id) or event.compile_id for event in logged}
            unlogged = [graph for graph in graphs
                        if (frame_attempt(graph.compile_id) or graph.compile_id) not in ids]
        else:
            unlogged = list(graphs[len(logged):])
        for graph in unlogged:
            self.compiles.append(CompileEvent(
                graph.compile_id, phase="call",
                compiling=CodeLocation(graph.filename, graph.line, graph.function),
                witness=METRICS_WITNESS))
            self.changes += 1

    def _attempts_told(self) -> set[str]:
        attempts = self._attempts
        if attempts is None:
            attempts = self._attempts = set()
        return attempts

    def _not_refused(self, hit: RecompileLimitHit) -> None:
        """The attempt a warning not read came in compiled a graph: it was no refusal, and its
        recompile counts again."""
        self._unconfirmed = None
        self.limit_hits.remove(hit)
        if hit.refused is not None:
            self.recompiles.append(hit.refused)

    def add_graph_break(self, event: GraphBreakEvent) -> None:
        """A graph break, unless the same one (phase, place in user code,
        reason) was recorded already.

        A recompile traces the frame again, and with it the graph breaks it had: one place in the
        user's code breaking the graph is one graph break, however often dynamo traced it. A break
        whose place could not be read (line 0) always counts.
        """
        if event.line:
            place = (event.phase, event.filename, event.line, event.reason)
            places = self._break_places
            if places is None:
                places = self._break_places = set()
            elif place in places:
                return
            places.add(place)
        self.graph_breaks.append(event)
        self.changes += 1

    def add_limit_hit(self, hit: RecompileLimitHit) -> None:
        """A limit hit; the recompile dynamo logged just before it, for the same compile, was
        refused: it moves here.

        A warning whose text was not read (``hit.read`` False) is a limit hit only as such a
        refusal, and only while its attempt compiles no graph (:meth:`add_compile` undoes it).
        """
        pending = self._pending
        if (pending is not None and self.recompiles and self.recompiles[-1] is pending
                and _same_attempt(pending, hit)):
            self.recompiles.pop()
            hit = replace(hit, refused=pending)
        elif not hit.read:
            return  # no recompile refused: another warning of dynamo's, not a limit hit
        self._pending = None
        self.limit_hits.append(hit)
        self.changes += 1
        if not hit.read:
            self._unconfirmed = hit

    def add_health(self, event: HealthEvent) -> None:
        """A health event; one of amount 0 with a reason gives torch's reason for the
        same signal just counted.

        torch counts a cache bypass, then logs why: two sources report the two
        (torch's counter, and the caches feature's ``cache_bypass_reasons``).
        The reason joins the latest event of its signal in its thread when that
        one has none yet; else it stays an event of its own, which counts
        nothing.
        """
        if event.amount == 0 and event.reason is not None:
            for index in range(len(self.health) - 1, -1, -1):
                earlier = self.health[index]
                if earlier.what == event.what and earlier.thread == event.thread:
                    if earlier.reason is None and earlier.phase == event.phase:
                        self.health[index] = replace(earlier, reason=event.reason)
                        self.changes += 1
                        return
                    break
        self.health.append(event)
        self.changes += 1

    def count(self, kind: BudgetKind, phase: Optional[Phase] = "call") -> Amount:
        """How many of this kind happened in one phase (None: in every phase)."""
        if kind.events == "health":
            if not self.health:  # most tests: no health event, every health kind 0 without a scan
                return 0
            signals = kind.signals
            total = sum(event.amount for event in self.health
                        if event.what in signals and (phase is None or event.phase == phase))
            return total  # an int where the amounts are (counts); seconds are floats
        events = getattr(self, kind.events)
        if phase is None or not events:
            return len(events)
        return sum(1 for event in events if event.phase == phase)

    def signals(self, names: tuple[str, ...], phase: Optional[Phase] = "call") -> list[HealthEvent]:
        """The health events of these names, of one phase (None: every phase)."""
        return [event for event in self.health
                if event.what in names and (phase is None or event.phase == phase)]

    def counts(self) -> dict[str, Amount]:
        """Every counted kind's call-phase count (as fixed when the call ended, once it has)."""
        if self.call_counts is not None:
            return self.call_counts
        changes, kept = self.changes, self._counts
        if kept is not None and kept[0] == changes:
            return kept[1]
        counts = self._call_counts()
        self._counts = (changes, counts)
        return counts

    def _call_counts(self) -> dict[str, Amount]:
        return {kind.key: self.count(kind) for kind in COUNTED_KINDS}

    def sizes(self) -> tuple[int, int, int, int, int]:
        """How many recompiles, limit hits, graph breaks, compiles and health events so far (a
        block's starting point)."""
        return (len(self.recompiles), len(self.limit_hits), len(self.graph_breaks),
                len(self.compiles), len(self.health))

    def rename(self, info: ProcessInfo) -> None:
        """The process reported its rank (it initialised torch.distributed): its earlier
        events are that rank's too."""
        self.info = info
        self.recompiles[:] = [replace(event, process=info) for event in self.recompiles]
        self.limit_hits[:] = [replace(hit, process=info) for hit in self.limit_hits]
        self.graph_breaks[:] = [replace(event, process=info) for event in self.graph_breaks]
        self.compiles[:] = [replace(event, process=info) for event in self.compiles]
        self.health[:] = [replace(event, process=info) for event in self.health]


def _same_attempt(recompile: RecompileEvent, hit: RecompileLimitHit) -> bool:
    if hit.compile_id is not None and recompile.compile_id is not None:
        return hit.compile_id == recompile.compile_id
    # No compile ids: the limit warning names the function as "'f' (file:line)".
    return hit.function.strip("'").startswith(recompile.function)


# Each event's adder, by its type.
_ADDERS: dict[type, Callable[[ProcessEvents, Any], None]] = {
    RecompileEvent: ProcessEvents.add_recompile, CompileEvent: ProcessEvents.add_compile,
    GraphBreakEvent: ProcessEvents.add_graph_break, RecompileLimitHit: ProcessEvents.add_limit_hit,
    HealthEvent: ProcessEvents.add_health}
