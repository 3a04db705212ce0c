"""Baselines: ``--nocompile-save=PATH`` writes each test's gated counts and their reasons, per torch
version (:mod:`.baseline`); ``--nocompile-compare=PATH`` fails the run where a count rose or a
reason is new against it, saying which test, what rose and why (the reasons: :mod:`.reasons`).
Files are written with the JSON report's writer (:mod:`..reports.json_report`); ``python -m
pytest_nocompile merge`` merges shards' baselines (:mod:`..merge`).

Hooks: ``pytest_addoption`` (``--nocompile-save``, ``--nocompile-save-replace``,
``--nocompile-save-failed``, ``--nocompile-compare``), ``pytest_nocompile_watch_every_test`` (a
baseline of every test), ``pytest_configure`` (the options' usage errors; the baseline to compare
with, loaded; where the run saves or compares, registers :class:`~.baseline_run.BaselineRun`, which
implements ``pytest_nocompile_run_finished`` (compare, before the JSON report is written, which
carries each test's regressions; save), ``pytest_nocompile_terminal_summary`` (the comparison and
what was saved, after the other features' lines), ``pytest_sessionfinish`` (why the run failed,
after pytest's last line) and ``pytest_nocompile_regression_check`` (for a failing test's trace)).
"""

from __future__ import annotations

from typing import Optional

import pytest

from ...watching.settings import SETTINGS_KEY, option_group


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption("--nocompile-save", metavar="PATH", default=None,
                    help="write a baseline of per-test recompile, graph-break and compile counts; "
                    "the entries of tests that did not run or failed are kept")
    group.addoption("--nocompile-save-replace", action="store_true", default=False,
                    help="with --nocompile-save: drop this torch's entries of tests not in the run")
    group.addoption("--nocompile-save-failed", action="store_true", default=False,
                    help="with --nocompile-save: save the counts of tests that failed too")
    group.addoption("--nocompile-compare", metavar="PATH", default=None,
                    help="fail the run when a test's recompiles, graph breaks or compiles rose "
                    "against this baseline")


class BaselineOptions:
    """What the run's options say of baselines, and whether this process is an xdist worker."""

    def __init__(self, config: pytest.Config) -> None:
        self.save_path: Optional[str] = config.getoption("nocompile_save")
        # Drop the entries of tests that did not run; save failed tests' counts too.
        self.save_replace = bool(config.getoption("nocompile_save_replace"))
        self.save_failed = bool(config.getoption("nocompile_save_failed"))
        self.compare_path: Optional[str] = config.getoption("nocompile_compare")
        self.is_worker = config.stash[SETTINGS_KEY].is_worker


@pytest.hookimpl
def pytest_nocompile_watch_every_test(config: pytest.Config) -> bool:
    return bool(config.getoption("nocompile_save") or config.getoption("nocompile_compare"))


def pytest_configure(config: pytest.Config) -> None:
    settings = BaselineOptions(config)
    if not settings.is_worker:
        _check_save_options(settings)
    if settings.save_path or settings.compare_path:
        # here: a run without baselines never loads it
        from .baseline_run import BaselineRun, baseline_to_compare

        baseline = None if settings.is_worker else baseline_to_compare(settings)
        config.pluginmanager.register(BaselineRun(settings, baseline), "nocompile-baseline-run")


def _check_save_options(settings: BaselineOptions) -> None:
    save_options = {"--nocompile-save-replace": settings.save_replace,
                    "--nocompile-save-failed": settings.save_failed}
    for option, given in save_options.items():
        if given and not settings.save_path:  # else ignored: the user would think it saved
            raise pytest.UsageError(f"{option} needs --nocompile-save=PATH")
    if settings.save_path:
        from ..reports.json_report import check_writable

        problem = check_writable(settings.save_path)
        if problem:
            raise pytest.UsageError(
                f"--nocompile-save={settings.save_path}: cannot write there: {problem}")
