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

import os
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, ContextManager, Generator, Optional, Sequence

import pytest

from .budget import KINDS_BY_MARKER, RECOMPILES, BudgetUsageError, MarkerBudget, RecompileBudget, budget_from_marker, with_markers
from .fixtures import FIXTURE_NAMES
from .observe import arrival, capture
from .result import RESULT_ATTRIBUTE, TestResult, count_properties, judge, kinds_over_budget

if TYPE_CHECKING:
    from .observe.children import ChildReports
    from .observe.event_files import EventDirectory
    from .record import RecompileRecord
    from .results import Results
    from .settings import RunSettings

WATCHING_KEY = pytest.StashKey["Watching"]()


class CaptureLostWarning(pytest.PytestWarning):
    """pytest-nocompile could no longer see recompiles: something switched its capture off."""


class Watch:
    """A watched test's plan: its budget, then its record, or why its marker is unusable."""

    __slots__ = ("budget", "record", "usage_error", "phase", "over", "strict", "strict_patch", "problem", "reports",
                 "call_started_at")

    def __init__(self, budget: RecompileBudget, usage_error: Optional[str] = None) -> None:
        self.budget = budget
        # Made when capture starts, or when a fixture or block asks for it: a
        # test that runs before dynamo is imported, and never imports it, needs none.
        self.record: Optional[RecompileRecord] = None
        self.usage_error = usage_error
        self.phase = "setup"  # the test's phase, for a record made mid-test
        self.over: Optional[tuple[str, ...]] = None  # the kinds over budget, judged when the call ended
        self.strict = False  # the call raises at a recompile (dynamo's error_on_recompile)
        self.strict_patch: Optional[ContextManager[None]] = None  # entered when dynamo arrived mid-call
        self.problem: Optional[str] = None  # why capture could not start when dynamo arrived
        self.reports: Optional[EventDirectory] = None  # where the test's child processes report
        self.call_started_at: Optional[float] = None  # for a record made after the call started

    def ensure_record(self) -> RecompileRecord:
        """The record, made empty and put in the test's phase if it is not there yet.

        Before dynamo is imported nothing can have compiled, so a record made
        in the middle of the call counts that call from zero exactly.
        """
        if self.record is None:
            from .record import RecompileRecord

            record = self.record = RecompileRecord(self.budget, capture.graphs_compiled)
            if self.reports is not None:
                record.read_children_from(self.reports)
            if self.phase == "call":
                record.start_call(self.call_started_at)
            elif self.phase == "teardown":
                record.end_setup()
        return self.record

    def needs_record(self) -> bool:
        """Whether child processes reported though nothing made the record yet (dynamo never came to this process)."""
        return self.record is None and self.reports is not None and self.reports.exists()


# Every configured run's watcher in this process (pytester runs nest), latest last.
_WATCHERS: list[Watcher] = []


def recording_now() -> Optional[RecompileRecord]:
    """The record of the test a watcher in this process is watching now, or None."""
    for watcher in reversed(_WATCHERS):
        if watcher.current is not None:
            return watcher.current.ensure_record()
    return None


def watch_of(config: pytest.Config, nodeid: str) -> Optional[Watch]:
    """The watch of a test now running, or None."""
    return config.stash[WATCHING_KEY].watcher.watches.get(nodeid)


