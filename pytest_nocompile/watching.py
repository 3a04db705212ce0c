"""Watching tests: which per-test hooks a run needs, and the hooks that watch each test.

Every hook costs every test its call, pluggy's dispatch alone about as much as
a small hook's body, so none is registered that the run cannot use:

- nothing to watch (no budget, no report, no test with a budget marker or a
  nocompile fixture): no per-test hook at all;
- a run-wide budget or report before torch is imported: nothing can compile
  yet, so one teardown hook per test (:class:`IdleTests`) gives each test the
  run's shared idle result;
- otherwise :class:`Watcher`'s hooks, and the report hook of :mod:`.results`.

torch is never imported here before something else imports it. The modules
that parse, record and report recompiles load with the first test that needs
them.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Generator, Optional, Sequence

import pytest

from . import capture
from .budget import KINDS_BY_MARKER, RECOMPILES, BudgetUsageError, MarkerBudget, RecompileBudget, budget_from_marker, with_markers
from .fixtures import FIXTURE_NAMES
from .result import RESULT_ATTRIBUTE, TestResult, count_properties, judge, kinds_over_budget

if TYPE_CHECKING:
    from .record import RecompileRecord
    from .results import Results
    from .settings import RunSettings

WATCHING_KEY = pytest.StashKey["Watching"]()


class CaptureLostWarning(pytest.PytestWarning):
    """pytest-nocompile could no longer see recompiles: something switched its capture off."""


class Watch:
    """A watched test's plan: its budget, then its record, or why its marker is unusable."""

    __slots__ = ("budget", "record", "usage_error", "over", "deferred")

    def __init__(self, budget: RecompileBudget, usage_error: Optional[str] = None) -> None:
        self.budget = budget
        self.record: Optional[RecompileRecord] = None  # made when the test starts with torch imported
        self.usage_error = usage_error
        self.over: Optional[tuple[str, ...]] = None  # the kinds over budget, judged when the call ended
        self.deferred = False  # torch was not imported when the test started: nothing to watch

    def ensure_record(self) -> RecompileRecord:
        """The record, made empty if torch is not imported yet (then nothing will be captured)."""
        if self.record is None:
            from .record import RecompileRecord

            self.record = RecompileRecord(self.budget)
        return self.record


def watch_of(config: pytest.Config, nodeid: str) -> Optional[Watch]:
    """The watch of a test now running, or None."""
    return config.stash[WATCHING_KEY].watcher.watches.get(nodeid)


class Watching:
    """Per run: registers the per-test hooks the run needs, once collection shows what that is."""

    def __init__(self, config: pytest.Config, settings: RunSettings, results: Results) -> None:
        self.config = config
        self.settings = settings
        self.results = results
        self.watcher = Watcher(settings, results)
        self._idle_tests: Optional[IdleTests] = None  # while the run idles

    # Only a process that collects tests runs this (an xdist controller does not).
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        settings = self.settings
        if settings.watch_by_default and capture.torch_imported() or _any_asks_to_be_watched(session.items):
            self.wake_watcher()
        elif settings.watch_by_default:
            # Idle: nothing can compile before torch is imported, so every test
            # gets the same result, from one teardown hook; the report hook runs
            # only for a JSON report's outcomes.
            self._idle_tests = IdleTests(self)
            self._register(self._idle_tests, "nocompile-idle")
            if settings.json_path and not settings.is_worker:
                self._register(self.results.report_hook, "nocompile-reports")
        else:
            # No budget, no report, and no test asks for one: nothing in this
            # run can be watched, and none of these hooks has anything to do.
            self.config.pluginmanager.unregister(self)
            self.config.pluginmanager.unregister(self.results)

    def wake_watcher(self) -> None:
        """Register the per-test hooks; the run stops idling."""
        if self._idle_tests is not None:
            self.config.pluginmanager.unregister(self._idle_tests)
            self._idle_tests = None
        self._register(self.watcher, "nocompile-watcher")
        self._register(self.results.report_hook, "nocompile-reports")

    def _register(self, hooks: object, name: str) -> None:
        if not self.config.pluginmanager.is_registered(hooks):
            self.config.pluginmanager.register(hooks, name)

    def pytest_sessionfinish(self) -> None:
        self.watcher.stop_capture()

    def pytest_unconfigure(self) -> None:
        self.watcher.stop_capture()


def uses_a_nocompile_fixture(item: pytest.Item) -> bool:
    return not FIXTURE_NAMES.isdisjoint(getattr(item, "fixturenames", ()))


def _any_asks_to_be_watched(items: Sequence[pytest.Item]) -> bool:
    """Whether a test has a budget marker or a nocompile fixture (whatever its arguments say)."""
    # item.iter_markers() reads every parent again for every test; here each
    # parent is read once, and a test whose parent is the previous test's
    # (most tests) costs a few attribute reads.
    checked: set[int] = set()  # ids of modules and classes whose own markers were read
    previous_parent = None
    for item in items:
        if uses_a_nocompile_fixture(item) or item.own_markers and _has_a_budget_marker(item):
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
    return any(marker.name in KINDS_BY_MARKER for marker in node.own_markers)


