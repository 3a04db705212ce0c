"""The run's results: gathered from each test's reports (on an xdist controller too), then shown,
written and gated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generator, Iterable, Mapping, Optional

import pytest

from ..judge.result import RESULT_ATTRIBUTE, TestResult, Verdict, count_properties, idle_result
from ..output.summary import summary_lines

if TYPE_CHECKING:
    from ..judge.budget import RecompileBudget
    from .settings import RunSettings


class Results:
    """Each watched test's result, by node id, and what the run does with them at its end."""

    def __init__(self, settings: RunSettings, config: pytest.Config) -> None:
        self.settings = settings
        self.hook = config.hook  # the features' (..hookspecs): what the run does with its results
        self.results: dict[str, TestResult] = {}
        # By node id: the fields the features add to a test's entry of the JSON report.
        self.report_fields: dict[str, dict[str, Any]] = {}
        # (when, outcome, was_xfail) of the reports that were not plain passes:
        # of the test now running, and of each finished test that had any.
        self._outcomes: dict[str, list[tuple[str, str, bool]]] = {}
        self._final_outcomes: dict[str, list[tuple[str, str, bool]]] = {}
        self._idle: dict[tuple[RecompileBudget, tuple[tuple[str, str], ...]],
                         tuple[TestResult, list[tuple[str, object]]]] = {}
        # Lines the features add below the summary table (the children feature's: fixtures'
        # processes that compiled after their test ended).
        self.summary_notes: list[str] = []

    def idle(
        self, budget: RecompileBudget, unmeasured: Optional[Mapping[str, str]] = None,
    ) -> tuple[TestResult, list[tuple[str, object]]]:
        """The result and count properties of a test that recorded nothing: the same for every such
        test of a budget (and of the kinds not measured, ``unmeasured``)."""
        key = (budget, tuple(unmeasured.items()) if unmeasured else ())
        cached = self._idle.get(key)
        if cached is None:
            result = idle_result(budget, unmeasured)
            cached = self._idle[key] = (result, count_properties(result))
        return cached

    def gather(self, report: pytest.TestReport, made_here: Optional[TestResult] = None) -> None:
        """Keep a finished test's result (``made_here`` when this process ran it), and the outcomes
        a JSON report needs."""
        when = report.when
        # The report's __dict__, not hasattr/getattr: those raise and catch an
        # AttributeError for a missing attribute, on almost every report.
        attributes = report.__dict__
        # a plain pass changes no outcome
        if report.outcome != "passed" or "wasxfail" in attributes:
            self._outcomes.setdefault(report.nodeid, []).append(
                (when, report.outcome, "wasxfail" in attributes))
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

    # A wrapper, outermost: the features have the results before pytest's own summary, and what
    # they write after their own wrapper's yield comes after pytest's last line.
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        if not self.settings.is_worker:
            self.hook.pytest_nocompile_run_finished(session=session, results=self)
        return (yield)

    @property
    def final_outcomes(self) -> dict[str, list[tuple[str, str, bool]]]:
        """By node id: (when, outcome, was_xfail) of each finished test's reports that were not
        plain passes (a test with none is not in it)."""
        return self._final_outcomes

    def outcome(self, nodeid: str) -> str:
        """The test's outcome, in pytest's words (``passed``, ``failed``, ``error``, ``skipped``
        ...)."""
        return outcome_of(self._final_outcomes.get(nodeid, ()))

    def tests_whose_outcome_is(self, *outcomes: str) -> set[str]:
        """The tests whose outcome (pytest's word: ``failed``, ``error``, ``skipped`` ...) is one of
        ``outcomes``."""
        return {nodeid for nodeid, reports in self._final_outcomes.items()
                if outcome_of(reports) in outcomes}

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        settings = self.settings
        if settings.is_worker:
            return
        budgeted = any(result.verdict is not Verdict.NO_BUDGET for result in self.results.values())
        if settings.report_requested or budgeted:
            terminalreporter.write_sep("=", "nocompile")
            for line in [*summary_lines(self.results, settings.table), *self.summary_notes]:
                terminalreporter.write_line(line)
        self.hook.pytest_nocompile_terminal_summary(terminalreporter=terminalreporter,
                                                    config=terminalreporter.config)


def outcome_of(outcomes: Iterable[tuple[str, str, bool]]) -> str:
    """A test's outcome from its reports' (when, outcome, was_xfail): pytest's own words."""
    result = "passed"
    for when, outcome, was_xfail in outcomes:
        if outcome == "failed":
            return "error" if when != "call" else "failed"
        if outcome == "skipped":
            result = "xfailed" if was_xfail else "skipped"
        elif was_xfail and when == "call":
            result = "xpassed"
    return result


class ControllerReports:
    """On an xdist controller, which runs no test: gathers the results its workers send on their
    reports."""

    def __init__(self, results: Results) -> None:
        self.results = results

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.results.gather(report)