class Watching:
    """Per run: registers the per-test hooks the run needs, once collection shows what that is."""

    def __init__(self, config: pytest.Config, settings: RunSettings, results: Results) -> None:
        self.config = config
        self.settings = settings
        self.results = results
        self.child_reports: Optional[ChildReports] = None
        if settings.watch_children:
            from .observe.children import ChildReports

            self.child_reports = ChildReports()
        self.watcher = Watcher(config, settings, results, self.child_reports)
        self._idle_tests: Optional[IdleTests] = None  # while the run idles
        self._items: Sequence[pytest.Item] = ()
        self.dynamo_arrived_here = False  # dynamo was imported while this run waited for it

    # Only a process that collects tests runs this (an xdist controller does not).
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        settings = self.settings
        self._items = session.items
        if settings.watch_by_default and arrival.dynamo_imported() or _any_asks_to_be_watched(session.items):
            self.wake_watcher()
        elif settings.watch_by_default:
            # Idle: nothing can compile before torch is imported, so every test
            # gets the same result, from one teardown hook; the report hook runs
            # only for a JSON report's outcomes.
            self._idle_tests = IdleTests(self) if self.child_reports is None else IdleTestsWithChildren(self, self.child_reports)
            self._register(self._idle_tests, "nocompile-idle")
            if settings.json_path and not settings.is_worker:
                self._register(self.results.report_hook, "nocompile-reports")
        else:
            # No budget, no report, and no test asks for one: nothing in this
            # run can be watched, and none of these hooks has anything to do.
            self.config.pluginmanager.unregister(self)
            self.config.pluginmanager.unregister(self.results)
            _WATCHERS.remove(self.watcher)
            return
        if not arrival.dynamo_imported():
            arrival.when_dynamo_arrives(self.dynamo_arrived)

    def dynamo_arrived(self) -> None:
        """dynamo finished importing: watch from now on, the test now running included."""
        self.dynamo_arrived_here = True
        self.wake_watcher()
        running = os.environ.get("PYTEST_CURRENT_TEST")  # "<nodeid> (<phase>)", set by pytest for each phase
        if not running:
            return  # between tests: the next test's setup starts capture
        nodeid, _, phase = running.rpartition(" (")
        item = next((item for item in self._items if item.nodeid == nodeid), None)
        if item is not None:
            self.watcher.dynamo_arrived(item, phase.rstrip(")"), self.idle_reports(item))

    def idle_reports(self, item: pytest.Item) -> Optional[EventDirectory]:
        """The child reports of a test that ran idle until now, handed to the watcher with the test."""
        idle = self._idle_tests
        return idle.take_reports(item) if isinstance(idle, IdleTestsWithChildren) else None

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
        arrival.stop_waiting_for_dynamo(self.dynamo_arrived)

    def pytest_unconfigure(self) -> None:
        self.watcher.stop_capture()
        arrival.stop_waiting_for_dynamo(self.dynamo_arrived)
        if self.watcher in _WATCHERS:
            _WATCHERS.remove(self.watcher)
        if self.child_reports is not None:
            self.child_reports.close()


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
    The test in which dynamo arrives is watched from then on: the import hook
    wakes the watcher, which takes that test over.
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
            self.finish(item)

    def finish(self, item: pytest.Item) -> None:
        """After the test's teardown: its idle result, unless the watcher took the test over."""
        if item.nodeid not in self.watching.watcher.watches:  # else dynamo arrived in it: the watcher judges it
            properties = item.user_properties
            if self.properties[0] not in properties:  # already there from an earlier attempt (pytest-rerunfailures)
                properties.extend(self.properties)
            if self.results is not None:
                self.results[item.nodeid] = self.result
            if arrival.dynamo_imported() and not self.watching.dynamo_arrived_here:
                # Imported past the import hook (it was never installed, or something
                # bypassed sys.meta_path): watch from the next test, and say what was missed.
                self.watching.wake_watcher()
                warn_if_compiled_unwatched(item)


