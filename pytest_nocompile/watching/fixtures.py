"""The plugin's fixtures: ``nocompile_recompiles`` and one ``nocompile_assert_max_<kind>`` per
budget kind.

Registered with pytest by :mod:`.plugin`. The block-assertion fixtures are made
from the budget kinds' table, so a new kind gets its fixture with no code here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pytest

from ..vocabulary.kinds import KINDS, BudgetKind

if TYPE_CHECKING:
    from ..record.log import RecompileLog
    from ..record.record import RecompileRecord
    from .assertions import AssertMaxRecompiles


@pytest.fixture
def nocompile_recompiles(request: pytest.FixtureRequest) -> RecompileLog:
    """The dynamo recompiles recorded so far in this test, as a live sequence of RecompileEvent.

    Recompiles of the processes the test started are included (``event.process``
    names each one's pid and rank) once they are written, as each happens.
    """
    return _record_of(request).log


def _block_fixture(kind: BudgetKind) -> Callable[..., Any]:
    def fixture(request: pytest.FixtureRequest) -> AssertMaxRecompiles:
        from .assertions import block_assertion

        return block_assertion(kind, _record_of(request))

    fixture.__doc__ = (f"``with {kind.assertion}(N): ...`` fails when the block has fewer than "
                       f"N {kind.counts}." if kind.is_floor
                       else f"``with {kind.assertion}(N, exact=False): ...`` fails when the block "
                       f"has more than N {kind.counts} (with exact=True: other than N).")
    return pytest.fixture(name=kind.assertion)(fixture)


# Module attributes, as pytest finds fixtures on a registered plugin module.
for _kind in KINDS:
    globals()[f"_{_kind.assertion}"] = _block_fixture(_kind)

def _record_of(request: pytest.FixtureRequest) -> RecompileRecord:
    from .watch import watch_of

    watch = watch_of(request.config, request.node.nodeid)
    if watch is None or watch.record is None:
        pytest.fail("pytest-nocompile fixtures work in test functions only (requested by "
                    f"{request.node.nodeid})", pytrace=False)
    return watch.record
