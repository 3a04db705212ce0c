"""Marker names: a mark a keystroke or two off one of the plugin's markers (``max_recompile``,
``dyanmic_dims``) is an error of each test it marks, naming the test, where the mark is and the
marker meant (:mod:`.marker_typos`); a name the user registered is left alone.

Hooks: ``pytest_collection_finish`` (the typos, found only where some collected test, class or
module has a marker of its own; :class:`~.marker_typos.FailTypodTests`, which implements
``pytest_runtest_setup``, registered only where one is a typo). An xdist controller collects
nothing, and finds none.
"""

from __future__ import annotations

import pytest

from ...watching.planning import marked_nodes


def pytest_collection_finish(session: pytest.Session) -> None:
    marked = marked_nodes(session.items)
    if marked:  # else (nearly every run) nothing is loaded
        from .marker_typos import MarkerTypos

        MarkerTypos(session.config).find(session, marked)
