"""A run that saves or compares a baseline: the comparison, what was saved, why the run failed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Generator, Optional

import pytest

if TYPE_CHECKING:
    from ...judge.result import TestResult
    from . import BaselineOptions
    from .baseline import Baseline, Comparison, SavedBaseline


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


def baseline_to_compare(settings: BaselineOptions) -> Optional[Baseline]:
    """The baseline ``--nocompile-compare`` names, loaded (None: not given)."""
    if not settings.compare_path:
        return None
    from .baseline import BaselineError, load_baseline

    try:
        return load_baseline(settings.compare_path)
    except BaselineError as error:
        raise pytest.UsageError(f"--nocompile-compare: {error}") from None
