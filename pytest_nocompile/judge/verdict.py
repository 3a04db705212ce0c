"""The verdict on a test, decided once from its snapshot: the kinds over budget, in which
process, and the first cause.

:func:`judge` reads a :class:`~..record.snapshot.TestSnapshot` and the
test's budget, and nothing else: it never reads the record, whose lists a
compiling thread may still be adding to. The block assertions apply the same
rule, :func:`over_budget`, to the events of their block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Protocol, Sequence

from ..vocabulary.kinds import COUNTED_KINDS, KINDS, KINDS_BY_KEY, BudgetKind
from ..vocabulary.measures import Amount, plural
from .floors import floor_cause, floors_missed
from .guard_classes import classify
from .result import MEASURED, NO_DETAILS, TestResult, Verdict

if TYPE_CHECKING:
    from ..record.snapshot import ProcessSnapshot, TestSnapshot
    from ..vocabulary.events import CodeLocation, GuardFailure, ProcessInfo, RecompileEvent
    from ..vocabulary.graph_break_events import GraphBreakEvent
    from ..vocabulary.module_names import CompiledModule
    from .budget import RecompileBudget


class Contract(Protocol):
    """A contract read from its marker
    (:func:`~pytest_nocompile.hookspecs.pytest_nocompile_read_contract`): judged on the test's
    snapshot when the call ends, with the budgets."""

    name: str  # its marker's

    def broken(self, snapshot: TestSnapshot) -> Optional[str]:
        """The failure text where the test broke the contract, else None."""


def over_budget(kind: BudgetKind, count: Amount, allowed: Optional[Amount], *, exact: bool = False,
                limit_hit: bool = False, compile_error: bool = False) -> bool:
    """The one rule: more than allowed (with ``exact``: other than allowed; for a floor: fewer), or
    a limit hit or a swallowed compile error where the kind says so."""
    if allowed is None:
        return False
    if compile_error and kind.compile_error_fails:
        return True
    if kind.is_floor:
        return count < allowed
    return count > allowed or (exact and count != allowed) or (limit_hit and kind.limit_hit_fails)


def kinds_over_budget(
    snapshot: TestSnapshot, budget: RecompileBudget,
    found: Optional[list[tuple[ProcessSnapshot, tuple[str, ...]]]] = None,
) -> tuple[str, ...]:
    """The keys of the kinds over budget in any process's call phase (``found``:
    :func:`processes_over_budget`'s, where known), and the floors the test missed, in table order (a
    floor is judged on the whole test: see .floors)."""
    if not budget.limits:
        return ()
    over = {key for _, keys in (processes_over_budget(snapshot, budget) if found is None else found)
            for key in keys}
    if budget.has_floor:
        over.update(floors_missed(snapshot, budget))
    return tuple(key for key, _ in budget.limits if key in over)


def budget_count(process: ProcessSnapshot, kind: BudgetKind, budget: RecompileBudget) -> Amount:
    """A process's call-phase count of a kind as its budget counts it: with ``user_only``, the
    graph breaks outside torch alone (the test's count, in its table row and JSON, stays every
    break)."""
    if budget.counts_user_only(kind):
        return sum(1 for event in process.call_graph_breaks if not event.inside_torch)
    return process.counts[kind.key]


def processes_over_budget(snapshot: TestSnapshot,
                          budget: RecompileBudget) -> list[tuple[ProcessSnapshot, tuple[str, ...]]]:
    """Each process over budget with the keys of its kinds over, in table order.

    A budget applies to each process on its own: eight ranks that each
    recompile once are one recompile each, within ``max_recompiles(1)``.
    Floors (``min_compiles``) are judged on the whole test instead, not here.
    """
    found = []
    for process in snapshot.processes:
        limit_hit = bool(process.call_limit_hits)
        over = tuple(key for key, allowed in budget.limits
                     if not (kind := KINDS_BY_KEY[key]).is_floor
                     and over_budget(kind, budget_count(process, kind, budget), allowed,
                                     limit_hit=limit_hit))
        if over:
            found.append((process, over))
    return found


def broken_contracts(snapshot: TestSnapshot,
                     contracts: Sequence[Contract]) -> list[tuple[str, str]]:
    """Each contract the test broke: its marker's name and its failure text."""
    return [(contract.name, text) for contract in contracts
            if (text := contract.broken(snapshot)) is not None]