class IdleTestsWithChildren(IdleTests):
    """Idle, but the processes a test starts may compile: each test's children report to a directory of its own.

    Setup points the variable at it; the call is timed, and when a child
    reported, the watcher takes the test over (and the run stops idling):
    the call is judged as the watcher judges any, in each process. Teardown
    removes the directory and the variable.
    """

    def __init__(self, watching: Watching, child_reports: ChildReports) -> None:
        super().__init__(watching)
        self.child_reports = child_reports
        self.reports: Optional[EventDirectory] = None  # the running test's
        self._nodeid: Optional[str] = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.reports is not None:  # a test interrupted before its teardown
            self.child_reports.end(self.reports)
        self.reports, self._nodeid = self.child_reports.begin(), item.nodeid

    def take_reports(self, item: pytest.Item) -> Optional[EventDirectory]:
        """Hand the running test's reports over (to the watcher, which ends them)."""
        if item.nodeid != self._nodeid:
            return None
        reports, self.reports = self.reports, None
        return reports

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        started = time.time()
        result = yield
        reports = self.reports
        if reports is None or not reports.exists():
            return result
        # A child compiled: the watcher takes this test over, from the call's start.
        watching, watcher = self.watching, self.watching.watcher
        watching.wake_watcher()
        watch = watcher.adopt(item, "call", self.take_reports(item), started)
        if watch is None or watch.usage_error is not None:
            return result
        watcher.end_call(item, watch)
        failure = watcher.judge_call(item, watch)
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        return result

    def finish(self, item: pytest.Item) -> None:
        super().finish(item)
        if self.reports is not None and item.nodeid == self._nodeid:
            self.child_reports.end(self.reports)
            self.reports = None


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

    def __init__(self, config: pytest.Config, settings: RunSettings, results: Results,
                 child_reports: Optional[ChildReports] = None) -> None:
        self.config = config
        self.settings = settings
        self.results = results
        self.child_reports = child_reports  # None: child processes are not watched
        # Tests now running that the plugin watches, by node id: the report
        # hook has only the report, and a stash miss costs an exception.
        self.watches: dict[str, Watch] = {}
        self._capture: Optional[capture.RecompileCapture] = None
        self.current: Optional[Watch] = None  # the watched test now running
        _WATCHERS.append(self)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            # Already done by the teardown report, but for an interrupt
            # (KeyboardInterrupt, pytest.exit) or a report a rerun plugin did
            # not log: leave torch as the test found it.
            self.stop_capture()
            watch = self.watches.pop(item.nodeid, None)
            if watch is not None:
                self.end_reports(watch)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.stop_capture()
        watch = self._plan_watch(item)
        if watch is None:
            return
        self.watches[item.nodeid] = watch
        if watch.usage_error is not None:
            pytest.fail(watch.usage_error, pytrace=False)
        self.current = watch
        if self.child_reports is not None:
            watch.reports = self.child_reports.begin()
        dynamo_here = arrival.dynamo_imported()
        # A torch that is imported (or missing) but unusable fails a budget that cannot be checked.
        problem = capture.torch_problem() if dynamo_here or capture.torch_imported_or_missing() else None
        if problem is not None:
            pytest.fail(f"pytest-nocompile cannot watch {item.nodeid}: {problem}", pytrace=False)
        if not dynamo_here:
            return  # nothing can have compiled yet: capture starts when dynamo arrives (dynamo_arrived)
        budget = watch.budget
        if budget.isolate if budget.isolate is not None else self.settings.isolate_by_default:
            capture.reset_dynamo()
        self._start_capture(watch)

    def adopt(self, item: pytest.Item, phase: str, reports: Optional[EventDirectory],
              call_started_at: Optional[float] = None) -> Optional[Watch]:
        """Watch a test from the middle of ``phase``: the run idled until now, so no hook of this test planned it."""
        watch = self._plan_watch(item)
        if watch is None or watch.usage_error is not None:
            if reports is not None and self.child_reports is not None:
                self.child_reports.end(reports)
            return watch
        self.watches[item.nodeid] = watch
        watch.phase = phase
        watch.reports = reports
        watch.call_started_at = call_started_at
        return watch

    def _start_capture(self, watch: Watch) -> None:
        record = watch.ensure_record()
        if self._capture is None:
            self._capture = capture.RecompileCapture()
        self._capture.start(record.add_recompile, record.add_limit_warning, record.add_graph_break)
        self.current = watch

    def dynamo_arrived(self, item: pytest.Item, phase: str, reports: Optional[EventDirectory] = None) -> None:
        """dynamo finished importing during ``phase`` of ``item``: capture from here on, before anything compiles.

        ``reports``: where the children of a test that ran idle until now report.
        """
        watch = self.watches.get(item.nodeid)
        if watch is None:  # the run idled until now: no hook of this test planned its watch
            watch = self.adopt(item, phase, reports)
            if watch is None or watch.usage_error is not None:
                return
            if phase == "call":
                watch.strict = self._strict(watch.budget)
                self.config.pluginmanager.register(_LateCall(self, item, watch))
        if watch.usage_error is not None:
            return
        watch.problem = capture.torch_problem()
        if watch.problem is not None:
            return
        self._start_capture(watch)
        if watch.phase == "call" and watch.strict:
            watch.strict_patch = capture.raising_on_recompile()
            watch.strict_patch.__enter__()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        watch = self.watches.get(item.nodeid)
        if watch is None or watch.usage_error is not None:
            return (yield)
        watch.strict = self._strict(watch.budget)
        watch.phase = "call"
        if watch.record is not None:
            watch.record.start_call()
        elif watch.reports is not None:
            watch.call_started_at = time.time()
        try:
            # Without dynamo yet, dynamo_arrived enters the patch if it arrives in the call.
            with capture.raising_on_recompile() if watch.strict and arrival.dynamo_imported() else nullcontext():
                result = yield
        finally:
            self.end_call(item, watch)
        failure = self.judge_call(item, watch)
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        return result

    def _strict(self, budget: RecompileBudget) -> bool:
        """Whether the call raises at a recompile: a recompile budget, and strict by marker or option."""
        return budget.allowed(RECOMPILES) is not None and (
            budget.strict if budget.strict is not None else self.settings.strict_by_default
        )

    def end_call(self, item: pytest.Item, watch: Watch) -> None:
        """The call ended (its own error, if any, still on its way): fix the counts, undo what the call changed."""
        if watch.needs_record():
            watch.ensure_record()  # children reported: a record from the call's start, though this process never compiled
        watch.phase = "teardown"
        if watch.record is not None:
            watch.record.end_call()
        if watch.strict_patch is not None:
            watch.strict_patch.__exit__(None, None, None)
            watch.strict_patch = None
        if self._capture is not None and self._capture.active and not self._capture.capturing():
            item.warn(CaptureLostWarning(
                f"recompile capture was switched off during {item.nodeid} (torch._logging.set_logs "
                "resets torch's log state); its recompile count may be incomplete"
            ))

    def judge_call(self, item: pytest.Item, watch: Watch) -> Optional[str]:
        """The failure text of a call that passed but is over budget (or could not be watched), else None."""
        if watch.problem is not None and watch.budget.budgeted:
            return f"pytest-nocompile cannot watch {item.nodeid}: {watch.problem}"
        if watch.record is None:
            return None  # dynamo never arrived: nothing compiled
        problems = watch.record.child_problems() if watch.record.children and watch.budget.budgeted else ()
        if problems:
            return f"pytest-nocompile cannot watch a process of {item.nodeid}: " + "; ".join(problems)
        over = watch.over = kinds_over_budget(watch.record)
        if not over:
            return None
        from .output.report import format_budget_failure

        return format_budget_failure(watch.record, over)

    def annotate(self, report: pytest.TestReport) -> Optional[TestResult]:
        """Add a watched test's recompile sections to its report; with teardown, end the watch, attach its result and return it."""
        watch = self.watches.get(report.nodeid)
        if watch is None:
            return None
        when = report.when
        if when == "teardown":
            del self.watches[report.nodeid]
            self.stop_capture()
            if watch.needs_record():
                watch.ensure_record()
            if watch.record is not None:
                watch.record.read_children()  # the teardown's, for its section
            self.end_reports(watch)
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

    def end_reports(self, watch: Watch) -> None:
        """The test ended: its children's variable and directory go."""
        if watch.reports is not None and self.child_reports is not None:
            self.child_reports.end(watch.reports)
            watch.reports = None

    def stop_capture(self) -> None:
        self.current = None
        if self._capture is not None:
            self._capture.stop()


