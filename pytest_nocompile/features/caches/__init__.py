"""Compile caches: the ``nocompile_warm_start`` fixture (a user's code run cold, then warm, in two
fresh processes sharing one private compile cache: :mod:`.warm_start`), and
``--nocompile-private-caches`` (compile caches of its own for each process that runs tests:
:mod:`.private_caches`), both on the cache folders of :mod:`.compile_caches`.

Hooks: ``pytest_configure`` (registers the private caches' session fixture, where asked);
the fixture ``nocompile_warm_start``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ...watching.settings import SETTINGS_KEY

if TYPE_CHECKING:
    from .warm_start import Target, WarmStart, WarmStartRunner


# Registered by the plugin's own pytest_configure once it has read the run's settings.
def pytest_configure(config: pytest.Config) -> None:
    settings = config.stash[SETTINGS_KEY]
    if settings.private_caches and not settings.is_xdist_controller:
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
