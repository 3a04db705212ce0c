"""Child processes: the processes a watched test starts (spawned, pools, ``torchrun`` ranks,
nested runs) report their compiles to it (on by default; ``--nocompile-no-subprocess`` turns it
off). The run keeps one folder, locked for its life and removed by a later run once dead
(:mod:`.run_folders`); each test's phase has a folder of its own, named to the processes it starts
in their environment (:mod:`.children`); what they wrote is read into the test's record
(:mod:`..child_events`), and a fixture's process that compiles after its test is said below the
summary table.

Hooks: ``pytest_configure`` (registers the run's :class:`~.children.ChildReports`, which
implements ``pytest_nocompile_watch_opened``, ``pytest_nocompile_run_finished`` and
``pytest_unconfigure``). The test's record then tells its reports of the test's call, teardown
and end (``record.ProcessReports``): methods, not hooks, at no hook's cost per test.
"""

from __future__ import annotations

import pytest

from ...watching.settings import SETTINGS_KEY


def pytest_configure(config: pytest.Config) -> None:
    if config.stash[SETTINGS_KEY].watch_children:
        from .children import ChildReports

        config.pluginmanager.register(ChildReports(), "nocompile-child-reports")
