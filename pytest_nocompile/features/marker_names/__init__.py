"""Marker names: a mark a keystroke or two off one of the plugin's markers (``max_recompile``,
``dyanmic_dims``) is an error of each test it marks, naming the test, where the mark is and the
marker meant (:mod:`.marker_typos`); a name the user registered is left alone.

Hooks: ``pytest_configure`` (registers the run's :class:`~.marker_typos.MarkerTypos`, which
implements ``pytest_collection_finish`` and ``pytest_runtest_setup``), except on an xdist
controller, which never collects.
"""

from __future__ import annotations

import pytest

from ...watching.settings import SETTINGS_KEY


def pytest_configure(config: pytest.Config) -> None:
    if not config.stash[SETTINGS_KEY].is_xdist_controller:
        from .marker_typos import MarkerTypos

        config.pluginmanager.register(MarkerTypos(config), "nocompile-marker-names")
