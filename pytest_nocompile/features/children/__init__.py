"""Child processes: the processes a watched test starts (spawned, pools, ``torchrun`` ranks,
nested runs) report their compiles to it (on by default; ``--nocompile-no-subprocess`` turns it
off). The run keeps one folder, locked for its life and removed by a later run once dead
(:mod:`.run_folders`); each test's phase has a folder of its own, named to the processes it starts
in their environment (:mod:`.children`); what they wrote is read into the test's record
(:mod:`..child_events`), and a fixture's process that compiles after its test is said below the
summary table.

Hooks: ``pytest_addoption`` (``--nocompile-no-subprocess`` and its ini key,
``--nocompile-check-hook``), ``pytest_cmdline_main`` (the hook check, which runs no tests),
``pytest_configure`` (registers the run's :class:`~.children.ChildReports`, which
implements ``pytest_nocompile_process_reports``, ``pytest_nocompile_run_finished`` and
``pytest_unconfigure``). The watcher begins each test's reports, and the test's record then tells
them of the test's call, teardown and end (``record.ProcessReporting``, ``record.ProcessReports``):
methods, not hooks, at no hook's cost per test.
"""

from __future__ import annotations

import pytest

from ...watching.settings import Switch, option_group

# Child processes report through a start-up hook; some environments forbid those.
WATCH_CHILDREN = Switch("--nocompile-no-subprocess", "nocompile_subprocess",
                        "do not watch the processes a test starts (multiprocessing, subprocess, "
                        "torchrun); only the test's own process counts",
                        "count recompiles of the processes a watched test starts, per process "
                        "(default: true)")


def pytest_addoption(parser: pytest.Parser) -> None:
    WATCH_CHILDREN.add_to(parser)
    option_group(parser).addoption(
        "--nocompile-check-hook", action="store_true", default=False,
        help="start a Python as a test's child process would start, say whether "
        "pytest-nocompile's start-up hook answered in it, and exit (0: live, 1: not live); runs "
        "no tests")


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("nocompile_check_hook") or config.getoption("help"):
        return None
    from ..child_startup.hook_check import check_hook

    check = check_hook()
    print(check.line, flush=True)
    return 0 if check.live else 1


def pytest_configure(config: pytest.Config) -> None:
    if WATCH_CHILDREN.is_on(config):
        from .children import ChildReports

        config.pluginmanager.register(ChildReports(), "nocompile-child-reports")
