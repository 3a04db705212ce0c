"""pytest hooks, options, markers and fixtures of pytest-nocompile.

The only module that talks to pytest. It costs next to nothing where nothing
compiles. The per-test hooks are registered only once some test of the run
can be watched: a test with a budget marker or a nocompile fixture, or, under
a run-wide budget or report, once torch is imported. Until torch is imported
nothing can compile, so a run-wide budget costs one small teardown hook per
test. torch is never imported by the plugin before something else imports
it. The modules that parse, record and report recompiles load with the first
test that needs them, so a run that never compiles never imports them.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Generator, Optional, Sequence

import pytest

from . import capture
from .budget import (
    GRAPH_BREAKS,
    MARKER_HELP,
    RECOMPILES,
    BudgetUsageError,
    MarkerBudget,
    RecompileBudget,
    budget_from_marker,
    parse_option_count,
    resolve,
)
from .summary import (
    check_writable,
    count_properties,
    entry_from_record,
    idle_entry,
    json_document,
    summary_lines,
    write_json_atomically,
)

if TYPE_CHECKING:
    from .assertions import AssertMaxRecompiles
    from .baseline import Comparison
    from .record import RecompileLog, RecompileRecord

BUDGET_MARKERS = frozenset({RECOMPILES, GRAPH_BREAKS})
FIXTURE_NAMES = frozenset({"nocompile_recompiles", "nocompile_assert_max_recompiles"})
ENTRY_ATTRIBUTE = "nocompile_entry"  # on teardown reports; JSON-able, so xdist carries it


class _Watch:
    """A watched test's plan: its budget, then its record, or why its marker is unusable."""

    __slots__ = ("budget", "record", "usage_error", "budget_failed", "deferred")

    def __init__(self, budget: RecompileBudget, usage_error: Optional[str] = None, deferred: bool = False) -> None:
        self.budget = budget
        self.record: Optional[RecompileRecord] = None  # made when the test starts with torch imported
        self.usage_error = usage_error
        self.budget_failed = False
        self.deferred = deferred  # torch was not imported when the test started: nothing to watch


SESSION_KEY = pytest.StashKey["NocompileSession"]()


class CaptureLostWarning(pytest.PytestWarning):
    """pytest-nocompile could no longer see recompiles: something switched its capture off."""


