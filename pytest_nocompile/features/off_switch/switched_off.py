"""The fixtures with the plugin off (``-p no:nocompile``): used the same way, checking nothing.

Registered by the off switch (this island's ``__init__``) only where the
plugin is blocked; each fixture has the shape of its namesake in
:mod:`pytest_nocompile.watching.fixtures`. The run's summary says once that
the plugin is off.
"""

from __future__ import annotations

from contextlib import ContextDecorator
from typing import Any, Callable

import pytest

from ...vocabulary.kinds import KINDS, BudgetKind

OFF = "pytest-nocompile is off (-p no:nocompile)"
OFF_NOTE = "nocompile: off (-p no:nocompile): its markers, options and fixtures check nothing"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker's summary is not shown
        terminalreporter.write_line(OFF_NOTE)


class NoRecompiles(tuple[object, ...]):
    """The recompiles recorded with the plugin off: none, read as a ``RecompileLog`` is."""

    def in_phase(self, phase: str) -> list[object]:
        return []


@pytest.fixture
def nocompile_recompiles() -> NoRecompiles:
    """Off: no recompile is recorded, so the sequence stays empty."""
    return NoRecompiles()


@pytest.fixture
def nocompile_warm_start() -> Callable[..., Any]:
    """Off: ``nocompile_warm_start(step)`` skips the test: nothing measures its cold and warm runs.

    Counts of runs that were not watched would be numbers nothing measured,
    and running ``step`` in this process would not be a cold start.
    """

    def cold_then_warm(target: object, /, *, timeout: float | None = None) -> Any:
        __tracebackhide__ = True  # the skip is placed at the user's call
        pytest.skip(f"nocompile_warm_start: {OFF}, nothing is measured")

    return cold_then_warm


class OffBlockLog(NoRecompiles):
    """What a block records with the plugin off, read as a ``BlockLog`` is: no recompile, no graph
    break, no count."""

    def __init__(self) -> None:
        self.graph_breaks: list[object] = []
        self.counted = None


class OffBlock(ContextDecorator):
    """A block assertion with the plugin off, as a ``with`` block or a decorator: checks nothing."""

    def __enter__(self) -> OffBlockLog:
        return OffBlockLog()

    def __exit__(self, *_: object) -> None:
        return None


def off_block(allowed: object, /, *, exact: bool = False) -> OffBlock:
    """``nocompile_assert_max_recompiles(N, exact=...)`` with the plugin off."""
    return OffBlock()


def _block_fixture(kind: BudgetKind) -> Callable[..., Any]:
    def fixture() -> Callable[..., OffBlock]:
        return off_block

    fixture.__doc__ = f"Off: ``with {kind.assertion}(N): ...`` runs the block and checks nothing."
    return pytest.fixture(name=kind.assertion)(fixture)


# Module attributes, as pytest finds fixtures on a registered plugin module.
for _kind in KINDS:
    globals()[f"_{_kind.assertion}"] = _block_fixture(_kind)
