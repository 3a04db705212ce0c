"""Compile caches: ``max_cache_misses(N)`` fails a test whose compiles missed (or bypassed)
inductor's FX graph cache and the AOTAutograd cache more than N times, with torch's reason for
each bypass (the kind in :mod:`.kind`; torch's counters count them, :mod:`.cache_bypass_reasons`
reads the reasons); the ``nocompile_warm_start`` fixture (a user's code run cold, then warm, in
two fresh processes sharing one private compile cache: :mod:`.warm_start`), and
``--nocompile-private-caches`` (compile caches of its own for each process that runs tests:
:mod:`.private_caches`), both on the cache folders of :mod:`.compile_caches`.

Hooks: ``pytest_nocompile_kinds`` (the ``cache_misses`` kind); ``pytest_addoption``
(``--nocompile-private-caches`` and its ini key), ``pytest_configure`` (registers the private
caches' session fixture, where asked); the fixture ``nocompile_warm_start``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import pytest

from ...vocabulary.kinds import BudgetKind
from ...watching.settings import SETTINGS_KEY, Flag
from .kind import CACHE_MISSES

if TYPE_CHECKING:
    from .warm_start import Target, WarmStart, WarmStartRunner


def pytest_nocompile_kinds() -> Sequence[BudgetKind]:
    return (CACHE_MISSES,)


PRIVATE_CACHES = Flag("--nocompile-private-caches", "nocompile_private_caches",
                      "give each process that runs tests (each xdist worker) its own torch "
                      "compile caches, under pytest's base temp folder, for the session",
                      "own torch compile caches for each xdist worker")


def pytest_addoption(parser: pytest.Parser) -> None:
    PRIVATE_CACHES.add_to(parser)


def pytest_configure(config: pytest.Config) -> None:
    if PRIVATE_CACHES.is_on(config) and not config.stash[SETTINGS_KEY].is_xdist_controller:
        from . import private_caches

        config.pluginmanager.register(private_caches, "nocompile-private-caches")


@pytest.fixture
def nocompile_warm_start(tmp_path_factory: pytest.TempPathFactory) -> WarmStartRunner:
    """``cold, warm = nocompile_warm_start(step)``: ``step`` run in a fresh process with an empty
    private compile cache, then in another sharing that cache; each run's compiles, recompiles,
    cache hits, misses and bypasses, and compile seconds. ``step``: a top-level function of an
    importable module, ``"module:function"``, or a script's path.
    """

    def cold_then_warm(target: Target, /, *, timeout: float | None = None) -> WarmStart:
        __tracebackhide__ = True
        from .warm_start import cold_then_warm

        # A folder per call, under this worker's base temp: no cache is shared with another call,
        # test or worker.
        return cold_then_warm(target, tmp_path_factory.mktemp("nocompile-warm-start"), timeout)

    return cold_then_warm