def _count_argument(option: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        try:
            return parse_option_count(text, option)
        except BudgetUsageError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nocompile", "torch.compile recompile budgets (pytest-nocompile)")
    for budget, noun in ((RECOMPILES, "recompile"), (GRAPH_BREAKS, "graph-break")):
        option = "--" + budget.replace("_", "-")
        group.addoption(option, type=_count_argument(option), default=None, metavar="N",
                        help=f"default {noun} budget for every test (ini: {budget}); a marker overrides it")
        parser.addini(budget, type="string", default=None,
                      help=f"default {noun} budget for every test (an int >= 0) [pytest-nocompile]")
    group.addoption("--nocompile-no-isolate", action="store_true", default=None,
                    help="do not call torch._dynamo.reset() before each watched test; "
                    "counts then depend on which tests ran before (ini: nocompile_isolate)")
    group.addoption("--nocompile-strict", action="store_true", default=None,
                    help="raise at the recompiling call in tests with a recompile budget "
                    "(dynamo's error_on_recompile), so the traceback points into your code")
    group.addoption("--nocompile-report", action="store_true", default=None,
                    help="watch every test and show the nocompile summary table even when no test is budgeted")
    group.addoption("--nocompile-json", metavar="PATH", default=None,
                    help="write a JSON report of every test's compiles, recompiles and graph breaks")
    group.addoption("--nocompile-save", metavar="PATH", default=None,
                    help="write a baseline of per-test recompile and graph-break counts")
    group.addoption("--nocompile-compare", metavar="PATH", default=None,
                    help="fail the run when a test's recompiles or graph breaks rose against this baseline")
    parser.addini("nocompile_isolate", type="bool", default=True,
                  help="reset dynamo's caches before each watched test (default: true) [pytest-nocompile]")


def pytest_configure(config: pytest.Config) -> None:
    for help_text in MARKER_HELP.values():
        config.addinivalue_line("markers", help_text)
    session = config.stash[SESSION_KEY] = NocompileSession(config)
    config.pluginmanager.register(session, "nocompile-session")


def pytest_report_header(config: pytest.Config) -> str:
    return f"nocompile: pytest-nocompile {_distribution_version('pytest-nocompile')}, torch {_distribution_version('torch')}"


def _distribution_version(name: str) -> str:
    # Metadata, not an import: the header must not pay for importing torch.
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _ini_count(config: pytest.Config, key: str) -> Optional[int]:
    text = config.getini(key)
    if text in (None, ""):
        return None
    try:
        return parse_option_count(str(text), f"ini key {key}")
    except BudgetUsageError as error:
        raise pytest.UsageError(str(error)) from None


class NocompileSession:
    """Per-run state: defaults from options and ini, the test watcher, the results."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.isolate_by_default = not config.getoption("nocompile_no_isolate") and config.getini("nocompile_isolate")
        self.strict_by_default = bool(config.getoption("nocompile_strict"))
        self.default_budget = RecompileBudget(
            max_recompiles=resolve(_ini_count(config, "max_recompiles"), config.getoption("max_recompiles"), None),
            max_graph_breaks=resolve(_ini_count(config, "max_graph_breaks"), config.getoption("max_graph_breaks"), None),
        )
        self.json_path: Optional[str] = config.getoption("nocompile_json")
        self.save_path: Optional[str] = config.getoption("nocompile_save")
        self.compare_path: Optional[str] = config.getoption("nocompile_compare")
        self.report_requested = bool(config.getoption("nocompile_report"))
        self.watch_every_test = bool(self.report_requested or self.json_path or self.save_path or self.compare_path)
        self.watch_by_default = self.watch_every_test or self.default_budget.budgeted  # a test with no marker
        self.is_worker = hasattr(config, "workerinput")
        self.baseline: Optional[dict[str, dict[str, int]]] = None
        self.comparison: Optional[Comparison] = None
        self.results: dict[str, dict[str, Any]] = {}  # each watched test's entry, by node id
        # (when, outcome, was_xfail) of the reports that were not plain passes:
        # of the test now running, and of each finished test that had any.
        self._outcomes: dict[str, list[tuple[str, str, bool]]] = {}
        self._final_outcomes: dict[str, list[tuple[str, str, bool]]] = {}
        self.watcher = Watcher(self)
        self._idle: Optional[tuple[dict[str, Any], list[tuple[str, int]]]] = None  # the shared entry while idling
        self._late_import: Optional[_LateImportWarning] = None
        self._idle_entries: dict[RecompileBudget, tuple[dict[str, Any], list[tuple[str, int]]]] = {}
        if not self.is_worker:
            self._check_output_paths()

    def _check_output_paths(self) -> None:
        for option, path in (("--nocompile-json", self.json_path), ("--nocompile-save", self.save_path)):
            problem = path and check_writable(path)
            if problem:
                raise pytest.UsageError(f"{option}={path}: cannot write there: {problem}")
        if self.compare_path:
            from .baseline import BaselineError, load_baseline

            try:
                self.baseline = load_baseline(self.compare_path)
            except BaselineError as error:
                raise pytest.UsageError(f"--nocompile-compare: {error}") from None

    # -- which per-test hooks the run needs --------------------------------------
    #
    # Every hook costs every test its call, watched or not, so none is
    # registered that the run cannot use. Only a process that collects tests
    # runs them (an xdist controller does neither, and only gathers results).

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.watch_by_default and capture.torch_imported() or _any_asks_to_be_watched(session.items):
            self.wake_watcher()
        elif self.watch_by_default:
            # Idle: nothing can compile before torch is imported, so every test
            # gets the same entry, from the logreport hook below; no hook of its own.
            self._idle = self.shared_idle_entry(self.default_budget)
        else:
            # No budget, no report, and no test asks for one: nothing in this
            # run can be watched, and none of these hooks has anything to do.
            self.config.pluginmanager.unregister(self)

    def wake_watcher(self) -> None:
        """Register the per-test hooks; the run stops idling."""
        self._idle = None
        if self._late_import is not None:
            self.config.pluginmanager.unregister(self._late_import)
            self._late_import = None
        if not self.config.pluginmanager.is_registered(self.watcher):
            self.config.pluginmanager.register(self.watcher, "nocompile-watcher")

    def shared_idle_entry(self, budget: RecompileBudget) -> tuple[dict[str, Any], list[tuple[str, int]]]:
        """The entry and properties of a test that ran before torch was imported: the same for every such test."""
        cached = self._idle_entries.get(budget)
        if cached is None:
            entry = idle_entry(budget)
            cached = self._idle_entries[budget] = (entry, count_properties(entry))
        return cached

    def _end_idle_test(self, report: pytest.TestReport) -> None:
        """While idling: the shared entry on each teardown report; after the test that imported torch, wake."""
        entry, properties = self._idle  # type: ignore[misc]
        report.__dict__[ENTRY_ATTRIBUTE] = entry
        report.user_properties.extend(properties)
        if capture.torch_imported():
            self.wake_watcher()

    def _warn_at_teardown(self, report: pytest.TestReport) -> None:
        # torch arrived inside this test. Warn from its teardown, not from
        # here: a warning raised as an error (-W error) in a logreport hook
        # would end the run instead of failing the test.
        self._late_import = _LateImportWarning(report.nodeid)
        self.config.pluginmanager.register(self._late_import, "nocompile-late-import")

    # -- each report: what the watcher adds, then the run's results (on the xdist controller too)

    @pytest.hookimpl(tryfirst=True)  # before junitxml, the terminal and xdist's worker read the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs three times for every test of the run: kept to the fewest steps.
        when = report.when
        if self.watcher.watches:
            self.watcher.annotate(report)
        elif self._idle is not None:
            if when == "teardown":
                self._end_idle_test(report)
            elif when == "call" and self._late_import is None and capture.torch_imported():
                self._warn_at_teardown(report)
        if self.is_worker:  # the controller gathers the results, from the reports this worker sends
            return
        # The report's __dict__, not hasattr/getattr: those raise and catch an
        # AttributeError for a missing attribute, on almost every report.
        attributes = report.__dict__
        if report.outcome != "passed" or "wasxfail" in attributes:  # a plain pass changes no outcome
            self._outcomes.setdefault(report.nodeid, []).append((when, report.outcome, "wasxfail" in attributes))
        if when == "teardown":  # an attempt's last report, and the one that carries the entry
            outcomes = self._outcomes.pop(report.nodeid, None) if self._outcomes else None
            entry = attributes.get(ENTRY_ATTRIBUTE)
            if entry is not None:
                nodeid = report.nodeid
                self.results[nodeid] = entry
                if outcomes:
                    self._final_outcomes[nodeid] = outcomes
                elif self._final_outcomes:  # an earlier attempt's (pytest-rerunfailures)
                    self._final_outcomes.pop(nodeid, None)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.watcher.stop_capture()
        if self.is_worker:
            return
        if self.json_path:
            write_json_atomically(self.json_path, json_document(self.results, self._final_outcomes, {
                "plugin_version": _distribution_version("pytest-nocompile"),
                "torch_version": _distribution_version("torch"),
            }))
        if self.save_path:
            from .baseline import baseline_document

            write_json_atomically(self.save_path, baseline_document(self.results))
        if self.baseline is not None:
            from .baseline import compare

            self.comparison = compare(self.baseline, self.results)
            if self.comparison.regressed and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        budgeted = any(entry["verdict"] != "no budget" for entry in self.results.values())
        if self.report_requested or budgeted:
            terminalreporter.write_sep("=", "nocompile")
            for line in summary_lines(self.results):
                terminalreporter.write_line(line)
        if self.comparison is not None:
            terminalreporter.write_sep("=", f"nocompile baseline {self.compare_path}")
            for line in self.comparison.lines():
                terminalreporter.write_line(line)
            if self.comparison.regressed:
                terminalreporter.write_line(f"nocompile: {len(self.comparison.increased)} count(s) rose against the baseline", red=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.watcher.stop_capture()


def _uses_a_nocompile_fixture(item: pytest.Item) -> bool:
    return not FIXTURE_NAMES.isdisjoint(getattr(item, "fixturenames", ()))


def _any_asks_to_be_watched(items: Sequence[pytest.Item]) -> bool:
    """Whether a test has a budget marker or a nocompile fixture (whatever its arguments say)."""
    checked: set[int] = set()  # ids of modules and classes whose own markers were read
    for item in items:
        if _uses_a_nocompile_fixture(item):
            return True
        # item.iter_markers() reads every parent again for every test; here each is read once.
        node: pytest.Item | pytest.Collector | None = item
        while node is not None and id(node) not in checked:
            if any(marker.name in BUDGET_MARKERS for marker in node.own_markers):
                return True
            if node is not item:
                checked.add(id(node))
            node = node.parent
    return False


class Watcher:
    """The per-test hooks: plan a test's watch, capture around it, judge its budget.

    Registered by :meth:`NocompileSession.wake_watcher`. For a test nobody
    watches each hook is a dict lookup and a return: setup plans the watch
    and starts capture, call checks the budget, and the session's logreport
    (through :meth:`annotate`) adds sections and, with the teardown report,
    ends capture and attaches the test's entry. Capture ends with teardown,
    not the protocol, because pytest-rerunfailures runs setup, call and
    teardown again inside one protocol.
    """

    def __init__(self, session: NocompileSession) -> None:
        self.session = session
        # Tests now running that the plugin watches, by node id: the session's
        # logreport has only the report, and a stash miss costs an exception.
        self.watches: dict[str, _Watch] = {}
        self._capture: Optional[capture.RecompileCapture] = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            # Already done by the teardown report, but for an interrupt
            # (KeyboardInterrupt, pytest.exit) or a report a rerun plugin did
            # not log: leave torch as the test found it.
            self.stop_capture()
            self.watches.pop(item.nodeid, None)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.stop_capture()
        watch = self._plan_watch(item)
        if watch is None:
            return
        self.watches[item.nodeid] = watch
        if watch.usage_error is not None:
            pytest.fail(watch.usage_error, pytrace=False)
        if not capture.torch_imported() and capture.torch_installed():
            watch.deferred = True
            return
        problem = capture.torch_problem()
        if problem is not None:
            pytest.fail(f"pytest-nocompile cannot watch {item.nodeid}: {problem}", pytrace=False)
        budget = watch.budget
        if budget.isolate if budget.isolate is not None else self.session.isolate_by_default:
            capture.reset_dynamo()
        from .record import RecompileRecord

        record = watch.record = RecompileRecord(budget)
        if self._capture is None:
            self._capture = capture.RecompileCapture()
        self._capture.start(record.add_recompile, record.add_limit_warning, record.add_graph_break)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        watch = self.watches.get(item.nodeid)
        if watch is None:
            return (yield)
        record = watch.record
        if watch.deferred or record is None:
            try:
                return (yield)
            finally:
                if watch.deferred:
                    warn_if_compiled_unwatched(item)
        record.phase = "call"
        strict = record.budget.max_recompiles is not None and (
            record.budget.strict if record.budget.strict is not None else self.session.strict_by_default
        )
        try:
            with capture.raising_on_recompile() if strict else nullcontext():
                result = yield
        finally:
            record.phase = "teardown"
            if self._capture is not None and self._capture.active:
                record.compiles = self._capture.graphs_compiled()
                if not self._capture.capturing():
                    item.warn(CaptureLostWarning(
                        f"recompile capture was switched off during {item.nodeid} (torch._logging.set_logs "
                        "resets torch's log state); its recompile count may be incomplete"
                    ))
        if record.exceeds_budget():
            from .report import format_budget_failure

            watch.budget_failed = True
            pytest.fail(format_budget_failure(record), pytrace=False)
        return result

    def annotate(self, report: pytest.TestReport) -> None:
        """Add a watched test's recompile sections to its report; with teardown, end the watch and attach its entry."""
        watch = self.watches.get(report.nodeid)
        if watch is None:
            return
        when = report.when
        if when == "teardown":
            del self.watches[report.nodeid]
            self.stop_capture()
        if watch.usage_error is not None:
            return
        record = watch.record
        if record is not None:
            if when == "setup" and record.phase == "setup":
                record.phase = "teardown"  # until the call starts; for good when setup failed and no call runs
            if not watch.budget_failed:
                _add_section(report, record, when)  # type: ignore[arg-type]
        if when == "teardown":
            if record is not None:
                entry = entry_from_record(record)
                properties = count_properties(entry)
            else:
                entry, properties = self.session.shared_idle_entry(watch.budget)
            setattr(report, ENTRY_ATTRIBUTE, entry)
            report.user_properties.extend(properties)

    def _plan_watch(self, item: pytest.Item) -> Optional[_Watch]:
        closest: dict[str, pytest.Mark] = {}
        for marker in item.iter_markers():  # one pass, closest first; most tests have no marker at all
            if marker.name in BUDGET_MARKERS and marker.name not in closest:
                closest[marker.name] = marker
        session = self.session
        budget, watched = session.default_budget, session.watch_by_default
        if closest:
            read: dict[str, MarkerBudget] = {}
            for name, marker in closest.items():
                try:
                    read[name] = budget_from_marker(marker.args, marker.kwargs, name)
                except BudgetUsageError as error:
                    return _Watch(budget, usage_error=f"invalid {name} marker on {item.nodeid}: {error}")
            budget = _with_markers(budget, read)
            watched = budget.budgeted or session.watch_every_test
        if watched or _uses_a_nocompile_fixture(item):
            return _Watch(budget)
        return None

    def stop_capture(self) -> None:
        if self._capture is not None:
            self._capture.stop()


class _LateImportWarning:
    """Registered for the one test in which torch was first imported while the run idled."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    @pytest.hookimpl(trylast=True)  # after pytest's own teardown, which an error raised before it would skip
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        if item.nodeid == self.nodeid:
            warn_if_compiled_unwatched(item)


def warn_if_compiled_unwatched(item: pytest.Item) -> None:
    """Warn when a test imported torch itself and compiled: capture could not start before that import."""
    if capture.compiled_anything():
        item.warn(CaptureLostWarning(
            f"torch was first imported inside {item.nodeid}, so its compiles were not watched; "
            "import torch at module level (or in a conftest) to watch it"
        ))


def _with_markers(default: RecompileBudget, markers: dict[str, MarkerBudget]) -> RecompileBudget:
    """A test's budget: its markers over the run's defaults (ini and CLI)."""
    recompile_marker = markers.get(RECOMPILES)
    return RecompileBudget(
        max_recompiles=resolve(None, default.max_recompiles, recompile_marker),
        max_graph_breaks=resolve(None, default.max_graph_breaks, markers.get(GRAPH_BREAKS)),
        isolate=recompile_marker.isolate if recompile_marker else None,
        strict=recompile_marker.strict if recompile_marker else None,
    )


def _add_section(report: pytest.TestReport, record: RecompileRecord, when: str) -> None:
    """Show recompiles beside a test's own failure, or those of setup/teardown."""
    if when == "call":
        events = [event for event in record.events if event.phase != "teardown"]
        limit_hits, suffix = record.limit_hits, ""
        shown = report.failed and bool(events or limit_hits)
    else:
        events = record.in_phase(when)  # type: ignore[arg-type]
        limit_hits, suffix = [], f" ({when}, not counted)"
        shown = bool(events)
    if shown:
        from .report import SECTION_TITLE, format_section

        report.sections.append((SECTION_TITLE + suffix, format_section(events, limit_hits)))


@pytest.fixture
def nocompile_recompiles(request: pytest.FixtureRequest) -> RecompileLog:
    """The dynamo recompiles recorded so far in this test, as a live sequence of RecompileEvent."""
    return _record_of(request).log


@pytest.fixture
def nocompile_assert_max_recompiles(request: pytest.FixtureRequest) -> AssertMaxRecompiles:
    """``with nocompile_assert_max_recompiles(N, exact=False): ...`` fails when the block recompiles more than N times."""
    from .assertions import block_assertion

    return block_assertion(_record_of(request))


def _record_of(request: pytest.FixtureRequest) -> RecompileRecord:
    watch = request.config.stash[SESSION_KEY].watcher.watches.get(request.node.nodeid)
    if watch is None:
        pytest.fail(f"pytest-nocompile fixtures work in test functions only (requested by {request.node.nodeid})", pytrace=False)
    if watch.record is None:  # torch is not imported yet: an empty record, nothing will be captured
        from .record import RecompileRecord

        watch.record = RecompileRecord(watch.budget)
    return watch.record
