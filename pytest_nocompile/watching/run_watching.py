"""Watching a run: whether it needs per-test hooks at all, registered once collection shows it does.

A run with no budget, no report and no test asking for one (a budget marker
or a nocompile fixture) registers no per-test hook; otherwise the
:class:`~.watcher.Watcher` takes every test the one way. torch is never
imported here before something else imports it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

import pytest

from ..observe import arrival, wanted_signals
from .planning import any_asks_to_be_watched
from .watcher import Watcher

if TYPE_CHECKING:
    from .results import Results
    from .settings import RunSettings

# Set in the processes a watched test starts (the child start-up feature's event_writer.ENV_VAR,
# not imported: no core module imports a feature).
REPORTS_TO_A_TEST = "PYTEST_NOCOMPILE_EVENTS"


class Watching:
    """Per run: registers the watcher once collection shows the run needs it, and tells it when
    dynamo arrives."""

    def __init__(self, config: pytest.Config, settings: RunSettings, results: Results) -> None:
        self.config = config
        self.settings = settings
        self.results = results
        self.watcher = Watcher(config, settings, results)
        self._narrowed = False
        self._wanted_before: Optional[frozenset[str]] = None

    # Only a process that collects tests runs this (an xdist controller does not).
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not (self.settings.watch_by_default or any_asks_to_be_watched(session.items)):
            # No budget, no report, and no test asks for one: nothing in this run can be watched.
            self.config.pluginmanager.unregister(self)
            self.config.pluginmanager.unregister(self.results)
            return
        self.config.pluginmanager.register(self.watcher, "nocompile-watcher")
        # else this pytest is a child of a watched test, whose reads it cannot know
        if REPORTS_TO_A_TEST not in os.environ:
            # The health sources this run's reports read; each budget or block assertion of another
            # kind adds its own.
            self._wanted_before = wanted_signals.narrow(
                None if self.settings.watch_every_test else frozenset())
            self._narrowed = True
        if not arrival.dynamo_imported():
            arrival.when_dynamo_arrives(self.watcher.dynamo_arrived)

    def pytest_sessionfinish(self) -> None:
        self._stop()

    def pytest_unconfigure(self) -> None:
        self._stop()
        # an in-process run inside another (pytester) leaves the outer run's set as it found it
        if self._narrowed:
            wanted_signals.narrow(self._wanted_before)
            self._narrowed = False

    def _stop(self) -> None:
        self.watcher.close_open_watch()
        arrival.stop_waiting_for_dynamo(self.watcher.dynamo_arrived)
