"""A test's result: its counts and budgets, the verdict computed once, as typed data.

The failure text, the summary table, the JSON report, junit properties, the
baseline and the block assertion all derive from :func:`over_budget` and
:class:`TestResult`; xdist carries :meth:`TestResult.to_dict` from a worker to
the controller, which reads it back with :meth:`TestResult.from_dict`.

Light at import: a suite that never compiles gets its results from here too.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional

from .budget import RecompileBudget
from .kinds import COUNTED_KINDS, KINDS, KINDS_BY_KEY, BudgetKind
from .measures import Amount

if TYPE_CHECKING:
    from .events import CodeLocation, GuardFailure, ProcessInfo, RecompileEvent
    from .module_names import CompiledModule
    from .record import RecompileRecord


class Verdict(enum.Enum):
    """How a test stands against its budgets; the value is what reports print."""

    NO_BUDGET = "no budget"
    WITHIN = "within budget"
    OVER = "over budget"


def over_budget(kind: BudgetKind, count: Amount, allowed: Optional[Amount], *, exact: bool = False, limit_hit: bool = False,
                compile_error: bool = False) -> bool:
    """The one rule: more than allowed (with ``exact``: other than allowed; for a floor: fewer), or a limit hit
    or a swallowed compile error where the kind says so."""
    if allowed is None:
        return False
    if compile_error and kind.compile_error_fails:
        return True
    if kind.is_floor:
        return count < allowed
    return count > allowed or (exact and count != allowed) or (limit_hit and kind.limit_hit_fails)


_MEASURED: Mapping[str, str] = {}  # shared, never changed: every kind measured

RESULT_ATTRIBUTE = "nocompile_entry"  # on teardown reports: a result's to_dict(), JSON-able, so xdist carries it

# The event lists a result carries, as JSON keys.
DETAIL_KEYS = ("recompile_events", "recompile_limit_hits", "graph_break_events", "health_events")
_NO_DETAILS: dict[str, list[dict[str, Any]]] = {key: [] for key in DETAIL_KEYS}  # shared, never changed


@dataclass  # not frozen: a frozen dataclass's __init__ costs every watched test microseconds
class TestResult:
    """One test's counts (of the call phase) and budgets, by kind key, and the verdict on them; read-only by convention.

    ``counts`` holds the kinds with a count of their own (a floor's count is its counted kind's).

    ``over`` names the kinds over budget, ``cause`` the first thing that put
    the test over, and ``details`` holds the recorded events as JSON-able
    lists (every phase, each with its phase and process). When child
    processes reported, ``counts`` are the worst process's, kind by kind, and
    ``processes`` breaks them down: one dict per process (``pid``, ``rank``, ``command`` when it said,
    ``test_process`` and each kind's count), the test's own first.
    ``shown`` holds, for a health kind with shown signals (compile time's
    breakdown), their call-phase totals over the test's processes, by kind key.
    ``trace`` is the folder the test's structured trace was kept in (``--nocompile-trace-dir``, a failed test).
    ``unmeasured`` says, by kind key, why a kind could not be measured where
    the test ran (syncs without CUDA): its count is then no count (``null``
    in JSON, ``n/a`` in the table), not 0.
    """

    __test__ = False  # not a test class, whatever pytest collects

    counts: Mapping[str, Amount]  # ints, but seconds for a seconds kind
    budgets: dict[str, Optional[Amount]]
    verdict: Verdict
    over: tuple[str, ...] = ()
    cause: Optional[str] = None
    details: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: _NO_DETAILS)
    processes: tuple[dict[str, Any], ...] = ()
    shown: dict[str, dict[str, float]] = field(default_factory=dict)
    trace: Optional[str] = None
    unmeasured: Mapping[str, str] = field(default_factory=lambda: _MEASURED)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: what the JSON report holds per test, and what xdist carries."""
        unmeasured = self.unmeasured
        return {
            **{kind.key: None if kind.key in unmeasured else kind.measure.for_json(self.counts.get(kind.key, 0)) for kind in COUNTED_KINDS},
            **{kind.marker: self.budgets.get(kind.key) for kind in KINDS},  # a result made before a kind existed lacks it
            "verdict": self.verdict.value,
            "over_budget": list(self.over),
            "cause": self.cause,
            **self.details,
            "processes": list(self.processes),
            **{_shown_key(kind): self.shown.get(kind.key, {}) for kind in _KINDS_WITH_SHOWN},
            "trace": self.trace,
            **({"not_measured": dict(unmeasured)} if unmeasured else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestResult:
        return cls(
            # JSON keeps an int an int, and seconds a float; a kind not measured has null
            counts={kind.key: 0 if data[kind.key] is None else data[kind.key] for kind in COUNTED_KINDS},
            budgets={kind.key: data[kind.marker] for kind in KINDS},
            verdict=Verdict(data["verdict"]),
            over=tuple(data["over_budget"]),
            cause=data["cause"],
            details={key: list(data.get(key, ())) for key in DETAIL_KEYS},
            processes=tuple(data.get("processes", ())),
            shown={kind.key: dict(data[_shown_key(kind)]) for kind in _KINDS_WITH_SHOWN if data.get(_shown_key(kind))},
            trace=data.get("trace"),
            unmeasured=dict(data.get("not_measured") or _MEASURED),
        )

    def budget_text(self) -> str:
        """The summary table's budget cell, e.g. ``recompiles<=0, breaks<=1``."""
        return ", ".join(kind.budget_cell(allowed) for kind in KINDS if (allowed := self.budgets.get(kind.key)) is not None) or "-"


def kinds_over_budget(record: RecompileRecord, counts: Optional[dict[str, Amount]] = None) -> tuple[str, ...]:
    """The keys of the kinds over the record's budget in any process's call phase, in table order."""
    limits = record.budget.limits  # budgeted kinds only, in table order
    if not limits:
        return ()
    if record.children:
        return _kinds_of(record, processes_over_budget(record))
    counts = record.counts() if counts is None else counts
    limit_hit = bool(record.call_limit_hits())
    over = tuple(key for key, allowed in limits
                 if not KINDS_BY_KEY[key].is_floor and over_budget(KINDS_BY_KEY[key], counts[key], allowed, limit_hit=limit_hit))
    return _with_floors(record, over)


def _with_floors(record: RecompileRecord, over: tuple[str, ...]) -> tuple[str, ...]:
    """``over`` and the floors the test missed, in table order (a floor is judged on the whole test: see .floors)."""
    if not record.budget.has_floor:
        return over
    from .floors import floors_missed

    missed = set(over) | set(floors_missed(record))
    return tuple(key for key, _ in record.budget.limits if key in missed)


def processes_over_budget(record: RecompileRecord) -> list[tuple[Optional[ProcessInfo], tuple[str, ...]]]:
    """Each process over budget (None: the test's own) with the keys of its kinds over, in table order.

    A budget applies to each process on its own: eight ranks that each
    recompile once are one recompile each, within ``max_recompiles(1)``.
    Floors (``min_compiles``) are judged on the whole test instead, not here.
    """
    found = []
    for process, counts in record.counts_by_process().items():
        limit_hit = bool(record.events_of(process, "call")[1])
        over = tuple(key for key, allowed in record.budget.limits
                     if not KINDS_BY_KEY[key].is_floor and over_budget(KINDS_BY_KEY[key], counts[key], allowed, limit_hit=limit_hit))
        if over:
            found.append((process, over))
    return found


def _kinds_of(record: RecompileRecord, found: list[tuple[Optional[ProcessInfo], tuple[str, ...]]]) -> tuple[str, ...]:
    """The kinds over budget in any of ``found``'s processes, in table order."""
    over = {key for _, keys in found for key in keys}
    return _with_floors(record, tuple(key for key, _ in record.budget.limits if key in over))


def judge(record: RecompileRecord, over: Optional[tuple[str, ...]] = None, unmeasured: Optional[Mapping[str, str]] = None) -> TestResult:
    """The verdict on a finished test's record, with everything the reports show (``over``: already judged;
    ``unmeasured``: why kinds could not be measured here, by key)."""
    budget = record.budget
    processes: tuple[dict[str, Any], ...] = ()
    if not record.children:  # the usual case: the test's own process only
        counts = record.counts()
        if over is None:
            over = kinds_over_budget(record, counts)
        cause = _first_cause(record, over, counts) if over else None
    else:  # the worst process's counts, kind by kind, and each process's
        by_process = record.counts_by_process()
        counts = {kind.key: max(process_counts[kind.key] for process_counts in by_process.values()) for kind in COUNTED_KINDS}
        found = processes_over_budget(record)
        if over is None:
            over = _kinds_of(record, found)
        cause = None
        if over and found:
            process, keys = found[0]
            cause = f"{record.process_label(process)}: {_first_cause(record, keys, by_process[process], process)}"
        elif over:  # a floor missed, by the test's processes together
            cause = _first_cause(record, over, counts)
        processes = tuple(
            {**(_process(process) or {"pid": record.pid, "rank": None}), "test_process": process is None,
             **{kind.key: kind.measure.for_json(process_counts[kind.key]) for kind in COUNTED_KINDS}}
            for process, process_counts in by_process.items()
        )
    return TestResult(
        counts=counts,
        budgets=budget.by_key(),
        verdict=Verdict.OVER if over else Verdict.WITHIN if budget.limits else Verdict.NO_BUDGET,
        over=over,
        cause=cause,
        details=_details(record) if _has_details(record) else _NO_DETAILS,
        processes=processes,
        shown=_shown_totals(record) if _KINDS_WITH_SHOWN and record.any_health() else {},
        unmeasured=unmeasured or _MEASURED,
    )


_KINDS_WITH_SHOWN = tuple(kind for kind in KINDS if kind.shown_signals and kind.shown_key)


def _shown_key(kind: BudgetKind) -> str:
    """The JSON key of a kind's shown totals, e.g. ``compile_seconds_breakdown``."""
    return kind.shown_key


def _shown_totals(record: RecompileRecord) -> dict[str, dict[str, float]]:
    """Each kind's shown signals' call-phase totals over the test's processes, rounded as its amounts are."""
    from .compile_cost import sum_by_signal

    found = {}
    for kind in _KINDS_WITH_SHOWN:
        totals = sum_by_signal((event.what, event.amount) for process in record.processes()
                               for event in process.signals(kind.shown_signals))
        if totals:
            found[kind.key] = {signal: kind.measure.for_json(total) for signal, total in totals.items()}
    return found


def idle_result(budget: RecompileBudget, unmeasured: Optional[Mapping[str, str]] = None) -> TestResult:
    """The result of a test that ran before anything imported torch: nothing can have compiled."""
    if budget.has_floor:  # nothing compiled: a floor above 0 is missed
        missed = tuple(key for key, allowed in budget.limits if KINDS_BY_KEY[key].is_floor and allowed > 0)
        if missed:
            kind = KINDS_BY_KEY[missed[0]]
            return TestResult(counts={kind.key: 0 for kind in COUNTED_KINDS}, budgets=budget.by_key(), verdict=Verdict.OVER,
                              over=missed, cause=kind.headline(0, budget.allowed(kind) or 0, budget.describe(kind)))
    return TestResult(
        counts={kind.key: 0 for kind in COUNTED_KINDS},
        budgets=budget.by_key(),
        verdict=Verdict.WITHIN if budget.budgeted else Verdict.NO_BUDGET,
        unmeasured=unmeasured or _MEASURED,
    )


def shows(kind: BudgetKind, result: TestResult) -> bool:
    """Whether a test's junit properties and table row show this kind: the three counts always; a compile-health
    kind where the test budgets it or has some (compile time, which every compile has, only where budgeted)."""
    if kind.events != "health" or result.budgets.get(kind.key) is not None:
        return True
    return bool(result.counts.get(kind.key, 0)) and not kind.shown_only_where_budgeted


def count_properties(result: TestResult) -> list[tuple[str, object]]:
    """The counts as ``user_properties`` (and so junit XML ``<property>`` elements), and each process's when children reported."""
    kinds = [kind for kind in COUNTED_KINDS if shows(kind, result)]
    kinds = [kind for kind in kinds if kind.key not in result.unmeasured]  # no count: no property, rather than a 0
    properties: list[tuple[str, object]] = [(f"nocompile_{kind.key}", kind.measure.for_json(result.counts[kind.key])) for kind in kinds]
    for process in result.processes:
        counts = " ".join(f"{kind.key}={process[kind.key]}" for kind in kinds)
        properties.append(("nocompile_process", f"{process_label(process)}: {counts}"))
    return properties


def process_label(process: dict[str, Any]) -> str:
    """A process of :attr:`TestResult.processes` as reports name it, e.g. ``rank 1 (pid 4242)``."""
    from .events import ProcessInfo, process_label

    info = ProcessInfo(process["pid"], process.get("rank"), process.get("nth", 1), process.get("command"))
    return process_label(None if process.get("test_process") else info, process["pid"])


def _first_cause(record: RecompileRecord, over: tuple[str, ...], counts: dict[str, Amount],
                 process: Optional[ProcessInfo] = None) -> str:
    """The first thing that put a process over budget: a recompile's guard, a graph break's reason, or the headline."""
    kind = next(kind for kind in KINDS if kind.key in over)
    if kind.is_floor:
        from .floors import floor_cause

        return floor_cause(record, kind)
    recompiles, _, graph_breaks = record.events_of(process, "call")
    if kind.events == "health":
        counted = record.process_of(process).signals(kind.signals)
        if kind.describe_events is not None and counted:
            return kind.describe_events(counted)[0]  # e.g. its first sync's line, counted
        for signal in counted:
            of = f" of {signal.compiling_place}" if signal.compiling is not None else ""
            return f"{signal.what}{of}" + (f": {signal.reason}" if signal.reason else "")
    for source in kind.explained_by:
        if source == "recompiles":
            for event in recompiles:
                if event.reasons:
                    return f"{event.code_name} recompiled: {str(event.reasons[0]).splitlines()[0]}"
        elif source == "graph_breaks":
            for graph_break in graph_breaks:
                return f"graph break: {graph_break.reason}"
    return kind.headline(counts[kind.key], record.budget.allowed(kind) or 0, record.budget.describe(kind))


def _where(location: Optional[CodeLocation]) -> Optional[str]:
    return None if location is None else str(location)


def _module(module: Optional[CompiledModule]) -> Optional[dict[str, Any]]:
    return None if module is None else module.to_dict()


def _process(process: Optional[ProcessInfo]) -> Optional[dict[str, Any]]:
    """A child process as the JSON report holds it: ``nth`` past the first of its pid, ``command`` when it said."""
    if process is None:
        return None
    return {"pid": process.pid, "rank": process.rank, **({"nth": process.nth} if process.nth > 1 else {}),
            **({"command": process.command} if process.command else {})}


def _refused(event: Optional[RecompileEvent]) -> Optional[dict[str, Any]]:
    """The attempt dynamo refused at its limit (logged as a recompile, compiled nothing): its id and failed guards."""
    if event is None:
        return None
    return {"compile_id": event.compile_id, "guards": [reason.guard for reason in event.reasons]}


def _reason(reason: GuardFailure) -> dict[str, Any]:
    """A failed guard as the JSON report holds it: torch's text, its class and subject, and the usual fix where one is known."""
    from .guard_classes import classify

    classified = classify(reason.named or reason.guard)  # a module's arguments by the user's names
    return {"compile_id": reason.compile_id, "guard": reason.guard, "named_guard": reason.named, "source": reason.source,
            "class": classified.name, "subject": classified.subject, "fix": classified.fix}


def _has_details(record: RecompileRecord) -> bool:
    """Whether any process recorded something the details list (compiles alone are only counted)."""
    return record.any_health() or any(process.recompiles or process.limit_hits or process.graph_breaks for process in record.processes())


def _details(record: RecompileRecord) -> dict[str, list[dict[str, Any]]]:
    return {
        "recompile_events": [
            {
                "function": event.function,
                "filename": event.filename,
                "line": event.line,
                "phase": event.phase,
                "compile_id": event.compile_id,
                "thread": event.thread,
                "process": _process(event.process),
                "user_code": _where(event.user_code),
                "reasons": [_reason(reason) for reason in event.reasons],
                "module": _module(event.module),
            }
            for event in record.all_events()
        ],
        "recompile_limit_hits": [
            {"limit_name": hit.limit_name, "limit": hit.limit, "function": hit.function, "phase": hit.phase,
             "process": _process(hit.process), "refused_attempt": _refused(hit.refused)}
            for hit in record.all_limit_hits()
        ],
        "graph_break_events": [
            {
                "filename": event.filename,
                "line": event.line,
                "phase": event.phase,
                "reason": event.reason,
                "explanation": event.explanation,
                "graph_break_id": event.graph_break_id,
                "user_code": _where(event.user_code),
                "process": _process(event.process),
                "module": _module(event.module),
            }
            for event in record.all_graph_breaks()
        ],
        "health_events": [
            {"what": event.what, "amount": event.amount, "reason": event.reason, "phase": event.phase, "compile_id": event.compile_id,
             "compiling": _where(event.compiling), "module": _module(event.module), "thread": event.thread, "user_code": _where(event.user_code),
             "process": _process(event.process)}
            for process in record.processes() for event in process.health
        ],
    }
