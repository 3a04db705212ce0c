"""The live view of a test's recompiles that the ``nocompile_recompiles`` fixture gives (and a
block assertion's log)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence, overload

if TYPE_CHECKING:
    from ..vocabulary.events import Phase, RecompileEvent


class RecompileLog(Sequence["RecompileEvent"]):
    """A live, read-only view of the recompiles recorded so far in a test.

    This is what the ``nocompile_recompiles`` fixture gives: it grows as the
    test runs. Index it, iterate it, or filter it with :meth:`in_phase`.
    """

    def __init__(self, events: list[RecompileEvent],
                 children: Optional[Callable[[], list[RecompileEvent]]] = None) -> None:
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