class _LateCall:
    """Judges the call of the test in which dynamo arrived while the run idled.

    No call hook of the watcher wrapped that call (it was registered in the
    middle of it), so the call's report is judged instead: a call that passed
    but went over budget gets a failed report, made as pytest makes one.
    Registered for that one test, and unregistered with its call's report.
    """

    def __init__(self, watcher: Watcher, item: pytest.Item, watch: Watch) -> None:
        self.watcher, self.item, self.watch = watcher, item, watch

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if item is not self.item or call.when != "call":
            return report
        self.watcher.config.pluginmanager.unregister(self)
        self.watcher.end_call(item, self.watch)
        failure = self.watcher.judge_call(item, self.watch) if report.passed else None
        if failure is None:
            return report
        failed_call = pytest.CallInfo.from_call(lambda: pytest.fail(failure, pytrace=False), when="call")
        failed = pytest.TestReport.from_item_and_call(item, failed_call)
        failed.duration, failed.start, failed.stop = report.duration, report.start, report.stop
        return failed


def warn_if_compiled_unwatched(item: pytest.Item) -> None:
    """Warn when dynamo arrived unseen by the import hook and compiled: capture could not start before that."""
    if capture.compiled_anything():
        item.warn(CaptureLostWarning(
            f"torch._dynamo was first imported inside {item.nodeid} past pytest-nocompile's import hook, "
            "so its compiles were not watched; import torch._dynamo at module level (or in a conftest) to watch it"
        ))


def _add_section(report: pytest.TestReport, record: RecompileRecord, when: str) -> None:
    """Show recompiles beside a test's own failure, or those of setup/teardown."""
    if when == "call":
        events = [event for event in record.all_events() if event.phase != "teardown"]
        limit_hits, suffix = record.all_limit_hits(), ""
        shown = report.failed and bool(events or limit_hits)
    else:
        events = record.in_phase(when)  # type: ignore[arg-type]  # "setup" or "teardown"
        limit_hits, suffix = [], f" ({when}, not counted)"
        shown = bool(events)
    if shown:
        from .output.report import SECTION_TITLE, format_section

        report.sections.append((SECTION_TITLE + suffix, format_section(events, limit_hits)))

