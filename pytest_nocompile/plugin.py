"""pytest hooks, options, markers and fixtures of pytest-nocompile.

The only module that talks to pytest. It costs next to nothing where nothing
compiles. The per-test hooks are registered only once some test of the run
can be watched: a test with a budget marker or a nocompile fixture, or, under
a run-wide budget or report, once torch is imported. Until torch is imported
nothing can compile, so a run-wide budget costs one small teardown hook per
test (:class:`IdleTests`). torch is never imported by the plugin before
something else imports it. The modules that parse, record and report
recompiles load with the first test that needs them, so a run that never
compiles never imports them.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution
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

    def __init__(self, budget: RecompileBudget, usage_error: Optional[str] = None) -> None:
        self.budget = budget
        self.record: Optional[RecompileRecord] = None  # made when the test starts with torch imported
        self.usage_error = usage_error
        self.budget_failed = False
        self.deferred = False  # torch was not imported when the test started: nothing to watch


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
    if session.is_xdist_controller:  # never collects: gathers, from the start, what its workers send
        config.pluginmanager.register(session.reports, "nocompile-reports")


def pytest_report_header(config: pytest.Config) -> str:
    return f"nocompile: pytest-nocompile {_distribution_version('pytest-nocompile')}, torch {_distribution_version('torch')}"


@lru_cache(maxsize=None)  # the header and the JSON report both ask
def _distribution_version(name: str) -> str:
    # Metadata, not an import: the header must not pay for importing torch.
    try:
        found = distribution(name)
    except PackageNotFoundError:
        return "not installed"
    # Only the Version field: importlib.metadata's version() parses all of
    # METADATA, 38 kB for torch with its long description, which costs more
    # than loading this plugin does.
    text = found.read_text("METADATA") or ""
    headers_end = text.find("\n\n")
    start = text.find("\nVersion:", 0, headers_end if headers_end != -1 else len(text))
    if start == -1:  # another layout (an egg's PKG-INFO): the full parse
        return found.version
    return text[start + len("\nVersion:"):].partition("\n")[0].strip()


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
        # pytest-xdist runs tests in workers when its dist mode is on (pytest-cov reads it the same way).
        self.is_xdist_controller = not self.is_worker and config.getoption("dist", "no") != "no"
        self.baseline: Optional[dict[str, dict[str, int]]] = None
        self.comparison: Optional[Comparison] = None
        self.results: dict[str, dict[str, Any]] = {}  # each watched test's entry, by node id
        # (when, outcome, was_xfail) of the reports that were not plain passes:
        # of the test now running, and of each finished test that had any.
        self._outcomes: dict[str, list[tuple[str, str, bool]]] = {}
        self._final_outcomes: dict[str, list[tuple[str, str, bool]]] = {}
        self.watcher = Watcher(self)
        self.reports = Reports(self)
        self._idle_tests: Optional[IdleTests] = None  # while the run idles
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
    # Every hook costs every test its call, pluggy's dispatch alone about as
    # much as a small hook's body, so none is registered that the run cannot
    # use. Only a process that collects tests runs this (an xdist controller
    # does not).

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.watch_by_default and capture.torch_imported() or _any_asks_to_be_watched(session.items):
            self.wake_watcher()
        elif self.watch_by_default:
            # Idle: nothing can compile before torch is imported, so every test
            # gets the same entry, from one teardown hook; the report hook runs
            # only for a JSON report's outcomes.
            self._idle_tests = IdleTests(self)
            self._register(self._idle_tests, "nocompile-idle")
            if self.json_path and not self.is_worker:
                self._register(self.reports, "nocompile-reports")
        else:
            # No budget, no report, and no test asks for one: nothing in this
            # run can be watched, and none of these hooks has anything to do.
            self.config.pluginmanager.unregister(self)

    def wake_watcher(self) -> None:
        """Register the per-test hooks; the run stops idling."""
        if self._idle_tests is not None:
            self.config.pluginmanager.unregister(self._idle_tests)
            self._idle_tests = None
        self._register(self.watcher, "nocompile-watcher")
        self._register(self.reports, "nocompile-reports")

    def _register(self, hooks: object, name: str) -> None:
        if not self.config.pluginmanager.is_registered(hooks):
            self.config.pluginmanager.register(hooks, name)

    def shared_idle_entry(self, budget: RecompileBudget) -> tuple[dict[str, Any], list[tuple[str, int]]]:
        """The entry and properties of a test that ran before torch was imported: the same for every such test."""
        cached = self._idle_entries.get(budget)
        if cached is None:
            entry = idle_entry(budget)
            cached = self._idle_entries[budget] = (entry, count_properties(entry))
        return cached

    # -- the run's results, from each test's reports (on the xdist controller too)

    def gather(self, report: pytest.TestReport) -> None:
        """Keep a finished test's entry, and the outcomes a JSON report needs."""
        when = report.when
        # The report's __dict__, not hasattr/getattr: those raise and catch an
        # AttributeError for a missing attribute, on almost every report.
        attributes = report.__dict__
        if report.outcome != "passed" or "wasxfail" in attributes:  # a plain pass changes no outcome
            self._outcomes.setdefault(report.nodeid, []).append((when, report.outcome, "wasxfail" in attributes))
        if when != "teardown":  # only an attempt's last report carries its entry
            return
        nodeid = report.nodeid
        outcomes = self._outcomes.pop(nodeid, None) if self._outcomes else None
        entry = attributes.get(ENTRY_ATTRIBUTE)
        if entry is None and report.user_properties:
            entry = self._idle_entry_of(report.user_properties)
        if entry is not None:
            self.results[nodeid] = entry
            if outcomes:
                self._final_outcomes[nodeid] = outcomes
            elif self._final_outcomes:  # an earlier attempt's (pytest-rerunfailures)
                self._final_outcomes.pop(nodeid, None)

    def _idle_entry_of(self, properties: list[tuple[str, object]]) -> Optional[dict[str, Any]]:
        # A test that ran idle carries only the idle properties, which its
        # teardown hook could put on the report (the entry it cannot): every
        # process of the run has the same default budget, so the same entry.
        entry, idle_properties = self.shared_idle_entry(self.default_budget)
        return entry if idle_properties[0] in properties else None

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
    # item.iter_markers() reads every parent again for every test; here each
    # parent is read once, and a test whose parent is the previous test's
    # (most tests) costs a few attribute reads.
    checked: set[int] = set()  # ids of modules and classes whose own markers were read
    previous_parent = None
    for item in items:
        if _uses_a_nocompile_fixture(item) or item.own_markers and _has_a_budget_marker(item):
            return True
        node = item.parent
        if node is previous_parent:
            continue
        previous_parent = node
        while node is not None and id(node) not in checked:
            if _has_a_budget_marker(node):
                return True
            checked.add(id(node))
            node = node.parent
    return False


