"""The block-scoped recompile assertion behind ``nocompile_assert_max_recompiles``."""

from __future__ import annotations

from contextlib import contextmanager
from typing import ContextManager, Iterator, Protocol

from .budget import validate_count
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


def block_assertion(record: RecompileRecord) -> AssertMaxRecompiles:
    """Make the fixture's callable for one test's record."""

    @contextmanager
    def assert_max_recompiles(max_recompiles: int, *, exact: bool = False) -> Iterator[RecompileLog]:
        __tracebackhide__ = True
        shown = f"nocompile_assert_max_recompiles({max_recompiles!r}{', exact=True' if exact else ''})"
        validate_count(max_recompiles, shown, ASSERT_FORM)
        if not isinstance(exact, bool):
            raise TypeError(f"{shown}: exact must be True or False, got {exact!r}")
        start = len(record.events)
        start_hits = len(record.limit_hits)
        inside: list = []
        yield RecompileLog(inside)
        inside += record.events[start:]
        hits = record.limit_hits[start_hits:]
        count = len(inside)
        failed = count != max_recompiles if exact else count > max_recompiles
        if failed or hits:
            headline = budget_headline(count, max_recompiles, shown, exact)
            raise RecompileBudgetExceeded(format_failure(headline, inside, hits))

    return assert_max_recompiles
