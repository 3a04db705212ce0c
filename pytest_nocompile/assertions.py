"""Block-scoped budget assertions: ``with nocompile_assert_max_recompiles(0): ...`` and one per budget kind."""

from __future__ import annotations

from typing import ContextManager, Optional, Protocol

from .budget import BudgetKind, validate_count
from .events import GraphBreakEvent, RecompileEvent
from .record import RecompileLog, RecompileRecord
from .report import explain
from .result import over_budget


class RecompileBudgetExceeded(AssertionError):
    """A block went over its budget: more (or, with ``exact=True``, other) than allowed."""


class BlockLog(RecompileLog):
    """What a ``with`` block recorded: its recompiles (as a sequence), and once it has ended,
    ``graph_breaks`` and ``counted``, the block's count of the asserted kind."""

    def __init__(self) -> None:
        super().__init__([])
        self.graph_breaks: list[GraphBreakEvent] = []
        self.counted: Optional[int] = None


class AssertMaxRecompiles(Protocol):
    """Type of the ``nocompile_assert_max_*`` fixtures, for annotations.

    ``with nocompile_assert_max_recompiles(0) as block: ...`` raises
    :class:`RecompileBudgetExceeded` on leaving the block when it recompiled
    more than allowed (exactly that many with ``exact=True``); ``block``
    lists the block's recompiles. The compile and graph-break fixtures work
    the same way.
    """

    def __call__(self, allowed: int, /, *, exact: bool = False) -> ContextManager[BlockLog]: ...


class _BudgetBlock:
    """One ``with`` block: counts one kind in the record between enter and exit."""

    def __init__(self, kind: BudgetKind, record: RecompileRecord, allowed: int, exact: bool) -> None:
        name = kind.assertion
        self._shown = f"{name}({allowed!r}{', exact=True' if exact else ''})"
        validate_count(allowed, self._shown, f"{name}(N) or {name}(N, exact=True), N an int >= 0")
        if not isinstance(exact, bool):
            raise TypeError(f"{self._shown}: exact must be True or False, got {exact!r}")
        self._kind = kind
        self._record = record
        self._allowed = allowed
        self._exact = exact
        self._log = BlockLog()

    def __enter__(self) -> BlockLog:
        record = self._record
        self._start = (record.tally(self._kind), len(record.events), len(record.limit_hits), len(record.graph_breaks))
        return self._log

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        __tracebackhide__ = True  # the traceback should end at the user's with-block
        record, log = self._record, self._log
        tally_start, events_start, hits_start, breaks_start = self._start
        recompiles: list[RecompileEvent] = record.events[events_start:]
        log._events += recompiles
        log.graph_breaks += record.graph_breaks[breaks_start:]
        count = log.counted = record.tally(self._kind) - tally_start
        if exc_type is not None:
            return  # the block's own error wins
        hits = record.limit_hits[hits_start:]
        if over_budget(self._kind, count, self._allowed, exact=self._exact, limit_hit=bool(hits)):
            headline = self._kind.headline(count, self._allowed, self._shown, self._exact)
            raise RecompileBudgetExceeded(explain(self._kind, headline, recompiles, hits, log.graph_breaks))


def block_assertion(kind: BudgetKind, record: RecompileRecord) -> AssertMaxRecompiles:
    """Make a fixture's callable for one kind and one test's record."""

    def assert_within(allowed: int, /, *, exact: bool = False) -> _BudgetBlock:
        return _BudgetBlock(kind, record, allowed, exact)

    assert_within.__name__ = kind.assertion
    return assert_within
