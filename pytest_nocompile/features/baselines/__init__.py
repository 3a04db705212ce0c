"""Baselines: ``--nocompile-save=PATH`` writes each test's gated counts and their reasons, per torch
version (:mod:`.baseline`); ``--nocompile-compare=PATH`` fails the run where a count rose or a
reason is new against it, saying which test, what rose and why; ``python -m pytest_nocompile
merge`` merges the baselines or JSON reports of shards (:mod:`.merge`). Files are written with
the JSON report's writer (:mod:`..reports.json_report`).

Hooks: ``pytest_addoption`` (``--nocompile-save``, ``--nocompile-save-replace``,
``--nocompile-save-failed``, ``--nocompile-compare``), ``pytest_nocompile_watch_every_test`` (a
baseline of every test), ``pytest_configure`` (the options' usage errors; the baseline to compare
with, loaded),
``pytest_nocompile_run_finished`` (compare, before the JSON report is written, which carries each
test's regressions; save), ``pytest_nocompile_terminal_summary`` (the comparison and what was
saved, after the other features' lines), ``pytest_sessionfinish`` (why the run failed, after
pytest's last line), ``pytest_nocompile_regression_check`` (for a failing test's trace).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Generator, Optional

import pytest

from ...watching.settings import SETTINGS_KEY, option_group

if TYPE_CHECKING:
    from ...judge.result import TestResult
    from .baseline import Baseline, Comparison, SavedBaseline


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


class BaselineRun:
    """Per run: the baseline compared with, the comparison, and what was saved."""

    def __init__(self, settings: BaselineOptions, baseline: Optional[Baseline]) -> None:
        self.settings = settings
        # to compare with (None: --nocompile-compare not given, or on a worker)
        self.baseline = baseline
        self.comparison: Optional[Comparison] = None
        self.saved: Optional[SavedBaseline] = None  # what --nocompile-save wrote
        # every test passed, and counts rose against the baseline
        self.failed_by_baseline_alone = False

    @pytest.hookimpl
    def pytest_nocompile_regression_check(self) -> Optional[Callable[[str, TestResult], bool]]:
        settings = self.settings
        if self.baseline is None and settings.is_worker and settings.compare_path:
            # A worker judges its own tests (the controller checked the file).
            from .baseline import BaselineError, load_baseline

            try:
                self.baseline = load_baseline(settings.compare_path)
            except BaselineError:
                return None
        if self.baseline is None:
            return None
        from ...judge.installed_versions import distribution_version
        from .baseline import regression_check

        return regression_check(self.baseline, distribution_version("torch"))

    # First: the JSON report, written after, carries each test's regressions.
    @pytest.hookimpl(tryfirst=True)
    def pytest_nocompile_run_finished(self, session: pytest.Session, results: Any) -> None:
        settings = self.settings
        if self.baseline is None and not settings.save_path:
            return
        from ...judge.installed_versions import distribution_version

        torch_version = distribution_version("torch")
        if self.baseline is not None:
            from .baseline import compare

            self.comparison = compare(self.baseline, results.results, torch_version)
            for nodeid, regressions in self.comparison.regressions().items():
                results.report_fields.setdefault(nodeid, {})["baseline_regressions"] = regressions
            if self.comparison.regressed and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                self.failed_by_baseline_alone = True
        if settings.save_path:
            from ..reports.json_report import write_json_atomically
            from .baseline import previous_baseline, saved_baseline

            # What a failed test counted is no baseline (a failed budget's counts are the
            # regression; a test stopped early counted only part), nor is a skipped test's 0.
            failed = (() if settings.save_failed
                      else results.tests_whose_outcome_is("failed", "error"))
            previous = previous_baseline(settings.save_path)
            self.saved = saved_baseline(results.results, torch_version, previous, failed=failed,
                                        skipped=results.tests_whose_outcome_is("skipped"),
                                        replace=settings.save_replace)
            write_json_atomically(settings.save_path, self.saved.document)

    # Last: after the other features' lines (a trace folder left unused).
    @pytest.hookimpl(trylast=True)
    def pytest_nocompile_terminal_summary(self, terminalreporter: Any) -> None:
        settings = self.settings
        if self.comparison is not None:
            terminalreporter.write_sep("=", f"nocompile baseline {settings.compare_path}")
            for line in self.comparison.lines():
                terminalreporter.write_line(line)
        if self.saved is not None and settings.save_path:  # what it wrote, kept, dropped
            terminalreporter.write_line(self.saved.line(settings.save_path))

    # A wrapper, outer to pytest's terminal: what it writes after the yield comes after pytest's
    # own last line ("5 passed in 2.1s"), so that a run failed by the baseline alone does not end
    # on a line that reads like success.
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            self._say_why_the_run_failed(session)

    def _say_why_the_run_failed(self, session: pytest.Session) -> None:
        """The run's last line, when counts rose against the baseline: it fails the run, whatever
        the tests did."""
        if self.comparison is None or not self.comparison.regressed:
            return
        terminal = session.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        why = self.comparison.verdict(str(self.settings.compare_path))
        if self.failed_by_baseline_alone:
            why = (f"run FAILED (exit code {int(pytest.ExitCode.TESTS_FAILED)}) though every test "
                   f"passed: {why}")
        terminal.write_line(f"nocompile: {why}", red=True, bold=True)


def pytest_configure(config: pytest.Config) -> None:
    settings = BaselineOptions(config)
    baseline = None
    if not settings.is_worker:
        _check_save_options(settings)
        baseline = _baseline_to_compare(settings)
    if settings.save_path or settings.compare_path:
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


def _baseline_to_compare(settings: BaselineOptions) -> Optional[Baseline]:
    if not settings.compare_path:
        return None
    from .baseline import BaselineError, load_baseline

    try:
        return load_baseline(settings.compare_path)
    except BaselineError as error:
        raise pytest.UsageError(f"--nocompile-compare: {error}") from None
