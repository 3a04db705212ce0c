"""Planning: which tests a run watches, with what budget and contracts (worked out once for the
tests that share it).

A test's plan comes from the closest budget marker of each kind (test,
class, module) over the run's defaults (options, ini keys), and the closest
marker of each contract (read by the contracts feature). Tests of one class or module
whose own markers say the same share one plan, so a test's setup looks its
plan up instead of reading every marker again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Hashable, Iterable, Iterator, Mapping, Optional, Sequence

import pytest

from ..judge.budget import (
    BudgetUsageError,
    MarkerBudget,
    RecompileBudget,
    budget_from_marker,
    with_markers,
)
from ..vocabulary.kinds import (
    CONTRACT_MARKERS,
    KINDS,
    KINDS_BY_MARKER,
    LOG_KINDS,
    LOGS_NOT_READ,
    RECOMPILES,
    BudgetKind,
    ContractUsageError,
)

if TYPE_CHECKING:
    from ..judge.budget import KeywordReader
    from ..judge.result import TestResult
    from ..judge.verdict import Contract
    from .settings import RunSettings

# The markers that make a test watched: every budget kind's and every contract's.
def watching_markers(kinds: Sequence[BudgetKind]) -> frozenset[str]:
    return frozenset({*(kind.marker for kind in kinds), *CONTRACT_MARKERS})
# The fixtures that read a test's record (.fixtures): a test that requests one is watched.
def _fixture_names(kinds: Sequence[BudgetKind]) -> frozenset[str]:
    return frozenset({"nocompile_recompiles", *(kind.assertion for kind in kinds)})


def uses_a_nocompile_fixture(item: pytest.Item) -> bool:
    return not KINDS.derived(_fixture_names).isdisjoint(getattr(item, "fixturenames", ()))


def any_asks_to_be_watched(items: Sequence[pytest.Item]) -> bool:
    """Whether a test has a budget marker or a nocompile fixture (whatever its arguments say)."""
    for node in each_node_once(items):
        if node.own_markers and _has_a_budget_marker(node):
            return True
        if isinstance(node, pytest.Item) and uses_a_nocompile_fixture(node):
            return True
    return False


def each_node_once(items: Iterable[pytest.Item]) -> Iterator[pytest.Item | pytest.Collector]:
    """Every test, and each of its classes, modules and packages once, to read their own markers.

    ``item.iter_markers()`` reads every parent again for every test; here each
    parent is read once, and a test whose parent is the previous test's (most
    tests) costs a few attribute reads.
    """
    seen: set[int] = set()  # ids of the parents yielded
    previous_parent = None
    for item in items:
        yield item
        node = item.parent
        if node is previous_parent:
            continue
        previous_parent = node
        while node is not None and id(node) not in seen:
            seen.add(id(node))
            yield node
            node = node.parent


# The session's marked nodes, with the list of tests they were found in and its length then.
_Nodes = list["pytest.Item | pytest.Collector"]
_MARKED_NODES = pytest.StashKey[tuple[list[pytest.Item], int, _Nodes]]()


def marked_nodes(items: list[pytest.Item]) -> list[pytest.Item | pytest.Collector]:
    """The collected tests (``session.items``), with their classes, modules and packages, that
    carry markers of their own, each once (nearly always none): found in one pass for every
    feature that looks for a marker, again only where the tests changed."""
    if not items:
        return []
    stash = items[0].session.stash
    found = stash.get(_MARKED_NODES, None)
    if found is None or found[0] is not items or found[1] != len(items):
        found = stash[_MARKED_NODES] = (
            items, len(items), [node for node in each_node_once(items) if node.own_markers])
    return found[2]


def _has_a_budget_marker(node: pytest.Item | pytest.Collector) -> bool:
    watching = KINDS.derived(watching_markers)
    return any(marker.name in watching for marker in node.own_markers)


_MARKER_KEYWORDS = pytest.StashKey["Mapping[str, KeywordReader]"]()


def marker_keywords(config: pytest.Config) -> Mapping[str, KeywordReader]:
    """The keywords the features add to every budget marker (``pytest_nocompile_marker_keywords``),
    by name: asked once a run, when the first marker is read (a name two features add: the
    answer pluggy gives first)."""
    found = config.stash.get(_MARKER_KEYWORDS, None)
    if found is None:
        found = {}
        for answer in config.hook.pytest_nocompile_marker_keywords():
            for name, reader in answer.items():
                found.setdefault(name, reader)
        config.stash[_MARKER_KEYWORDS] = found
    return found


def plan_test(item: pytest.Item, settings: RunSettings) -> Plan | str:
    """The test's budget and contracts and whether the run watches it, or why its marker is
    unusable."""
    closest: dict[str, tuple[pytest.Mark, str]] = {}
    watching = KINDS.derived(watching_markers)
    # one pass, closest first; most tests have no marker at all
    for node, marker in item.iter_markers_with_node():
        if marker.name in watching and marker.name not in closest:
            closest[marker.name] = (marker, _marked_on(node, item))
    contracts: list[Contract] = []
    for name in CONTRACT_MARKERS:
        if name in closest:
            marker, where = closest.pop(name)
            try:
                contract = item.config.hook.pytest_nocompile_read_contract(
                    name=name, args=marker.args, kwargs=marker.kwargs, marked_on=where)
            except ContractUsageError as error:
                return f"invalid {name} marker on {item.nodeid}: {error}"
            if contract is not None:  # None: no feature reads it (one blocked with -p no:)
                contracts.append(contract)
    budget, watched = settings.default_budget, settings.watch_by_default
    if closest:
        # here: only a budget marker is checked against the installed torch
        from ..judge.torch_support import installed_torch_lacks

        read: dict[str, MarkerBudget] = {}
        marked_on: dict[str, str] = {}
        for name, (marker, where) in closest.items():
            kind = KINDS_BY_MARKER[name]
            try:
                read[kind.key] = budget_from_marker(marker.args, marker.kwargs, kind,
                                                    marker_keywords(item.config))
            except BudgetUsageError as error:
                return f"invalid {name} marker on {item.nodeid}: {error}"
            lacking = installed_torch_lacks(kind) if read[kind.key].count is not None else None
            if lacking is not None:
                return f"unusable {name} marker on {item.nodeid}: {lacking}"
            note = read[kind.key].note
            marked_on[kind.key] = where if note is None else f"{where}, {note}"
        budget = with_markers(budget, read, marked_on)
        watched = budget.budgeted or settings.watch_every_test
    return Plan(budget, watched or bool(contracts), settings, tuple(contracts))


class Plan:
    """How a test is watched, worked out once for the tests that share it (see :func:`plan_key`)."""

    __slots__ = ("budget", "watched", "strict", "isolate", "idle", "health_signals",
                 "_may_go_unmeasured", "_unmeasured_shown", "contracts")

    def __init__(self, budget: RecompileBudget, watched: bool, settings: RunSettings,
                 contracts: tuple[Contract, ...] = ()) -> None:
        self.budget = budget
        self.watched = watched
        self.contracts = contracts  # judged with the budgets when the call ends
        # Whether the call raises at a recompile: a recompile budget, and strict by marker or
        # option.
        self.strict = budget.allowed(RECOMPILES) is not None and (
            budget.strict if budget.strict is not None else settings.strict_by_default)
        self.isolate = budget.isolate if budget.isolate is not None else settings.isolate_by_default
        # the result of its tests that recorded nothing
        self.idle: Optional[tuple[TestResult, list[tuple[str, object]]]] = None
        # The health signals its budgets read: the capture's sources must report them
        # (observe.wanted_signals.want).
        self.health_signals = frozenset(signal for kind in KINDS if budget.allowed(kind) is not None
                                        for signal in kind.health_signals)
        # Each as (without the core's kinds, with them): see the properties.
        budgeted = tuple(kind for kind in KINDS.derived(measured_where_possible)
                         if budget.allowed(kind) is not None)
        self._may_go_unmeasured = (_without_log_kinds(budgeted), budgeted)
        shown = tuple(kind for kind in KINDS.derived(_unmeasured_shown_without_compiles)
                      if settings.watch_every_test or budget.allowed(kind) is not None)
        self._unmeasured_shown = (_without_log_kinds(shown), shown)

    # Properties, asked at every watched test: the core's kinds only where this process could not
    # switch on one of dynamo's logs (nearly never, and asking them costs each test some calls).
    @property
    def may_go_unmeasured(self) -> tuple[BudgetKind, ...]:
        """Its budgets that some machines cannot check (compile time, instructions, syncs without
        CUDA; a core kind whose log torch would not let the capture read): said once per run."""
        return self._may_go_unmeasured[1 if LOGS_NOT_READ else 0]

    @property
    def unmeasured_shown(self) -> tuple[BudgetKind, ...]:
        """The kinds its result says were not measured though it compiled nothing, where so: those
        it budgets, or every one in a run that reports all."""
        return self._unmeasured_shown[1 if LOGS_NOT_READ else 0]


def _without_log_kinds(kinds: tuple[BudgetKind, ...]) -> tuple[BudgetKind, ...]:
    return tuple(kind for kind in kinds if kind not in LOG_KINDS)


def measured_where_possible(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    """The kinds some machines or torch versions cannot measure: a result then gives no count."""
    return tuple(kind for kind in kinds if kind.why_not_measured)


def _unmeasured_shown_without_compiles(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    return tuple(kind for kind in measured_where_possible(kinds)
                 if kind.unmeasured_shown_without_compiles)


def plan_key(item: pytest.Item) -> Optional[Hashable]:
    """What a test's plan depends on besides its parent's markers: its own budget markers'
    arguments (None: not shareable).

    Tests of one class or module whose own budget markers say the same (a
    parametrized test's cases, tests each marked ``max_recompiles(0)``) share
    a plan. Each argument's type is part of the key: ``max_recompiles(False)``
    is a usage error that ``max_recompiles(0)``'s plan must not hide. A
    keyword's dict (``torch=``) is keyed by its entries in order (the first
    match wins), each value's type with it.
    """
    parent = id(item.parent)
    if not item.own_markers:
        return parent
    watching = KINDS.derived(watching_markers)
    markers = tuple((marker.name, tuple((type(arg), arg) for arg in marker.args),
                     tuple((name, type(value),
                            _entries_key(value) if isinstance(value, dict) else value)
                           for name, value in marker.kwargs.items()))
                    for marker in item.own_markers if marker.name in watching)
    if not markers:
        return parent
    key = (parent, markers)
    try:
        hash(key)
    # an unhashable argument (a list): planned each time, and said to be unusable
    except TypeError:
        return None
    return key


def _entries_key(entries: dict[object, object]) -> tuple[tuple[type, object, type, object], ...]:
    return tuple((type(key), key, type(value), value) for key, value in entries.items())


def _marked_on(node: object, item: pytest.Item) -> str:
    """Where a budget marker was found, as a failure names it: the reader looks for the decorator
    there."""
    if node is item:
        return "marker on the test"
    if isinstance(node, pytest.Class):
        return f"marker on class {node.name}"
    if isinstance(node, pytest.Module):
        return f"marker on module {node.nodeid}"  # pytestmark, or a conftest's add_marker
    # a package's, or another collector's
    return f"marker on {type(node).__name__.lower()} {getattr(node, 'nodeid', '')}"
