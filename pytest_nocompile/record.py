"""What the plugin recorded for one test: its budget, its events, and its phase.

The record owns its phase: the watcher tells it when the call starts and ends,
and it snapshots every kind's running tally there. A kind's count is the
difference of those snapshots, so "only the call phase counts" is decided here
and nowhere else.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional, Sequence, overload

from .budget import COMPILES, GRAPH_BREAKS, KINDS, RECOMPILES, BudgetKind, RecompileBudget
from .events import (
    CodeLocation,
    GraphBreakEvent,
    Phase,
    RecompileEvent,
    RecompileLimitHit,
    UnrecognisedMessage,
    event_from_message,
    parse_graph_break_message,
    parse_limit_warning,
)


class RecompileLog(Sequence[RecompileEvent]):
    """A live, read-only view of the recompiles recorded so far in a test.

    This is what the ``nocompile_recompiles`` fixture gives: it grows as the
    test runs. Index it, iterate it, or filter it with :meth:`in_phase`.
    """

    def __init__(self, events: list[RecompileEvent]) -> None:
        self._events = events

    @overload
    def __getitem__(self, index: int) -> RecompileEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[RecompileEvent]: ...
    def __getitem__(self, index: int | slice) -> RecompileEvent | Sequence[RecompileEvent]:
        return self._events[index]

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[RecompileEvent]:
        return iter(list(self._events))

    def in_phase(self, phase: Phase) -> list[RecompileEvent]:
        """The recompiles that happened during one test phase."""
        return [event for event in self._events if event.phase == phase]

    def __repr__(self) -> str:
        return f"RecompileLog({list(self._events)!r})"


def _no_graphs() -> int:
    return 0


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

    # -- phases -----------------------------------------------------------------

    def start_call(self) -> None:
        self._call_start = self._tallies()
        self.phase = "call"

    def end_call(self) -> None:
        if self.phase == "call":
            self._call_counts = self._counts_since_call_start()
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

    # -- events, added by capture's sinks (in whatever thread compiled) ---------

    def add_recompile(
        self, message: str, compile_id: str | None, user_code: CodeLocation | None, thread: str | None
    ) -> None:
        try:
            event = event_from_message(message, self.phase, compile_id, user_code, thread)
        except UnrecognisedMessage:
            # Count it anyway: a recompile we cannot parse is still a recompile.
            event = RecompileEvent("<unparsed>", "?", 0, (), message, self.phase, compile_id, user_code, thread)
        self.events.append(event)

    def add_limit_warning(self, message: str) -> None:
        hit = parse_limit_warning(message, self.phase)
        if hit is not None:
            self.limit_hits.append(hit)

    def add_graph_break(self, message: str) -> None:
        try:
            event = parse_graph_break_message(message, self.phase)
        except UnrecognisedMessage:
            event = GraphBreakEvent("?", 0, message.splitlines()[0] if message else "<unparsed>", None, message, self.phase)
        self.graph_breaks.append(event)

    def in_phase(self, phase: Phase) -> list[RecompileEvent]:
        return self.log.in_phase(phase)

    def graph_breaks_in(self, phase: Phase) -> list[GraphBreakEvent]:
        return [event for event in self.graph_breaks if event.phase == phase]

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