def _has_a_budget_marker(node: pytest.Item | pytest.Collector) -> bool:
    return any(marker.name in BUDGET_MARKERS for marker in node.own_markers)


class Reports:
    """The report hook: the watcher's sections and entries on each report, then the run's results.

    Registered with the watcher, on an xdist controller (which gathers what
    its workers send) and, while the run idles, for a JSON report's outcomes.
    In a worker it only annotates: the controller gathers.
    """

    def __init__(self, session: NocompileSession) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)  # before junitxml, the terminal and xdist's worker read the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        session = self.session
        if session.watcher.watches:
            session.watcher.annotate(report)
        if not session.is_worker:  # the controller gathers the results, from the reports this worker sends
            session.gather(report)


class IdleTests:
    """The one per-test hook while no test has imported torch: nothing can have compiled yet.

    Each test gets the run's shared idle entry, and its count properties on
    its teardown report (an xdist controller makes the entry from those).
    The test in which torch first appears wakes the watcher for the tests
    after it, and is warned about if it compiled.
    """

    def __init__(self, session: NocompileSession) -> None:
        self.session = session
        self.entry, self.properties = session.shared_idle_entry(session.default_budget)
        self.results = None if session.is_worker else session.results

    # A wrapper: its code after the yield runs after pytest's own teardown,
    # also when that raised, and before the teardown report is made from the
    # item. A warning raised as an error (-W error) there errors this test.
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            properties = item.user_properties
            if self.properties[0] not in properties:  # already there from an earlier attempt (pytest-rerunfailures)
                properties.extend(self.properties)
            if self.results is not None:
                self.results[item.nodeid] = self.entry
            if capture.torch_imported():
                self.session.wake_watcher()
                warn_if_compiled_unwatched(item)


class Watcher:
    """The per-test hooks: plan a test's watch, capture around it, judge its budget.

    Registered by :meth:`NocompileSession.wake_watcher`. For a test nobody
    watches each hook is a dict lookup and a return: setup plans the watch
    and starts capture, call checks the budget, and the report hook
    (:class:`Reports`, through :meth:`annotate`) adds sections and, with the
    teardown report, ends capture and attaches the test's entry. Capture
    ends with teardown, not the protocol, because pytest-rerunfailures runs
    setup, call and teardown again inside one protocol.
    """

    def __init__(self, session: NocompileSession) -> None:
        self.session = session
        # Tests now running that the plugin watches, by node id: the report
        # hook has only the report, and a stash miss costs an exception.
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
