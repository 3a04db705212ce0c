"""Watching tests: the one path every watched test takes.

A run registers these per-test hooks only where it needs them
(:mod:`.run_watching`). Every test then goes the same way, whatever torch
has done so far:

1. setup opens the test's :class:`~.watch.Watch` and its record (the features
   hear of it: the children feature points the test's child processes at a
   folder of their own), and, once dynamo is imported, resets it (isolation)
   and attaches the record to dynamo's logs;
2. if dynamo arrives later (``torch.compile`` imports it in the middle of a
   test), the import hook attaches the open record right then, before
   anything compiled: the counts start exact at zero either way;
3. the call is timed and judged: a passing call over budget, or that broke
   a contract (read by the contracts feature), fails;
4. after teardown the watch closes: the record is detached, its processes'
   reports are read a last time, and the teardown report carries the result.

torch is never imported here before something else imports it.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generator, Hashable, Mapping, Optional

import pytest

from ..judge.result import RESULT_ATTRIBUTE, TestResult, count_properties
from ..observe import arrival, wanted_signals
from ..record.record import RecompileRecord
from ..vocabulary.kinds import COUNTED_KINDS
from .planning import Plan, plan_key, plan_test, uses_a_nocompile_fixture
from .watch import (
    CAPTURE,
    WATCHES_KEY,
    CaptureLostWarning,
    Watch,
    closed,
    end_warnings,
    loaded_capture,
    not_measured,
    opened,
    said_not_measured_this_run,
    say_if_not_measured,
    warn_if_compiled_unwatched,
)

if TYPE_CHECKING:
    from ..record.record import ProcessReporting
    from .results import Results
    from .settings import RunSettings

# The hooks of ..hookspecs the watcher calls for each watched test.
PER_TEST_HOOKS = ("pytest_nocompile_watch_opened", "pytest_nocompile_record_attached",
                  "pytest_nocompile_call_started", "pytest_nocompile_call_ended",
                  "pytest_nocompile_watch_closed", "pytest_nocompile_test_ended",
                  "pytest_nocompile_test_reported")


class Watcher:
    """The per-test hooks: open a test's watch at setup, judge its call, close it after teardown,
    report it.

    For a test nobody watches each hook is a dict lookup and a return.
    Capture ends with teardown, not the protocol, because
    pytest-rerunfailures runs setup, call and teardown again inside one
    protocol: each attempt has a watch of its own.
    """

    def __init__(self, config: pytest.Config, settings: RunSettings, results: Results) -> None:
        self.config = config
        self.settings = settings
        self.results = results
        # Tests now running that the plugin watches, by node id: the report
        # hook has only the report, and a stash miss costs an exception.
        self.watches: dict[str, Watch] = {}
        config.stash[WATCHES_KEY] = self.watches
        self.current: Optional[Watch] = None  # the watched test now running
        self.last_closed: Optional[Watch] = None  # its teardown report comes next
        self.gathers = not settings.is_worker  # results are gathered here (not on an xdist worker)
        self.dynamo_arrived_here = False  # the import hook saw dynamo arrive during this run
        # the kinds found uncheckable here, and said (blocks' too)
        self.said_not_measured = said_not_measured_this_run()
        # By planning.plan_key: the plan its tests share (parents live as long as the run).
        self._plans: dict[Hashable, Plan] = {}
        self.hook = config.hook  # the features' hooks (..hookspecs)
        # The per-test hooks of ..hookspecs some plugin implements: each call site asks here first
        # (a hook call costs more than the check, on every test), and the others are not called.
        # Worked out again when a test opens after a plugin was registered.
        self._implemented: frozenset[str] = frozenset()
        self._implemented_stale = True
        # Where the tests' other processes report (a feature's: the children's), asked at the
        # first watched test.
        self._process_reporting: Optional[ProcessReporting] = None
        self._asked_process_reporting = False

    # Historic: called for each plugin registered before this one, then for each registered after
    # (some thirty at start-up, where no test asks yet).
    def pytest_plugin_registered(self) -> None:
        self._implemented_stale = True

    def _implemented_hooks(self) -> frozenset[str]:
        return frozenset(name for name in PER_TEST_HOOKS
                         if getattr(self.hook, name).get_hookimpls())

    # A wrapper: a test interrupted in its setup (KeyboardInterrupt, pytest.exit in a fixture)
    # never reaches its teardown; its watch closes here, leaving torch as the test found it.
    # The innermost wrapper: a usage error raised before its yield reaches every other wrapper
    # (pytest's logging one included, whose teardown expects its setup to have run).
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        record = self._open(item)
        try:
            return (yield)
        except BaseException as error:
            if not isinstance(error, Exception):
                self.close_open_watch()
            raise
        finally:
            if record is not None:
                if CAPTURE in sys.modules:
                    _settle(record)
                record.end_setup()

    def _running(self, item: pytest.Item) -> Optional[Watch]:
        """The test's open watch, if it has one (the one now running, nearly always: no node id
        made)."""
        current = self.current
        if current is not None and current.item is item:
            return current
        return self.watches.get(item.nodeid)

    def _open(self, item: pytest.Item) -> Optional[RecompileRecord]:
        """Open the test's watch, if the run watches it; its record."""
        if self.current is not None:  # an earlier attempt's that ended before its teardown
            self._close(self.current)
        if self._implemented_stale:  # before any feature hears of this test
            self._implemented = self._implemented_hooks()
            self._implemented_stale = False
        watch = self._plan_watch(item)
        if watch is None:
            return None
        watch.nodeid = nodeid = item.nodeid
        watch.item = item
        self.watches[nodeid] = watch
        if watch.usage_error is not None:
            pytest.fail(watch.usage_error, pytrace=False)
        self.current = watch
        opened(watch)
        record = watch.record
        assert record is not None  # a watch without a usage error has one
        if not self._asked_process_reporting:
            self._process_reporting = self.hook.pytest_nocompile_process_reports(
                config=self.config)
            self._asked_process_reporting = True
        if self._process_reporting is not None:  # a method, not a hook: it comes for every test
            record.read_children_from(self._process_reporting.begin(nodeid))
        if "pytest_nocompile_watch_opened" in self._implemented:
            self.hook.pytest_nocompile_watch_opened(watch=watch)
        dynamo_here = arrival.dynamo_imported()
        # A torch that is imported but unusable (too old) fails a budget that cannot be checked.
        # Without torch (not installed, or its import blocked) nothing can compile: true 0s.
        problem = _dynamo_state().torch_problem() if arrival.torch_imported() else None
        if problem is not None:
            if _judged(watch):
                pytest.fail(f"pytest-nocompile cannot watch {nodeid}: {problem}", pytrace=False)
            watch.problem = problem  # a report's test, no budget: it runs, its counts no counts
            return record
        if dynamo_here:  # else nothing can have compiled yet: dynamo_arrived attaches the record
            if watch.plan is not None and watch.plan.isolate:
                _dynamo_state().reset_dynamo()
            self._attach(watch, record)
        elif watch.plan is not None and (watch.plan.health_signals
                                         or self.settings.watch_every_test):
            from ..observe.capture import DYNAMO_LOGS

            # a source that needs no dynamo (syncs) hears this test from now on
            DYNAMO_LOGS.attach_early(record)
        return record

    def dynamo_arrived(self) -> None:
        """dynamo finished importing (in the importing thread): the open watch's record hears from
        it from now on."""
        self.dynamo_arrived_here = True
        watch = self.current
        if watch is None or watch.attached or watch.record is None:
            return
        watch.problem = _dynamo_state().torch_problem()
        if watch.problem is not None:
            return
        self._attach(watch, watch.record)

    def _attach(self, watch: Watch, record: RecompileRecord) -> None:
        # here: loaded once dynamo is, or a test reads a source that needs none
        from ..observe.capture import DYNAMO_LOGS

        DYNAMO_LOGS.attach(record)
        watch.attached = True
        if "pytest_nocompile_record_attached" in self._implemented:
            self.hook.pytest_nocompile_record_attached(watch=watch)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        watch = self._running(item)
        if watch is None or watch.record is None or watch.plan is None:
            return (yield)
        watch.record.start_call()
        watch.metrics_mark = _metrics_mark()
        # What its call reads (the signals wanted now, and whether the record hears now): the
        # kinds it does not read have no count.
        heard = watch.attached or (CAPTURE in sys.modules and _attached_early(watch.record))
        watch.reading = (wanted_signals.wanted_signals(), heard)
        if "pytest_nocompile_call_started" in self._implemented:
            self.hook.pytest_nocompile_call_started(watch=watch)
        try:
            result = yield
        except BaseException as error:
            self._end_call(item, watch, error)
            if not isinstance(error, Exception):  # interrupted: no teardown follows
                self.close_open_watch()
            raise
        self._end_call(item, watch, None)
        # nothing to judge (nearly every test)
        if watch.problem is None and watch.record.empty() and not watch.budget.has_floor:
            return result
        failure = self._judge_call(item, watch)
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        return result

    def _end_call(self, item: pytest.Item, watch: Watch, error: Optional[BaseException]) -> None:
        """The call ended (its own error, if any, still on its way): fix the counts, undo what the
        call changed."""
        assert watch.record is not None
        if CAPTURE in sys.modules:
            _settle(watch.record)
        if watch.attached:  # dynamo came: what its metrics say compiled, a second witness
            from ..observe.metrics_entries import entries_since, graphs_in

            entries = entries_since(watch.metrics_mark)
            if entries:
                watch.record.add_metrics_graphs(graphs_in(entries))
                if watch.reading is not None:
                    watch.record.add_metrics_witnesses(entries, watch.reading[0])
        watch.record.end_call()
        if "pytest_nocompile_call_ended" in self._implemented:
            self.hook.pytest_nocompile_call_ended(watch=watch, error=error)
        if watch.plan is not None and watch.plan.may_go_unmeasured:
            say_if_not_measured(item, watch.budget, watch.plan.may_go_unmeasured,
                                self.said_not_measured)
        # attached: loaded
        if watch.attached and not loaded_capture().check():  # type: ignore[union-attr]
            item.warn(CaptureLostWarning(
                f"recompile capture was switched off during {item.nodeid} (torch's log state was "
                "replaced without torch._logging re-initialising it); its counts may be incomplete"
            ))

    def _judge_call(self, item: pytest.Item, watch: Watch) -> Optional[str]:
        """The failure text of a call that passed but is over budget (or could not be watched), else
        None."""
        record = watch.record
        assert record is not None
        contracts = watch.plan.contracts if watch.plan is not None else ()
        judged = _judged(watch)
        if watch.problem is not None and judged:
            return f"pytest-nocompile cannot watch {item.nodeid}: {watch.problem}"
        if record.empty() and not watch.budget.has_floor:
            return None
        problems = record.child_problems() if judged else ()
        if problems:
            return (f"pytest-nocompile cannot watch a process of {item.nodeid}: "
                    + "; ".join(problems))
        from ..judge.verdict import broken_contracts, kinds_over_budget, processes_over_budget

        snapshot = record.snapshot()
        # the verdict, made once: the failure text and the result at teardown only write it
        found = watch.found = (processes_over_budget(snapshot, watch.budget)
                               if watch.budget.limits else [])
        over = watch.over = kinds_over_budget(snapshot, watch.budget, found)
        broken = watch.broken = broken_contracts(snapshot, contracts)
        if not (over or broken):
            return None
        from ..output.report import format_budget_failure

        stance = _dynamo_state().compile_stance() if watch.budget.has_floor else None
        failure = ([format_budget_failure(snapshot, watch.budget, over, stance, found)]
                   if over else [])
        return "\n\n".join([*failure, *(text for _, text in broken)])

    # A wrapper: its code after the yield runs after pytest's own teardown,
    # also when that raised, and before the teardown report is made. A
    # warning raised as an error (-W error) there errors this test.
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: Optional[pytest.Item],
    ) -> Generator[None, object, object]:
        watch = self._running(item)
        # A watch closed already (its setup skipped or failed) has told its reports of their end:
        # a teardown now would name a folder to the environment that no end takes back.
        if watch is not None and watch.record is not None and not watch.closed:
            watch.record.start_teardown()
        failed = True  # until the teardown ends without raising
        try:
            result = yield
            failed = False
            return result
        finally:
            if watch is not None:
                self._close(watch)
                warnings = ([] if watch.record is None
                            else end_warnings(watch.record, item.nodeid))
                if "pytest_nocompile_test_ended" in self._implemented:
                    for more in self.hook.pytest_nocompile_test_ended(watch=watch, failed=failed):
                        warnings += more
                for warning in warnings:
                    # after the close: as an error (-W error), it finds everything cleaned up
                    item.warn(warning)
                if (not (watch.attached or self.dynamo_arrived_here)
                        and arrival.DYNAMO in sys.modules):
                    # Imported past the import hook (something bypassed sys.meta_path): the
                    # next test attaches at its setup; say what this one missed.
                    warn_if_compiled_unwatched(item)

    def _close(self, watch: Watch) -> None:
        """The test ended: dynamo's logs and its children stop reaching its record."""
        if watch.closed:
            return
        closed(watch)
        if "pytest_nocompile_watch_closed" in self._implemented:
            self.hook.pytest_nocompile_watch_closed(watch=watch)
        self.last_closed = watch
        if self.current is watch:
            self.current = None
        record = watch.record
        if record is not None:
            # Not loaded (nearly every test of a run that never compiles): nothing was attached.
            if CAPTURE in sys.modules:
                capture = loaded_capture()
                # or attached early (a source that needs no dynamo)
                if capture is not None and (watch.attached or capture.attached(record)):
                    capture.detach(record)
            record.end_test()

    def close_open_watch(self) -> None:
        if self.current is not None:
            self._close(self.current)

    # before junitxml, the terminal and xdist's worker read the report
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        when = report.when
        watch = made_here = None
        if self.watches:
            nodeid = report.nodeid
            # The test now running (setup, call) or just closed (teardown), nearly always: one dict
            # lookup less.
            watch = self.last_closed if when == "teardown" else self.current
            if watch is None or watch.nodeid != nodeid:
                watch = self.watches.get(nodeid)
        if watch is not None:
            if when == "teardown":
                self.last_closed = None
                made_here = self._finish(watch, report)
            # a budget failure's text shows them already
            elif watch.over is None and (when == "setup" or report.failed):
                record = watch.record
                if record is not None and not record.empty():
                    from ..output.report import add_recompile_section

                    # A block's failure lists its recompiles already (pytest keeps the call's error
                    # in sys.last_value, for post-mortem debugging).
                    error = getattr(sys, "last_value", None) if when == "call" else None
                    shown = [event for events
                             in self.hook.pytest_nocompile_shown_in_failure(error=error)
                             for event in events]
                    add_recompile_section(report, record.snapshot(), when, shown)
            if "pytest_nocompile_test_reported" in self._implemented:  # most runs: no feature
                made_here = self._features_report(watch, report, made_here)
        # A worker's controller gathers, from the reports it sends; a plain pass of setup or call
        # changes nothing there (Results.gather's first check, made here to spare the call).
        if self.gathers and (when == "teardown" or report.outcome != "passed"
                             or "wasxfail" in report.__dict__):
            self.results.gather(report, made_here)

    def _features_report(self, watch: Watch, report: pytest.TestReport,
                         result: Optional[TestResult]) -> Optional[TestResult]:
        """The features saw the report: the result (the teardown's) with the fields they set."""
        fields: dict[str, Any] = {}
        for answer in self.hook.pytest_nocompile_test_reported(watch=watch, report=report,
                                                               result=result):
            fields.update(answer)
        if result is None or not fields:
            return result
        result = replace(result, **fields)
        if self.settings.is_worker:  # the controller reads the result from the report
            setattr(report, RESULT_ATTRIBUTE, result.to_dict())
        return result

    def _finish(self, watch: Watch, report: pytest.TestReport) -> Optional[TestResult]:
        """The teardown report: the test's last section, its result attached (and returned)."""
        del self.watches[watch.nodeid]
        record = watch.record
        if record is None:  # a usage error: the test failed at setup for it
            return None
        empty = record.empty()
        snapshot = None if empty else record.snapshot()
        if snapshot is not None and not watch.over:
            from ..output.report import add_recompile_section

            add_recompile_section(report, snapshot, "teardown")
        properties = report.user_properties
        # an earlier attempt's (pytest-rerunfailures) are on the same list: this attempt's replace
        # them
        if properties:
            properties[:] = [prop for prop in properties
                             if not str(prop[0]).startswith("nocompile_")]
        plan = watch.plan
        unmeasured = self._not_measured(watch, empty)
        if empty:  # nothing compiled: the same result for every such test
            idle = plan.idle if plan is not None and not unmeasured else None
            if idle is None:
                idle = self.results.idle(watch.budget, unmeasured)
                if plan is not None and not unmeasured:
                    plan.idle = idle
            result, counts = idle
            properties.extend(counts)
            if self.settings.is_worker and (watch.budget is not self.settings.default_budget
                                            or unmeasured):
                # the controller reads the default budget's from the counts
                setattr(report, RESULT_ATTRIBUTE, result.to_dict())
            return result
        from ..judge.verdict import judge

        assert snapshot is not None
        result = judge(snapshot, watch.budget, watch.over, unmeasured,
                       plan.contracts if plan is not None else (), watch.broken, watch.found)
        properties.extend(count_properties(result))
        if self.settings.is_worker:  # for the xdist controller, which gathers it as JSON
            setattr(report, RESULT_ATTRIBUTE, result.to_dict())
        return result

    @staticmethod
    def _not_measured(watch: Watch, empty: bool) -> Optional[Mapping[str, str]]:
        """Why each count the test's result has no figure for is none, by key: no count, rather
        than a 0 that reads as measured (syncs without CUDA, compile time in a test before the
        first that budgets it)."""
        if watch.problem is not None:  # torch kept the plugin from watching a report's test
            return {kind.key: watch.problem for kind in COUNTED_KINDS}
        plan = watch.plan
        if empty and not watch.budget.has_floor:
            # Nothing recorded: listed only in a JSON report, whose runs read every kind; its
            # junit properties show only the kinds it budgets, which it reads. Those this
            # machine cannot measure (syncs without CUDA) are said.
            if plan is None or not plan.unmeasured_shown:
                return None
            return not_measured(plan.unmeasured_shown)
        # Here: a run whose tests never compile never loads it.
        from .measured import counts_not_measured, kinds_not_read

        # None: the call never began (its setup failed).
        reading = watch.reading or (wanted_signals.wanted_signals(), watch.attached)
        return counts_not_measured(kinds_not_read(*reading)) or None

    def _plan_watch(self, item: pytest.Item) -> Optional[Watch]:
        key = plan_key(item)
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            planned = plan_test(item, self.settings)
            if isinstance(planned, str):
                return Watch(self.settings.default_budget, None, usage_error=planned)
            if planned.health_signals:
                wanted_signals.want(planned.health_signals)
            if key is not None:
                self._plans[key] = planned
            plan = planned
        if plan.watched or uses_a_nocompile_fixture(item):
            return Watch(plan.budget, RecompileRecord(), plan=plan)
        return None


