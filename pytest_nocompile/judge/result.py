"""A test's result: its counts and budgets, and the verdict on them (:mod:`.verdict`
decides it once), as typed data.

The summary table, the JSON report, junit properties and the baseline all
read :class:`TestResult`; xdist carries :meth:`TestResult.to_dict` from a
worker to the controller, which reads it back with :meth:`TestResult.from_dict`.

Light at import: a suite that never compiles gets its results from here too.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ..vocabulary.kinds import COUNTED_KINDS, KINDS, KINDS_BY_KEY, USER_ONLY, BudgetKind
from ..vocabulary.measures import Amount
from .budget import RecompileBudget


class Verdict(enum.Enum):
    """How a test stands against its budgets; the value is what reports print."""

    NO_BUDGET = "no budget"
    WITHIN = "within budget"
    OVER = "over budget"
    # within its budgets (or without any), but it broke a contract (dynamic_dims, same_across_ranks)
    BROKEN = "broken contract"


MEASURED: Mapping[str, str] = {}  # shared, never changed: every kind measured

# on teardown reports: a result's to_dict(), JSON-able, so xdist carries it
RESULT_ATTRIBUTE = "nocompile_entry"

# The event lists a result carries, as JSON keys.
DETAIL_KEYS = ("recompile_events", "recompile_limit_hits", "graph_break_events", "health_events")
# shared, never changed
NO_DETAILS: dict[str, list[dict[str, Any]]] = {key: [] for key in DETAIL_KEYS}


@dataclass  # not frozen: a frozen dataclass's __init__ costs every watched test microseconds
class TestResult:
    """One test's counts (of the call phase) and budgets, by kind key, and the verdict on
    them; read-only by convention.

    ``counts`` holds the kinds with a count of their own (a floor's count is its counted kind's).

    ``over`` names the kinds over budget, ``broken`` the contracts the test
    broke (their markers' names), ``cause`` the first thing that failed the
    test (the first line of its first failure), and ``details`` holds the
    recorded events as JSON-able lists (every phase, each with its phase and
    process). When child processes reported, ``counts`` are the worst
    process's, kind by kind, and ``processes`` breaks them down: one dict per
    process (``pid``, ``rank``, ``command`` when it said, ``test_process`` and
    each kind's count), the test's own first. ``shown`` holds, for a health
    kind with shown signals (compile time's breakdown), their call-phase totals
    over the test's processes, by kind key. ``trace`` is the folder the test's
    structured trace was kept in (``--nocompile-trace-dir``, a failed test).
    ``unmeasured`` says, by kind key, why a kind could not be measured where
    the test ran (syncs without CUDA): its count is then no count (``null`` in
    JSON, ``n/a`` in the table), not 0. ``lower_bounds`` says, by kind key, why
    a count is a lower bound (syncs of torch's C++ code not seen): ``>=`` in
    the table, ``lower_bound`` in JSON. ``user_only``: the graph-break budget
    counts only the breaks outside torch (``user breaks<=N`` in the table,
    ``max_graph_breaks_user_only`` in JSON); ``counts`` are every break.
    """

    __test__ = False  # not a test class, whatever pytest collects

    counts: Mapping[str, Amount]  # ints, but seconds for a seconds kind
    budgets: dict[str, Optional[Amount]]
    verdict: Verdict
    over: tuple[str, ...] = ()
    cause: Optional[str] = None
    broken: tuple[str, ...] = ()
    details: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: NO_DETAILS)
    processes: tuple[dict[str, Any], ...] = ()
    shown: dict[str, dict[str, float]] = field(default_factory=dict)
    trace: Optional[str] = None
    unmeasured: Mapping[str, str] = field(default_factory=lambda: MEASURED)
    lower_bounds: Mapping[str, str] = field(default_factory=lambda: MEASURED)
    user_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: what the JSON report holds per test, and what xdist carries."""
        unmeasured = self.unmeasured
        return {
            **{kind.key: None if kind.key in unmeasured
               else kind.measure.for_json(self.counts.get(kind.key, 0))
               for kind in COUNTED_KINDS},
            # a result made before a kind existed lacks it
            **{kind.marker: self.budgets.get(kind.key) for kind in KINDS},
            "verdict": self.verdict.value,
            "over_budget": list(self.over),
            "broken_contracts": list(self.broken),
            "cause": self.cause,
            **self.details,
            "processes": list(self.processes),
            **{kind.shown_key: self.shown.get(kind.key, {}) for kind in KINDS.derived(_with_shown)},
            "trace": self.trace,
            **({"not_measured": dict(unmeasured)} if unmeasured else {}),
            **({"lower_bound": dict(self.lower_bounds)} if self.lower_bounds else {}),
            **{_user_only_key(kind): True for kind in self._counted_user_only()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestResult:
        return cls(
            # JSON keeps an int an int, and seconds a float; a kind not measured has null
            counts={kind.key: 0 if data[kind.key] is None else data[kind.key]
                    for kind in COUNTED_KINDS},
            budgets={kind.key: data[kind.marker] for kind in KINDS},
            verdict=Verdict(data["verdict"]),
            over=tuple(data["over_budget"]),
            cause=data["cause"],
            broken=tuple(data.get("broken_contracts", ())),
            details={key: list(data.get(key, ())) for key in DETAIL_KEYS},
            processes=tuple(data.get("processes", ())),
            shown={kind.key: dict(data[kind.shown_key]) for kind in KINDS.derived(_with_shown)
                   if data.get(kind.shown_key)},
            trace=data.get("trace"),
            unmeasured=dict(data.get("not_measured") or MEASURED),
            lower_bounds=dict(data.get("lower_bound") or MEASURED),
            user_only=any(data.get(_user_only_key(kind))
                          for kind in KINDS.derived(_with_user_only)),
        )

    def _counted_user_only(self) -> list[BudgetKind]:
        """The kinds the test budgets that count only the user's events (breaks outside torch)."""
        if not self.user_only:
            return []
        return [kind for kind in KINDS.derived(_with_user_only)
                if self.budgets.get(kind.key) is not None]

    @property
    def failed(self) -> bool:
        """Whether the plugin failed the test: over a budget, or a contract broken."""
        return self.verdict is Verdict.OVER or self.verdict is Verdict.BROKEN

    def budget_text(self) -> str:
        """The summary table's budget cell, e.g. ``recompiles<=0, breaks<=1``
        (``user breaks<=1``: only the user's graph breaks count)."""
        mine = self._counted_user_only()
        return ", ".join(("user " if kind in mine else "") + kind.budget_cell(allowed)
                         for kind in KINDS
                         if (allowed := self.budgets.get(kind.key)) is not None) or "-"


def _with_shown(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    return tuple(kind for kind in kinds if kind.shown_signals and kind.shown_key)


def _with_user_only(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    return tuple(kind for kind in kinds if USER_ONLY in kind.keywords)


def _user_only_key(kind: BudgetKind) -> str:
    """The JSON key saying a test's budget of this kind counts only the user's events,
    e.g. ``max_graph_breaks_user_only``."""
    return f"{kind.marker}_{USER_ONLY}"


def idle_result(budget: RecompileBudget,
                unmeasured: Optional[Mapping[str, str]] = None) -> TestResult:
    """The result of a test that ran before anything imported torch: nothing can have compiled."""
    if budget.has_floor:  # nothing compiled: a floor above 0 is missed
        missed = tuple(key for key, allowed in budget.limits
                       if KINDS_BY_KEY[key].is_floor and allowed > 0)
        if missed:
            kind = KINDS_BY_KEY[missed[0]]
            return TestResult(counts={kind.key: 0 for kind in COUNTED_KINDS},
                              budgets=budget.by_key(), verdict=Verdict.OVER,
                              over=missed, cause=kind.headline(0, budget.allowed(kind) or 0,
                                                               budget.describe(kind)))
    return TestResult(
        counts={kind.key: 0 for kind in COUNTED_KINDS},
        budgets=budget.by_key(),
        verdict=Verdict.WITHIN if budget.budgeted else Verdict.NO_BUDGET,
        unmeasured=unmeasured or MEASURED,
        user_only=budget.user_only,
    )


def shows(kind: BudgetKind, result: TestResult) -> bool:
    """Whether a test's junit properties and table row show this kind: the three counts always; a
    compile-health kind where the test budgets it or has some (compile time, which every compile
    has, only where budgeted)."""
    return (kind.events != "health" or result.budgets.get(kind.key) is not None
            or (bool(result.counts.get(kind.key, 0)) and not kind.shown_only_where_budgeted))


def count_properties(result: TestResult) -> list[tuple[str, object]]:
    """The counts as ``user_properties`` (and so junit XML ``<property>`` elements), and each
    process's when children reported."""
    kinds = [kind for kind in COUNTED_KINDS if shows(kind, result)]
    # no count: no property, rather than a 0
    kinds = [kind for kind in kinds if kind.key not in result.unmeasured]
    properties: list[tuple[str, object]] = [
        (f"nocompile_{kind.key}", kind.measure.for_json(result.counts[kind.key])) for kind in kinds]
    for process in result.processes:
        counts = " ".join(f"{kind.key}={process[kind.key]}" for kind in kinds)
        properties.append(("nocompile_process", f"{process_label(process)}: {counts}"))
    if result.broken:
        properties.append(("nocompile_broken_contracts", ", ".join(result.broken)))
    return properties


def process_label(process: dict[str, Any]) -> str:
    """A process of :attr:`TestResult.processes` as reports name it, e.g. ``rank 1 (pid 4242)``."""
    from ..vocabulary.events import ProcessInfo, process_label

    info = ProcessInfo(process["pid"], process.get("rank"), process.get("nth", 1),
                       process.get("command"))
    return process_label(None if process.get("test_process") else info, process["pid"])