def judge(snapshot: TestSnapshot, budget: RecompileBudget, over: Optional[tuple[str, ...]] = None,
          unmeasured: Optional[Mapping[str, str]] = None, contracts: Sequence[Contract] = (),
          broken: Optional[list[tuple[str, str]]] = None,
          found: Optional[list[tuple[ProcessSnapshot, tuple[str, ...]]]] = None) -> TestResult:
    """The verdict on a finished test, with everything the reports show (``over``, ``found``,
    ``broken``: already judged at the call's end, else judged here, ``broken`` on ``contracts``;
    ``unmeasured``: why kinds could not be measured here, by key)."""
    processes: tuple[dict[str, Any], ...] = ()
    if found is None:
        found = processes_over_budget(snapshot, budget) if budget.limits else []
    if over is None:
        over = kinds_over_budget(snapshot, budget, found)
    if broken is None:
        broken = broken_contracts(snapshot, contracts) if contracts else []
    if not snapshot.with_children:  # the usual case: the test's own process only
        counts = snapshot.own.counts
        cause = _first_cause(snapshot, budget, over, snapshot.own) if over else None
    else:  # the worst process's counts, kind by kind, and each process's
        counts = {kind.key: max(process.counts[kind.key] for process in snapshot.processes)
                  for kind in COUNTED_KINDS}
        cause = None
        if over and found:
            process, keys = found[0]
            cause = f"{process.label}: {_first_cause(snapshot, budget, keys, process)}"
        elif over:  # a floor missed, by the test's processes together
            cause = _first_cause(snapshot, budget, over, snapshot.own)
        processes = tuple(
            {**(_process(process.info) or {"pid": snapshot.pid, "rank": None}),
             "test_process": process.info is None,
             **{kind.key: kind.measure.for_json(process.counts[kind.key])
                for kind in COUNTED_KINDS}}
            for process in snapshot.processes
        )
    if broken and cause is None:  # within its budgets: the contract's failure is the cause
        cause = broken[0][1].splitlines()[0]
    return TestResult(
        counts=counts,
        budgets=budget.by_key(),
        verdict=(Verdict.OVER if over else Verdict.BROKEN if broken
                 else Verdict.WITHIN if budget.limits else Verdict.NO_BUDGET),
        over=over,
        cause=cause,
        broken=tuple(name for name, _ in broken),
        details=_details(snapshot),
        processes=processes,
        shown={key: {signal: KINDS_BY_KEY[key].measure.for_json(total)
                     for signal, total in totals.items()}
               for key, totals in snapshot.shown.items()},
        unmeasured=unmeasured or MEASURED,
        user_only=budget.user_only,
        lower_bounds=_lower_bounds(snapshot),
    )


