"""The plugin's fixtures: ``nocompile_recompiles``, one ``nocompile_assert_max_<kind>`` per budget kind, and ``nocompile_warm_start``.

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
    from .warm_start import Target, WarmStart, WarmStartRunner


@pytest.fixture
def nocompile_recompiles(request: pytest.FixtureRequest) -> RecompileLog:
    """The dynamo recompiles recorded so far in this test, as a live sequence of RecompileEvent.

    Recompiles of the processes the test started are included (``event.process``
    names each one's pid and rank) once they are written, as each happens.
    """
    return _record_of(request).log


@pytest.fixture
def nocompile_warm_start(tmp_path_factory: pytest.TempPathFactory) -> WarmStartRunner:
    """``cold, warm = nocompile_warm_start(step)``: ``step`` run in a fresh process with an empty private compile
    cache, then in another sharing that cache; each run's compiles, recompiles, cache hits, misses and bypasses,
    and compile seconds. ``step``: a top-level function of an importable module, ``"module:function"``, or a script's path.
    """

    def cold_then_warm(target: Target, /, *, timeout: float | None = None) -> WarmStart:
        __tracebackhide__ = True
        from .warm_start import cold_then_warm

        # A folder per call, under this worker's base temp: no cache is shared with another call, test or worker.
        return cold_then_warm(target, tmp_path_factory.mktemp("nocompile-warm-start"), timeout)

    return cold_then_warm


def _block_fixture(kind: BudgetKind) -> Callable[..., Any]:
    def fixture(request: pytest.FixtureRequest) -> AssertMaxRecompiles:
        from .assertions import block_assertion

        return block_assertion(kind, _record_of(request))

    fixture.__doc__ = (f"``with {kind.assertion}(N): ...`` fails when the block has fewer than N {kind.counts}." if kind.is_floor
                       else f"``with {kind.assertion}(N, exact=False): ...`` fails when the block has "
                       f"more than N {kind.counts} (with exact=True: other than N).")
    return pytest.fixture(name=kind.assertion)(fixture)


# Module attributes, as pytest finds fixtures on a registered plugin module.
for _kind in KINDS:
    globals()[f"_{_kind.assertion}"] = _block_fixture(_kind)

def _record_of(request: pytest.FixtureRequest) -> RecompileRecord:
    from .watch import watch_of

    watch = watch_of(request.config, request.node.nodeid)
    if watch is None or watch.record is None:
        pytest.fail(f"pytest-nocompile fixtures work in test functions only (requested by {request.node.nodeid})", pytrace=False)
    return watch.record
