"""The hooks through which the core calls the features: pytest-nocompile's one seam.

The core (settings and watching, capture, events, record, verdict, failure
text and table) calls every feature through these hooks, and imports none of
them. Each feature under :mod:`pytest_nocompile.features` is a pytest plugin
implementing some of them, registered by :mod:`.plugin` the way pytest
registers its own default plugins. A project's ``conftest.py`` or plugin may
implement them too: they are experimental until 1.0 (``docs/extending.md``).

The hooks are added to pytest's plugin manager by :func:`.plugin.pytest_addhooks`.
Every hook takes keyword arguments, as pluggy calls them; an implementation
may take any subset of them. The ``watch`` passed is the test's
:class:`~.watching.watch.Watch`: its ``item``, ``record``, ``plan`` and
``budget``, and ``feature_state``, a dict where each feature keeps its own
state for that test under its own name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import pytest

if TYPE_CHECKING:
    from .judge.budget import KeywordReader
    from .judge.result import TestResult
    from .judge.verdict import Contract
    from .record.record import ProcessReporting
    from .vocabulary.kinds import BudgetKind
    from .watching.watch import Watch

hookspec = pytest.hookspec


@hookspec(historic=True)
def pytest_nocompile_kinds() -> Optional[Sequence[BudgetKind]]:
    """The kinds of budget a gate adds (:class:`~.vocabulary.kinds.BudgetKind`), after the core's
    and the built-in gates', in the summary table's column order.

    Each kind gets what the built-in ones have: its marker, option, ini key,
    block assertion and fixture, table column, JSON and junit entries, and
    baseline entry. Its signals come from torch's counters (``"group.name"``)
    or from the source it names (``BudgetKind.source``, made in every process
    that captures, child processes too). Called as each plugin registers: a
    gate must be a plugin or an initial ``conftest.py`` (the rootdir's, or
    one in the folders named on the command line), whose kinds are known
    before the command line is parsed. A child process knows a gate's kinds
    where it can import the gate's module. The kinds are taken out again
    when the run ends.
    """


@hookspec
def pytest_nocompile_watch_every_test(config: pytest.Config) -> Optional[bool]:
    """Whether the run must watch every test, budgeted or not: a feature that reports each test's
    counts (the JSON report, a baseline) says True. Asked once, as the run's settings are read."""


@hookspec(firstresult=True)
def pytest_nocompile_process_reports(config: pytest.Config) -> Optional[ProcessReporting]:
    """Where the processes a watched test starts report to it: an object whose ``begin(nodeid)``
    gives the test's :class:`~.record.record.ProcessReports` as its setup begins (the children
    feature's folders); the test's record then tells them of its phases and end. Asked once, at
    the run's first watched test; None: no feature watches them."""


@hookspec
def pytest_nocompile_watch_opened(watch: Watch) -> None:
    """A watched test's setup begins: its watch and record are open, nothing attached yet.

    Called once per attempt of each watched test (pytest-rerunfailures runs
    setup again), before dynamo is reset or its logs reach the record.
    """


@hookspec
def pytest_nocompile_record_attached(watch: Watch) -> None:
    """dynamo's logs in this process reach the test's record from now on.

    Called at the test's setup when dynamo is already imported, else when
    dynamo arrives during the test (``torch.compile`` imports it): possibly
    inside the call phase, then after :func:`pytest_nocompile_call_started`.
    """


@hookspec
def pytest_nocompile_call_started(watch: Watch) -> None:
    """The test's call phase begins (its record counts from here)."""


@hookspec
def pytest_nocompile_call_ended(watch: Watch, error: Optional[BaseException]) -> None:
    """The test's call phase ended, before it is judged: ``error`` is what it raised (None: it
    returned). An implementation may change the error's traceback or notes, not replace it."""


@hookspec
def pytest_nocompile_watch_closed(watch: Watch) -> None:
    """The test's watch closes, after its teardown (or when an interrupted test leaves): undo
    what was set up for it. Called once per watch."""


@hookspec
def pytest_nocompile_test_ended(watch: Watch, failed: bool) -> Optional[list[pytest.PytestWarning]]:
    """After the test's teardown and the close of its watch: ``failed`` says whether the teardown
    raised. Return the warnings to give the test (each as ``item.warn`` gives it), or None."""


@hookspec
def pytest_nocompile_test_reported(
    watch: Watch, report: pytest.TestReport, result: Optional[TestResult]
) -> Optional[dict[str, Any]]:
    """A report of a watched test was made (setup, call, teardown), before pytest's others read it.

    ``result`` is the test's result on its teardown report, else None.
    Return fields of :class:`~.judge.result.TestResult` to set on that
    result (``{"trace": folder}``), or None.
    """


@hookspec
def pytest_nocompile_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The run's nocompile summary: called after the summary table is written (or where none is),
    in the process that shows it (not on an xdist worker). Write lines with
    ``terminalreporter.write_line``."""


@hookspec
def pytest_nocompile_run_finished(session: pytest.Session, results: Any) -> None:
    """Every test of the run has reported, in the process that gathers their results (not on an
    xdist worker), before pytest writes its summary.

    ``results`` is the run's :class:`~.watching.results.Results`: ``results.results`` maps each
    watched test's node id to its :class:`~.judge.result.TestResult`;
    ``results.outcome(nodeid)`` is its outcome in pytest's words (``passed``, ``failed``,
    ``error``, ``skipped``, ``xfailed``, ``xpassed``); ``results.report_fields`` maps a node id
    to the fields a feature adds to that test's entry of the JSON report (a ``tryfirst``
    implementation adds them before the report is written); ``results.summary_notes`` holds the
    lines shown below the run's summary table, where one is shown (a feature appends to it). A
    feature may set ``session.exitstatus``.
    """


@hookspec(firstresult=True)
def pytest_nocompile_regression_check(
    config: pytest.Config,
) -> Optional[Callable[[str, TestResult], bool]]:
    """Whether a test's result fails the run against a baseline, where the run compares with one:
    a function of the node id and the result; None where the run compares with none."""


@hookspec
def pytest_nocompile_marker_keywords() -> Optional[Mapping[str, KeywordReader]]:
    """Keywords a feature adds to every budget marker, by name (the built-in ``torch=``: a budget
    per torch version). Each is a function of the keyword's value, the marker's kind and the
    marker as written, called after the core checked the marker. It returns the count in force and
    a note said after where the marker sits (``torch <2.8``), or None where the marker's N stays.
    It raises :class:`~.judge.budget.BudgetUsageError`, naming what was wrong and the accepted
    form, for a value it does not accept. Asked once a run, when the first marker is read."""


@hookspec(firstresult=True)
def pytest_nocompile_read_contract(name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                                   marked_on: str) -> Optional[Contract]:
    """The contract of a test's marker ``name`` (one of the contract markers: ``dynamic_dims``,
    ``same_across_ranks``), read from its arguments when the test's plan is made; ``marked_on``
    says where the marker sits. Raise :class:`~.vocabulary.kinds.ContractUsageError`, naming what
    was wrong and the accepted form, for a marker given in a form the feature does not accept.
    The contract is judged with the budgets when the call ends (its ``broken(snapshot)``)."""


@hookspec
def pytest_nocompile_shown_in_failure(error: Optional[BaseException]) -> Optional[list[object]]:
    """The recorded events (recompiles, limit hits) that ``error``, a test's failure in its call
    phase, already lists in its text: the report's recompile section leaves them out. Return
    them, or None. Called only for a failed call whose record holds something."""
