"""One watched test's watch, and which watches are open: what the fixtures and block assertions
read.

A watch opens at the test's setup and closes after its teardown. It holds
the test's record, the one sink every source writes to: dynamo's logs in
this process (attached once dynamo is there, at setup or when it arrives)
and the files its child processes write. Nothing here registers a hook.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

import pytest

from ..vocabulary.kinds import resolve, why_not_measured

if TYPE_CHECKING:
    from ..judge.budget import RecompileBudget
    from ..observe.capture import DynamoLogs
    from ..record.process_events import ProcessEvents
    from ..record.record import RecompileRecord
    from ..record.snapshot import ProcessSnapshot
    from ..vocabulary.kinds import BudgetKind
    from .planning import Plan

# The run's open watches by node id, in its config's stash: the fixtures find their test's there.
WATCHES_KEY = pytest.StashKey["dict[str, Watch]"]()
# The kinds this process's run has said it cannot measure (a marker's or a block assertion's
# budget): each said once.
_SAID_NOT_MEASURED: set[str] = set()
# Those said as a line of the run's terminal summary (.run_notices), by kind key: where
# warnings are errors (-W error, filterwarnings = error), a warning would fail the user's
# test for a fact about the machine, not the test.
_SAID_IN_SUMMARY: dict[str, str] = {}


class CaptureLostWarning(pytest.PytestWarning):
    """pytest-nocompile could no longer see recompiles: something switched its capture off."""


class NotMeasuredWarning(pytest.PytestWarning):
    """A budget could not be checked here: what it counts was not measured (syncs without CUDA; a
    torch that moved what it reads)."""


class CompileTimeWarning(NotMeasuredWarning):
    """A compile-time or compile-instruction budget could not be checked here (no perf events; a
    torch that moved its metrics)."""


class Watch:
    """A watched test: its budget and record from setup on, or why its marker is unusable."""

    __slots__ = ("budget", "record", "usage_error", "plan", "over", "found", "broken", "problem",
                 "attached", "closed", "nodeid", "item", "reading", "metrics_mark",
                 "feature_state")

    def __init__(self, budget: RecompileBudget, record: Optional[RecompileRecord],
                 usage_error: Optional[str] = None, plan: Optional[Plan] = None) -> None:
        self.budget = budget
        self.record = record  # None only with a usage error
        self.usage_error = usage_error
        self.plan = plan  # how the run watches it (None only with a usage error)
        # the kinds over budget, judged when the call ended
        self.over: Optional[tuple[str, ...]] = None
        # the processes over budget, with the keys of each one's kinds over, judged then too
        self.found: Optional[list[tuple[ProcessSnapshot, tuple[str, ...]]]] = None
        # the contracts broken (name, failure), judged then too
        self.broken: Optional[list[tuple[str, str]]] = None
        self.problem: Optional[str] = None  # why capture could not start when dynamo arrived
        self.attached = False  # dynamo's logs in this process reach the record
        self.closed = False
        self.nodeid = ""  # the test's, once opened
        self.item: Optional[pytest.Item] = None  # the test, once opened
        # When its call began: the health signals wanted, and whether its record heard the
        # sources that need no dynamo.
        self.reading: Optional[tuple[frozenset[str], bool]] = None
        # where torch's compilation metrics stood when its call began (a compile's second witness)
        self.metrics_mark: object = None
        # Each feature's own state for this test, under the feature's name
        # (pytest_nocompile.hookspecs).
        self.feature_state: dict[str, Any] = {}


def not_measured(kinds: Sequence[BudgetKind]) -> Mapping[str, str]:
    """Why each of ``kinds`` could not be measured here, by key (only those that could not)."""
    return {kind.key: why for kind in kinds if (why := why_not_measured(kind)) is not None}


def said_not_measured_this_run() -> set[str]:
    """A run begins: nothing said yet. The keys of the kinds said (by markers and block assertions
    alike), added to."""
    _SAID_NOT_MEASURED.clear()
    _SAID_IN_SUMMARY.clear()
    return _SAID_NOT_MEASURED


def said_in_summary() -> dict[str, str]:
    """The not-measured notices this process's run says in its terminal summary, by kind key
    (added to: an xdist controller adds its workers')."""
    return _SAID_IN_SUMMARY


def say_if_not_measured(item: pytest.Item, budget: RecompileBudget, kinds: Sequence[BudgetKind],
                        said: set[str]) -> None:
    """Warn that the test's budgets of ``kinds`` cannot be checked here, where so (its other budgets
    still judge it), each kind once per run (``said``: the keys said so far, added to). Asked of a
    test whose plan has such a budget (``Plan.may_go_unmeasured``)."""
    for kind in kinds:
        if kind.key in said or (why := why_not_measured(kind)) is None:
            continue
        said.add(kind.key)
        warning = _not_measured_warning(kind, f"{item.nodeid}: {budget.describe(kind)}", why)
        path, line = _marker_location(item, kind.marker)
        try:
            warnings.warn_explicit(warning, None, path, line)  # item.warn's, at the marker's line
        except NotMeasuredWarning:
            _say_in_summary_unless_asked_to_fail(kind, warning)


def say_if_block_not_measured(kind: BudgetKind, described: str) -> None:
    """A block assertion's :func:`say_if_not_measured`: warn, once per run (with the markers'
    kinds), that the block's budget (``described``, e.g. ``assert_max_syncs(0)``) cannot be checked
    here, where so."""
    why = why_not_measured(kind)
    if why is None or kind.key in _SAID_NOT_MEASURED:
        return
    _SAID_NOT_MEASURED.add(kind.key)
    where = f"{_OPEN[-1].nodeid}: " if _OPEN else ""  # the watched test it is in, if any
    warning = _not_measured_warning(kind, where + described, why)
    try:
        warnings.warn(warning, stacklevel=3)  # the user's with-block
    except NotMeasuredWarning:
        _say_in_summary_unless_asked_to_fail(kind, warning)


def _say_in_summary_unless_asked_to_fail(kind: BudgetKind, warning: NotMeasuredWarning) -> None:
    """An error filter raised ``warning``: a blanket one (``-W error``, ``filterwarnings = error``)
    fails no test for a fact about the machine, and the run's summary says it instead; one that
    names this plugin's warning (``-W error::pytest_nocompile.NotMeasuredWarning``) is the user
    asking for the failure, and gets it."""
    if _error_filter_names_its_category(warning):  # its text alone: no traceback into the plugin
        pytest.fail(f"{type(warning).__name__}: {warning}", pytrace=False)
    _SAID_IN_SUMMARY[kind.key] = f"{warning} (here: this run makes warnings errors)"


def _error_filter_names_its_category(warning: Warning) -> bool:
    """Whether the filter that turned ``warning`` into an error is one for this plugin's
    warnings, not for every warning: the first filter whose category and message match it, as
    :mod:`warnings` reads them (its module and line are not compared)."""
    for action, message, category, _module, _line in warnings.filters:
        if not isinstance(warning, category):
            continue
        if message is not None and not message.match(str(warning)):
            continue
        ours = isinstance(category, type) and issubclass(category, NotMeasuredWarning)
        return action == "error" and ours
    return False


def _marker_location(item: pytest.Item, marker: str) -> tuple[str, int]:
    """Where a warning on a test's budget points (pytest's warnings summary shows that line):
    the test's decorator that asked for it, else the test's def line (a class's or module's
    marker, a ``pytest.param``'s). pytest's own ``item.warn`` points at the test's first line,
    its first decorator, whichever it is."""
    path, first, _ = item.location
    line = (first or 0) + 1
    function = getattr(item, "function", None)
    try:
        source, line = inspect.getsourcelines(function)  # type: ignore[arg-type]  # None: TypeError
    except (TypeError, OSError):  # not a Python function, or no source: its first line
        return path, line
    on_the_test = next(item.iter_markers_with_node(marker), (None,))[0] is item
    for offset, text in enumerate(source):
        if on_the_test and f".{marker}(" in text:
            return path, line + offset
        if text.lstrip().startswith(("def ", "async def ")):
            return path, line + offset
    return path, line


def _not_measured_warning(kind: BudgetKind, budget: str, why: str) -> NotMeasuredWarning:
    category = (resolve(kind.not_measured_warning) if kind.not_measured_warning
                else NotMeasuredWarning)
    return category(f"{budget} is not checked: {why}. Tests are judged on their other "
                    f"budgets{kind.not_measured_advice}; said once per run")


# Every open watch in this process, latest last (pytester runs nest).
_OPEN: list[Watch] = []


def opened(watch: Watch) -> None:
    _OPEN.append(watch)


def closed(watch: Watch) -> None:
    watch.closed = True
    if watch in _OPEN:
        _OPEN.remove(watch)


# This process's capture (..observe.capture), loaded only once dynamo arrived or a source that
# needs none was read: nearly every test of a run that never compiles has nothing to settle.
CAPTURE = __package__.rpartition(".")[0] + ".observe.capture"


def loaded_capture() -> Optional[DynamoLogs]:
    """This process's capture, if something loaded it (dynamo arrived, or a source that needs none
    was read); else None: nothing can be attached."""
    module = sys.modules.get(CAPTURE)
    return None if module is None else module.DYNAMO_LOGS


def recording_now() -> Optional[RecompileRecord]:
    """The record of the test a run in this process is watching now, or None."""
    return _OPEN[-1].record if _OPEN else None


def watch_of(config: pytest.Config, nodeid: str) -> Optional[Watch]:
    """The open watch of a test now running, or None."""
    return config.stash.get(WATCHES_KEY, {}).get(nodeid)


def end_warnings(record: RecompileRecord, nodeid: str) -> list[pytest.PytestWarning]:
    """The warnings a test ends with: its processes' report problems, and each compile error dynamo
    swallowed (and, once per run, a log of torch's that a second witness found short)."""
    if record.empty():
        return []
    say_unlogged_once(record, nodeid)
    if not record.any_health():  # a swallowed compile error is a health event: none was swallowed
        return [*record.child_warnings()]
    from .swallowed import swallowed_error_warnings

    return [*record.child_warnings(), *swallowed_error_warnings(record)]


def say_unlogged_once(record: RecompileRecord, nodeid: str) -> None:
    """Say once per run, in its summary, that this torch logged no record of a compile, a recompile
    or a graph break that its second witness (compilation metrics, a compile id, a resume
    function) showed: a log it writes where the plugin does not read it, or no more."""
    for process in record.processes():
        if process.compiles and "compiles.unlogged" not in _SAID_IN_SUMMARY:
            graph = next((event for event in process.compiles if event.witness), None)
            code = None if graph is None else graph.compiling
            if graph is not None and code is not None:
                from ..vocabulary.events import code_place

                _say_unlogged("compiles", f"a graph of "
                              f"{code_place(code.function, code.filename, code.line)} that its "
                              f"compilation metrics entry {graph.compile_id}", nodeid)
        if process.recompiles and "recompiles.unlogged" not in _SAID_IN_SUMMARY:
            recompile = next((event for event in process.recompiles if event.witness), None)
            if recompile is not None:
                _say_unlogged("recompiles", f"a recompile of {recompile.code_place} that its "
                              f"compile id {recompile.compile_id}", nodeid)
        if process.graph_breaks and "graph_breaks.unlogged" not in _SAID_IN_SUMMARY:
            graph_break = next((event for event in process.graph_breaks if event.witness), None)
            if graph_break is not None:
                _say_unlogged("graph_breaks", f"a graph break at {graph_break.place} that the "
                              "function compiled to resume after it", nodeid)
        if process.health:
            _say_metrics_witnessed(process, nodeid)


def _say_metrics_witnessed(process: ProcessEvents, nodeid: str) -> None:
    """:func:`say_unlogged_once` for the kinds whose compilation-metrics witness made a count of
    ``process`` a lower bound (its event's reason says what the signals did not count)."""
    from ..record.record import kinds_with_metrics_witness

    for kind in kinds_with_metrics_witness():
        if f"{kind.key}.unlogged" in _SAID_IN_SUMMARY:
            continue
        said = process.signals((kind.lower_bound_signal,), None)
        if said:
            say_witnessed_once(kind.key, f"did not count what its compilation metrics did: "
                               f"{said[0].reason}", nodeid)


def _say_unlogged(key: str, what: str, nodeid: str) -> None:
    say_witnessed_once(key, f"logged no record of {what} showed", nodeid)


def say_witnessed_once(key: str, torch_missed: str, nodeid: str) -> None:
    """Say once per run, in its summary, that this torch did not tell of what a second witness
    showed in ``nodeid`` (``torch_missed``: "logged no record of a recompile of f (x.py:3) that its
    compile id 0/1 showed"), so that counts of the kind ``key`` read >= where so."""
    from ..judge.installed_versions import distribution_version

    _SAID_IN_SUMMARY.setdefault(f"{key}.unlogged", (
        f"torch {distribution_version('torch')} {torch_missed} (in {nodeid}): "
        f"counts of {key.replace('_', ' ')} read >= where so; run "
        "`python -m pytest_nocompile doctor`"))


def warn_if_compiled_unwatched(item: pytest.Item) -> None:
    """Warn when dynamo arrived unseen by the import hook and compiled: capture could not start
    before that."""
    from ..observe import dynamo_state

    if dynamo_state.compiled_anything():
        item.warn(CaptureLostWarning(
            f"torch._dynamo was first imported inside {item.nodeid} past pytest-nocompile's "
            "import hook, so its compiles were not watched; import torch._dynamo at module level "
            "(or in a conftest) to watch it"
        ))
