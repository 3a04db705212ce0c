"""The run's results: gathered from each test's reports (on an xdist controller too), then shown, written and gated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generator, Mapping, Optional

import pytest

from ..judge.result import RESULT_ATTRIBUTE, TestResult, Verdict, count_properties, idle_result
from ..output.summary import summary_lines

if TYPE_CHECKING:
    from ..judge.budget import RecompileBudget
    from ..output.baseline import Comparison, SavedBaseline
    from .settings import RunSettings


class Results:
    """Each watched test's result, by node id, and what the run does with them at its end."""

    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings
        self.results: dict[str, TestResult] = {}
        self.comparison: Optional[Comparison] = None
        self.saved: Optional[SavedBaseline] = None  # what --nocompile-save wrote
        self.failed_by_baseline_alone = False  # every test passed, and counts rose against the baseline
        # (when, outcome, was_xfail) of the reports that were not plain passes:
        # of the test now running, and of each finished test that had any.
        self._outcomes: dict[str, list[tuple[str, str, bool]]] = {}
        self._final_outcomes: dict[str, list[tuple[str, str, bool]]] = {}
        self._idle: dict[tuple[RecompileBudget, tuple[tuple[str, str], ...]], tuple[TestResult, list[tuple[str, object]]]] = {}
        self.after_their_test: list[str] = []  # fixtures' processes that compiled after their test ended

    def idle(self, budget: RecompileBudget, unmeasured: Optional[Mapping[str, str]] = None) -> tuple[TestResult, list[tuple[str, object]]]:
        """The result and count properties of a test that recorded nothing: the same for every such test of a budget
        (and of the kinds not measured, ``unmeasured``)."""
        key = (budget, tuple(unmeasured.items()) if unmeasured else ())
        cached = self._idle.get(key)
        if cached is None:
            result = idle_result(budget, unmeasured)
            cached = self._idle[key] = (result, count_properties(result))
        return cached

    def gather(self, report: pytest.TestReport, made_here: Optional[TestResult] = None) -> None:
        """Keep a finished test's result (``made_here`` when this process ran it), and the outcomes a JSON report needs."""
        when = report.when
        # The report's __dict__, not hasattr/getattr: those raise and catch an
        # AttributeError for a missing attribute, on almost every report.
        attributes = report.__dict__
        if report.outcome != "passed" or "wasxfail" in attributes:  # a plain pass changes no outcome
            self._outcomes.setdefault(report.nodeid, []).append((when, report.outcome, "wasxfail" in attributes))
        if when != "teardown":  # only an attempt's last report carries its result
            return
        nodeid = report.nodeid
        outcomes = self._outcomes.pop(nodeid, None) if self._outcomes else None
        result = made_here
        if result is None:  # from a worker (xdist), as JSON
            carried = attributes.get(RESULT_ATTRIBUTE)
            result = TestResult.from_dict(carried) if carried is not None else None
        if result is None and report.user_properties:
            # A test that recorded nothing carries only these properties (its
            # worker attaches no result for the default budget): every
            # process of the run has the same default budget, so the same result.
            idle, idle_properties = self.idle(self.settings.default_budget)
            result = idle if idle_properties[0] in report.user_properties else None
        if result is not None:
            self.results[nodeid] = result
            if outcomes:
                self._final_outcomes[nodeid] = outcomes
            elif self._final_outcomes:  # an earlier attempt's (pytest-rerunfailures)
                self._final_outcomes.pop(nodeid, None)

    # A wrapper, outermost: what it writes after the yield comes after pytest's
    # own last line ("5 passed in 2.1s"), so that a run failed by the baseline
    # alone does not end on a line that reads like success.
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        self._finish_run(session)
        try:
            return (yield)
        finally:
            self._say_why_the_run_failed(session)

    def _finish_run(self, session: pytest.Session) -> None:
        settings = self.settings
        if settings.is_worker:
            return
        if settings.json_path or settings.save_path or settings.baseline is not None:
            from ..judge.installed_versions import distribution_version
            from ..output.json_report import json_document, write_json_atomically

            torch_version = distribution_version("torch")
        if settings.baseline is not None:
            from ..output.baseline import compare

            self.comparison = compare(settings.baseline, self.results, torch_version)
            if self.comparison.regressed and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                self.failed_by_baseline_alone = True
        if settings.json_path:
            versions = {"plugin_version": distribution_version("pytest-nocompile"), "torch_version": torch_version}
            regressions = self.comparison.regressions() if self.comparison is not None else {}
            write_json_atomically(settings.json_path, json_document(self.results, self._final_outcomes, versions, regressions))
        if settings.save_path:
            from ..output.baseline import previous_baseline, saved_baseline

            # What a failed test counted is no baseline (a failed budget's counts are the
            # regression; a test stopped early counted only part), nor is a skipped test's 0.
            failed = () if settings.save_failed else self._tests_whose_outcome_is("failed", "error")
            previous = previous_baseline(settings.save_path)
            self.saved = saved_baseline(self.results, torch_version, previous, failed=failed,
                                        skipped=self._tests_whose_outcome_is("skipped"),
                                        replace=settings.save_replace)
            write_json_atomically(settings.save_path, self.saved.document)

    def _tests_whose_outcome_is(self, *outcomes: str) -> set[str]:
        """The tests whose outcome (pytest's word: ``failed``, ``error``, ``skipped`` ...) is one of
        ``outcomes``."""
        from ..output.json_report import outcome_of

        return {nodeid for nodeid, reports in self._final_outcomes.items()
                if outcome_of(reports) in outcomes}

    def _say_why_the_run_failed(self, session: pytest.Session) -> None:
        """The run's last line, when counts rose against the baseline: it fails the run, whatever the tests did."""
        if self.comparison is None or not self.comparison.regressed:
            return
        terminal = session.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        why = self.comparison.verdict(str(self.settings.compare_path))
        if self.failed_by_baseline_alone:
            why = f"run FAILED (exit code {int(pytest.ExitCode.TESTS_FAILED)}) though every test passed: {why}"
        terminal.write_line(f"nocompile: {why}", red=True, bold=True)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        settings = self.settings
        if settings.is_worker:
            return
        budgeted = any(result.verdict is not Verdict.NO_BUDGET for result in self.results.values())
        if settings.report_requested or budgeted:
            terminalreporter.write_sep("=", "nocompile")
            for line in [*summary_lines(self.results, settings.table), *self.after_their_test]:
                terminalreporter.write_line(line)
        terminalreporter.config.hook.pytest_nocompile_terminal_summary(terminalreporter=terminalreporter,
                                                                       config=terminalreporter.config)
        if self.comparison is not None:
            terminalreporter.write_sep("=", f"nocompile baseline {settings.compare_path}")
            for line in self.comparison.lines():
                terminalreporter.write_line(line)
        if self.saved is not None and settings.save_path:  # what it wrote, kept, dropped
            terminalreporter.write_line(self.saved.line(settings.save_path))


class ControllerReports:
    """On an xdist controller, which runs no test: gathers the results its workers send on their reports."""

    def __init__(self, results: Results) -> None:
        self.results = results

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.results.gather(report)
