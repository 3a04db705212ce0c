"""pytest hooks, options, markers and fixtures of pytest-nocompile.

The only module that talks to pytest. torch is imported lazily, and only for
tests that are watched: tests with a ``max_recompiles`` marker or a nocompile
fixture. Every other test runs with no work from this plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Generator, Optional

import pytest

from . import capture
from .assertions import AssertMaxRecompiles, block_assertion
from .budget import MARKER_HELP, MARKER_NAME, BudgetUsageError, RecompileBudget, budget_from_marker
from .record import RecompileLog, RecompileRecord
from .report import SECTION_TITLE, budget_headline, format_failure, format_section

FIXTURE_NAMES = ("nocompile_recompiles", "nocompile_assert_max_recompiles")


@dataclass
class _Watch:
    """A watched test's plan: its record, or why its marker is unusable."""

    record: RecompileRecord
    usage_error: Optional[BudgetUsageError] = None
    budget_failed: bool = False


WATCH_KEY = pytest.StashKey[_Watch]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nocompile", "torch.compile recompile budgets (pytest-nocompile)")
    group.addoption(
        "--nocompile-no-isolate",
        action="store_true",
        default=None,
        help="do not call torch._dynamo.reset() before each watched test; "
        "counts then depend on which tests ran before (ini: nocompile_isolate)",
    )
    parser.addini(
        "nocompile_isolate",
        type="bool",
        default=True,
        help="reset dynamo's caches before each watched test (default: true) [pytest-nocompile]",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    config.pluginmanager.register(NocompileSession(config), "nocompile-session")


def pytest_report_header(config: pytest.Config) -> str:
    return f"nocompile: pytest-nocompile {_distribution_version('pytest-nocompile')}, torch {_distribution_version('torch')}"


def _distribution_version(name: str) -> str:
    # Metadata, not an import: the header must not pay for importing torch.
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


class NocompileSession:
    """Per-run state: which test is being recorded and how isolation is set."""

    def __init__(self, config: pytest.Config) -> None:
        self.isolate_by_default = not config.getoption("nocompile_no_isolate") and config.getini("nocompile_isolate")
        self._capture: capture.RecompileCapture | None = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
        watch = _plan_watch(item)
        if watch is not None:
            item.stash[WATCH_KEY] = watch
        try:
            return (yield)
        finally:
            self._stop_capture()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        watch = item.stash.get(WATCH_KEY, None)
        if watch is not None:
            self._begin(item, watch)
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        watch = item.stash.get(WATCH_KEY, None)
        if watch is None:
            return (yield)
        watch.record.phase = "call"
        try:
            result = yield
        finally:
            watch.record.phase = "teardown"
        if watch.record.exceeds_budget():
            watch.budget_failed = True
            pytest.fail(_budget_failure(watch.record), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        watch = item.stash.get(WATCH_KEY, None)
        if watch is not None and not watch.budget_failed:
            _add_section(report, watch.record, call.when)
        return report

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._stop_capture()

    def _begin(self, item: pytest.Item, watch: _Watch) -> None:
        if watch.usage_error is not None:
            pytest.fail(f"invalid {MARKER_NAME} marker on {item.nodeid}: {watch.usage_error}", pytrace=False)
        problem = capture.torch_problem()
        if problem is not None:
            pytest.fail(f"pytest-nocompile cannot watch {item.nodeid}: {problem}", pytrace=False)
        budget = watch.record.budget
        isolate = budget.isolate if budget is not None and budget.isolate is not None else self.isolate_by_default
        if isolate:
            capture.reset_dynamo()
        self._capture = capture.RecompileCapture(watch.record.add_recompile, watch.record.add_limit_warning)
        self._capture.start()

    def _stop_capture(self) -> None:
        if self._capture is not None:
            self._capture.stop()
            self._capture = None


def _plan_watch(item: pytest.Item) -> _Watch | None:
    marker = item.get_closest_marker(MARKER_NAME)
    uses_fixture = any(name in getattr(item, "fixturenames", ()) for name in FIXTURE_NAMES)
    if marker is None and not uses_fixture:
        return None
    if marker is None:
        return _Watch(RecompileRecord(None))
    try:
        return _Watch(RecompileRecord(budget_from_marker(marker.args, marker.kwargs)))
    except BudgetUsageError as error:
        return _Watch(RecompileRecord(None), usage_error=error)


def _budget_failure(record: RecompileRecord) -> str:
    budget: RecompileBudget = record.budget  # type: ignore[assignment]  # exceeds_budget() checked it
    counted = record.in_phase("call")
    headline = budget_headline(len(counted), budget.max_recompiles, budget.describe())
    limit_hits = [hit for hit in record.limit_hits if hit.phase == "call"]
    return format_failure(headline, counted, limit_hits, record.in_phase("setup"))


def _add_section(report: pytest.TestReport, record: RecompileRecord, when: str) -> None:
    """Show recompiles beside a test's own failure, or those of setup/teardown."""
    if when == "call":
        events = [event for event in record.events if event.phase != "teardown"]
        if report.failed and (events or record.limit_hits):
            report.sections.append((SECTION_TITLE, format_section(events, record.limit_hits)))
    else:
        events = record.in_phase(when)  # type: ignore[arg-type]
        if events:
            report.sections.append((f"{SECTION_TITLE} ({when}, not counted)", format_section(events)))


@pytest.fixture
def nocompile_recompiles(request: pytest.FixtureRequest) -> RecompileLog:
    """The dynamo recompiles recorded so far in this test, as a live sequence of RecompileEvent."""
    return _record_of(request).log


@pytest.fixture
def nocompile_assert_max_recompiles(request: pytest.FixtureRequest) -> AssertMaxRecompiles:
    """``with nocompile_assert_max_recompiles(N, exact=False): ...`` fails when the block recompiles more than N times."""
    return block_assertion(_record_of(request))


def _record_of(request: pytest.FixtureRequest) -> RecompileRecord:
    watch = request.node.stash.get(WATCH_KEY, None)
    if watch is None:
        pytest.fail(f"pytest-nocompile fixtures work in test functions only (requested by {request.node.nodeid})", pytrace=False)
    return watch.record

