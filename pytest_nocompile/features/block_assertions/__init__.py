"""Block assertions: budget one block of a test, ``with nocompile_assert_max_recompiles(0): ...``
(one fixture per budget kind), or, with no fixture, ``with assert_max_recompiles(0): ...`` and
``@assert_max_recompiles(0)``, in a ``unittest.TestCase``, a helper or a script
(:mod:`.assertions`). A block is judged by the same rule as a test's budget
(:func:`~pytest_nocompile.judge.verdict.over_budget`) and its failure lists what it counted.

Hooks: ``pytest_configure`` (registers the fixtures ``nocompile_assert_max_<kind>``, made from
the kinds' table, gates' kinds included);
``pytest_nocompile_shown_in_failure`` (the recompiles a failed block's error lists already, so
that the test's report shows them once).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Callable, Optional

import pytest

from ...vocabulary.kinds import KINDS, BudgetKind
from ...watching.fixtures import record_of

if TYPE_CHECKING:
    from .assertions import AssertMaxRecompiles


def _block_fixture(kind: BudgetKind) -> Callable[..., Any]:
    def fixture(request: pytest.FixtureRequest) -> AssertMaxRecompiles:
        from .assertions import block_assertion

        return block_assertion(kind, record_of(request))

    fixture.__doc__ = (f"``with {kind.assertion}(N): ...`` fails when the block has fewer than "
                       f"N {kind.counts}." if kind.is_floor
                       else f"``with {kind.assertion}(N, exact=False): ...`` fails when the block "
                       f"has more than N {kind.counts} (with exact=True: other than N).")
    return pytest.fixture(name=kind.assertion)(fixture)


def pytest_configure(config: pytest.Config) -> None:
    """One fixture per kind the run has (the gates' too, which may register after this module),
    as attributes of a module of their own, where pytest finds fixtures on a registered plugin."""
    fixtures = types.ModuleType(f"{__name__}.fixtures")
    for kind in KINDS:
        setattr(fixtures, f"_{kind.assertion}", _block_fixture(kind))
    config.pluginmanager.register(fixtures, "nocompile-block-fixtures")


@pytest.hookimpl
def pytest_nocompile_shown_in_failure(error: Optional[BaseException]) -> Optional[list[object]]:
    if error is None:
        return None
    from .assertions import events_shown_by

    return events_shown_by(error) or None
