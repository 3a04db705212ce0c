"""The block-scoped recompile assertion behind ``nocompile_assert_max_recompiles``."""

from __future__ import annotations

from typing import ContextManager, Protocol

from .budget import validate_count
from .events import RecompileEvent
from .record import RecompileLog, RecompileRecord
from .report import budget_headline, format_failure

ASSERT_FORM = "nocompile_assert_max_recompiles(N) or nocompile_assert_max_recompiles(N, exact=True), N an int >= 0"


class RecompileBudgetExceeded(AssertionError):
    """A block recompiled more (or, with ``exact=True``, other) than allowed."""


class AssertMaxRecompiles(Protocol):
    """Type of the ``nocompile_assert_max_recompiles`` fixture, for annotations.

    ``with nocompile_assert_max_recompiles(0) as block: ...`` raises
    :class:`RecompileBudgetExceeded` on leaving the block when it recompiled
    more than ``max_recompiles`` times (exactly that many with ``exact=True``);
    ``block`` lists the block's recompiles.
    """

    def __call__(self, max_recompiles: int, *, exact: bool = False) -> ContextManager[RecompileLog]: ...


class _RecompileBlock:
    """One ``with`` block: counts the record's recompiles between enter and exit."""

    def __init__(self, record: RecompileRecord, max_recompiles: int, exact: bool) -> None:
        self._shown = f"nocompile_assert_max_recompiles({max_recompiles!r}{', exact=True' if exact else ''})"
        validate_count(max_recompiles, self._shown, ASSERT_FORM)
        if not isinstance(exact, bool):
            raise TypeError(f"{self._shown}: exact must be True or False, got {exact!r}")
        self._record = record
        self._max_recompiles = max_recompiles
        self._exact = exact
        self._inside: list[RecompileEvent] = []

    def __enter__(self) -> RecompileLog:
        self._start = (len(self._record.events), len(self._record.limit_hits))
        return RecompileLog(self._inside)

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        __tracebackhide__ = True  # the traceback should end at the user's with-block
        events_start, hits_start = self._start
        self._inside += self._record.events[events_start:]
        if exc_type is not None:
            return  # the block's own error wins
        hits = self._record.limit_hits[hits_start:]
        count = len(self._inside)
        allowed = self._max_recompiles
        failed = count != allowed if self._exact else count > allowed
        if failed or hits:
            headline = budget_headline(count, allowed, self._shown, self._exact)
            raise RecompileBudgetExceeded(format_failure(headline, self._inside, hits))


def block_assertion(record: RecompileRecord) -> AssertMaxRecompiles:
    """Make the fixture's callable for one test's record."""

    def assert_max_recompiles(max_recompiles: int, *, exact: bool = False) -> _RecompileBlock:
        return _RecompileBlock(record, max_recompiles, exact)

    return assert_max_recompiles