def _with_lower_bounds(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    return tuple(kind for kind in kinds if kind.lower_bound_signal)


def _lower_bounds(snapshot: TestSnapshot) -> Mapping[str, str]:
    """Why a kind's count is a lower bound, by key: where a second witness saw what the log did
    not, or some process of the test said so (the first one's reason); MEASURED where none is."""
    found = unlogged_counts(snapshot)
    if KINDS.derived(_with_lower_bounds) and any(process.health for process in snapshot.processes):
        for kind in KINDS.derived(_with_lower_bounds):
            for process in snapshot.processes:
                said = process.signals((kind.lower_bound_signal,), None)
                if said:
                    found[kind.key] = (("" if process.info is None else f"{process.label}: ")
                                       + (said[0].reason or kind.lower_bound_signal))
                    break
    return found or MEASURED


def unlogged_counts(snapshot: TestSnapshot) -> dict[str, str]:
    """The call phase's compiles, recompiles and graph breaks that a second witness (compilation
    metrics, a compile id, a resume function) saw and no log record did, by kind key: why that
    count is a lower bound (the first process's reason, naming a child)."""
    found: dict[str, str] = {}
    for process in snapshot.processes:
        for key, reason in unlogged_in(process).items():
            found.setdefault(key, reason if process.info is None else f"{process.label}: {reason}")
    return found


def unlogged_in(process: ProcessSnapshot) -> dict[str, str]:
    """:func:`unlogged_counts` of one process, by kind key."""
    if not process.compiles:  # most tests: nothing compiled, so no witness saw anything
        return {}
    found = {}
    compiles = sum(1 for event in process.compiles if event.witness and event.phase == "call")
    if compiles:
        found["compiles"] = (f"{plural(compiles, 'graph')} with no record in torch's graph_code "
                             "log, counted from compilation metrics")
    recompiles = sum(1 for event in process.call_recompiles if event.witness is not None)
    if recompiles:
        found["recompiles"] = (f"{plural(recompiles, 'recompile')} with no record in torch's "
                               "recompiles log, counted from compile ids")
    breaks = sum(1 for event in process.call_graph_breaks if event.witness is not None)
    if breaks:
        found["graph_breaks"] = (f"{plural(breaks, 'graph break')} with no record in torch's "
                                 "graph-break log, counted from the resume functions compiled "
                                 "after them")
    return found


def _first_cause(snapshot: TestSnapshot, budget: RecompileBudget, over: tuple[str, ...],
                 process: ProcessSnapshot) -> str:
    """The first thing that put a process over budget: a recompile's guard, a graph break's
    reason, or the headline."""
    kind = next(kind for kind in KINDS if kind.key in over)
    if kind.is_floor:
        return floor_cause(snapshot, budget, kind)
    if kind.events == "health":
        counted = [event for event in process.call_health if event.what in kind.signals]
        if kind.describe_events is not None and counted:
            return kind.describe_events(counted)[0]  # e.g. its first sync's line, counted
        for signal in counted:
            of = f" of {signal.compiling_place}" if signal.compiling is not None else ""
            return f"{signal.what}{of}" + (f": {signal.reason}" if signal.reason else "")
    for source in kind.explained_by:
        if source == "recompiles":
            for event in process.call_recompiles:
                if event.reasons:
                    return f"{event.code_name} recompiled: {str(event.reasons[0]).splitlines()[0]}"
        elif source == "graph_breaks":
            user_only = budget.counts_user_only(kind)
            for graph_break in users_first(process.call_graph_breaks, user_only):
                where = " inside torch" if graph_break.inside_torch else ""
                return f"graph break{where}: {graph_break.reason}"
    count = budget_count(process, kind, budget)
    return kind.headline(count, budget.allowed(kind) or 0, budget.describe(kind))


def users_first(graph_breaks: Sequence[GraphBreakEvent],
                user_only: bool = False) -> list[GraphBreakEvent]:
    """The graph breaks as a failure lists them: the user's first, then those inside torch
    (none with ``user_only``)."""
    users = [event for event in graph_breaks if not event.inside_torch]
    return users if user_only else users + [event for event in graph_breaks if event.inside_torch]


def _where(location: Optional[CodeLocation]) -> Optional[str]:
    return None if location is None else str(location)


def _module(module: Optional[CompiledModule]) -> Optional[dict[str, Any]]:
    return None if module is None else module.to_dict()


def _process(process: Optional[ProcessInfo]) -> Optional[dict[str, Any]]:
    """A child process as the JSON report holds it: ``nth`` past the first of its pid,
    ``command`` when it said."""
    return (None if process is None
            else {"pid": process.pid, "rank": process.rank,
                  **({"nth": process.nth} if process.nth > 1 else {}),
                  **({"command": process.command} if process.command else {})})


def _refused(event: Optional[RecompileEvent]) -> Optional[dict[str, Any]]:
    """The attempt dynamo refused at its limit (logged as a recompile, compiled nothing):
    its id and failed guards."""
    return None if event is None else {"compile_id": event.compile_id,
                                       "guards": [reason.guard for reason in event.reasons]}


def _reason(reason: GuardFailure) -> dict[str, Any]:
    """A failed guard as the JSON report holds it: torch's text, its class and subject, and the
    usual fix where one is known."""
    classified = classify(reason.named or reason.guard)  # a module's arguments by the user's names
    return {"compile_id": reason.compile_id, "guard": reason.guard, "named_guard": reason.named,
            "source": reason.source, "class": classified.name, "subject": classified.subject,
            "fix": classified.fix}


def _details(snapshot: TestSnapshot) -> dict[str, list[dict[str, Any]]]:
    if not any(process.health or process.recompiles or process.limit_hits or process.graph_breaks
               for process in snapshot.processes):
        return NO_DETAILS  # compiles alone are only counted
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
                "unread_text": event.unread,
                "witness": event.witness,
            }
            for process in snapshot.processes for event in process.recompiles
        ],
        "recompile_limit_hits": [
            {"limit_name": hit.limit_name, "limit": hit.limit, "function": hit.function,
             "phase": hit.phase, "process": _process(hit.process),
             "refused_attempt": _refused(hit.refused),
             "unread_text": None if hit.read else hit.message}
            for process in snapshot.processes for hit in process.limit_hits
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
                "inside_torch": event.inside_torch,
                "unread_text": event.unread,
                "witness": event.witness,
            }
            for process in snapshot.processes for event in process.graph_breaks
        ],
        "health_events": [
            {"what": event.what, "amount": event.amount, "reason": event.reason,
             "phase": event.phase, "compile_id": event.compile_id,
             "compiling": _where(event.compiling), "module": _module(event.module),
             "thread": event.thread, "user_code": _where(event.user_code),
             "process": _process(event.process)}
            for process in snapshot.processes for event in process.health
        ],
    }