def _judged(watch: Watch) -> bool:
    """Whether a budget or a contract judges the test (else it is watched for a report alone)."""
    return watch.budget.budgeted or (watch.plan is not None and bool(watch.plan.contracts))


def _attached_early(record: RecompileRecord) -> bool:
    """Whether the record hears the sources that need no dynamo (syncs) before dynamo arrives."""
    capture = loaded_capture()
    return capture is not None and capture.attached(record)


def _settle(record: RecompileRecord) -> None:
    """Before a phase's count is fixed: what the armed sources report late (the syncs torch warns
    of outside Python, read from stderr) all reached the record (nearly every test has no such
    source armed: nothing to wait for)."""
    capture = loaded_capture()
    if capture is not None and capture.settling:
        capture.settle(record)


# Where _dynamo_state finds the module once loaded: an import statement in a function runs
# importlib's _handle_fromlist (Python code) on every call, and it is asked at every test's setup.
_DYNAMO_STATE = __package__.rpartition(".")[0] + ".observe.dynamo_state"


def _dynamo_state() -> ModuleType:
    """dynamo's state as the plugin reads and resets it (:mod:`..observe.dynamo_state`), loaded once
    torch is there."""
    loaded = sys.modules.get(_DYNAMO_STATE)
    if loaded is not None:
        return loaded
    from ..observe import dynamo_state

    return dynamo_state


def _metrics_mark() -> object:
    """Where torch's compilation metrics stand as a call begins (a compile's second witness); None
    before dynamo came: every entry found later is the call's. Its module loads with dynamo."""
    if arrival.DYNAMO not in sys.modules:
        return None
    from ..observe.metrics_entries import metrics_mark

    return metrics_mark()
