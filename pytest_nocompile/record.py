"""What the plugin recorded for one test: its budget, its recompiles, its limit hits."""

from __future__ import annotations

from typing import Iterator, Sequence, overload

from .budget import RecompileBudget
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


class RecompileRecord:
    """Everything recorded for one test; kept in the item's stash."""

    def __init__(self, budget: RecompileBudget | None = None) -> None:
        self.budget = budget or RecompileBudget()
        self.phase: Phase = "setup"
        self.events: list[RecompileEvent] = []
        self.limit_hits: list[RecompileLimitHit] = []
        self.graph_breaks: list[GraphBreakEvent] = []
        self.compiles = 0
        self.log = RecompileLog(self.events)

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

    def recompiles_over_budget(self) -> bool:
        """The call phase recompiled more than allowed, or hit dynamo's limit, under a recompile budget."""
        allowed = self.budget.max_recompiles
        if allowed is None:
            return False
        return len(self.in_phase("call")) > allowed or bool(self.limit_hits_in("call"))

    def graph_breaks_over_budget(self) -> bool:
        allowed = self.budget.max_graph_breaks
        return allowed is not None and len(self.graph_breaks_in("call")) > allowed

    def exceeds_budget(self) -> bool:
        return self.recompiles_over_budget() or self.graph_breaks_over_budget()
