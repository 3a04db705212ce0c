"""What the plugin recorded for one test: its budget, its recompiles, its limit hits."""

from __future__ import annotations

from typing import Iterator, Sequence, overload

from .budget import RecompileBudget
from .events import (
    CodeLocation,
    Phase,
    RecompileEvent,
    RecompileLimitHit,
    UnrecognisedMessage,
    event_from_message,
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

    def __init__(self, budget: RecompileBudget | None) -> None:
        self.budget = budget
        self.phase: Phase = "setup"
        self.events: list[RecompileEvent] = []
        self.limit_hits: list[RecompileLimitHit] = []
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

    def in_phase(self, phase: Phase) -> list[RecompileEvent]:
        return self.log.in_phase(phase)

    def exceeds_budget(self) -> bool:
        """True when the call phase recompiled more than allowed or hit dynamo's limit."""
        if self.budget is None:
            return False
        over = len(self.in_phase("call")) > self.budget.max_recompiles
        return over or any(hit.phase == "call" for hit in self.limit_hits)