class IdleTests:
    """The one per-test hook while no test has imported torch: nothing can have compiled yet.

    Each test gets the run's shared idle result, and its count properties on
    its teardown report (an xdist controller makes the result from those).
    The test in which torch first appears wakes the watcher for the tests
    after it, and is warned about if it compiled.
    """

    def __init__(self, watching: Watching) -> None:
        self.watching = watching
        settings = watching.settings
        self.result, self.properties = watching.results.idle(settings.default_budget)
        self.results = None if settings.is_worker else watching.results.results

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
                self.results[item.nodeid] = self.result
            if capture.torch_imported():
                self.watching.wake_watcher()
                warn_if_compiled_unwatched(item)


class Watcher:
    """The per-test hooks: plan a test's watch, capture around it, judge its budget.

    For a test nobody watches each hook is a dict lookup and a return: setup
    plans the watch and starts capture, call tells the record when the call
    starts and ends and judges the budget, and the report hook
    (:meth:`annotate`) adds sections and, with the teardown report, ends
    capture and attaches the test's result. Capture ends with teardown, not
    the protocol, because pytest-rerunfailures runs setup, call and teardown
    again inside one protocol.
    """

    def __init__(self, settings: RunSettings, results: Results) -> None:
        self.settings = settings
        self.results = results
        # Tests now running that the plugin watches, by node id: the report
        # hook has only the report, and a stash miss costs an exception.
        self.watches: dict[str, Watch] = {}
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
        if budget.isolate if budget.isolate is not None else self.settings.isolate_by_default:
            capture.reset_dynamo()
        from .record import RecompileRecord

        record = watch.record = RecompileRecord(budget, capture.graphs_compiled)
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
        budget = record.budget
        strict = budget.allowed(RECOMPILES) is not None and (
            budget.strict if budget.strict is not None else self.settings.strict_by_default
        )
        record.start_call()
        try:
            with capture.raising_on_recompile() if strict else nullcontext():
                result = yield
        finally:
            record.end_call()
            if self._capture is not None and self._capture.active and not self._capture.capturing():
                item.warn(CaptureLostWarning(
                    f"recompile capture was switched off during {item.nodeid} (torch._logging.set_logs "
                    "resets torch's log state); its recompile count may be incomplete"
                ))
        over = watch.over = kinds_over_budget(record)
        if over:
            from .report import format_budget_failure

            pytest.fail(format_budget_failure(record, over), pytrace=False)
        return result

    def annotate(self, report: pytest.TestReport) -> Optional[TestResult]:
        """Add a watched test's recompile sections to its report; with teardown, end the watch, attach its result and return it."""
        watch = self.watches.get(report.nodeid)
        if watch is None:
            return None
        when = report.when
        if when == "teardown":
            del self.watches[report.nodeid]
            self.stop_capture()
        if watch.usage_error is not None:
            return None
        record = watch.record
        if record is not None:
            if when == "setup":
                record.end_setup()
            if not watch.over:  # a budget failure's text already shows the recompiles
                _add_section(report, record, when)
        if when == "teardown":
            if record is not None:
                result = judge(record, watch.over)
                properties = count_properties(result)
            else:
                result, properties = self.results.idle(watch.budget)
            if self.settings.is_worker:  # for the xdist controller, which gathers it as JSON
                setattr(report, RESULT_ATTRIBUTE, result.to_dict())
            report.user_properties.extend(properties)
            return result
        return None

    def _plan_watch(self, item: pytest.Item) -> Optional[Watch]:
        closest: dict[str, pytest.Mark] = {}
        for marker in item.iter_markers():  # one pass, closest first; most tests have no marker at all
            if marker.name in KINDS_BY_MARKER and marker.name not in closest:
                closest[marker.name] = marker
        settings = self.settings
        budget, watched = settings.default_budget, settings.watch_by_default
        if closest:
            read: dict[str, MarkerBudget] = {}
            for name, marker in closest.items():
                kind = KINDS_BY_MARKER[name]
                try:
                    read[kind.key] = budget_from_marker(marker.args, marker.kwargs, kind)
                except BudgetUsageError as error:
                    return Watch(budget, usage_error=f"invalid {name} marker on {item.nodeid}: {error}")
            budget = with_markers(budget, read)
            watched = budget.budgeted or settings.watch_every_test
        if watched or uses_a_nocompile_fixture(item):
            return Watch(budget)
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


def _add_section(report: pytest.TestReport, record: RecompileRecord, when: str) -> None:
    """Show recompiles beside a test's own failure, or those of setup/teardown."""
    if when == "call":
        events = [event for event in record.events if event.phase != "teardown"]
        limit_hits, suffix = record.limit_hits, ""
        shown = report.failed and bool(events or limit_hits)
    else:
        events = record.in_phase(when)  # type: ignore[arg-type]  # "setup" or "teardown"
        limit_hits, suffix = [], f" ({when}, not counted)"
        shown = bool(events)
    if shown:
        from .report import SECTION_TITLE, format_section

        report.sections.append((SECTION_TITLE + suffix, format_section(events, limit_hits)))

