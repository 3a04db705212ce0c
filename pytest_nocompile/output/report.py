"""The text users read: budget failures and report sections. Pure string work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional, Sequence

from ..judge.guard_classes import classify
from ..vocabulary.events import (
    UNKNOWN_FILE,
    UNPARSED,
    GuardFailure,
    HealthEvent,
    RecompileEvent,
    RecompileLimitHit,
)
from ..vocabulary.graph_break_events import GraphBreakEvent, broke_at
from ..vocabulary.kinds import KINDS, USER_ONLY, USER_ONLY_INI, USER_ONLY_OPTION, BudgetKind
from ..vocabulary.measures import COUNT, Measure, plural, sum_by_signal
from ..vocabulary.resume_names import resume_point

if TYPE_CHECKING:
    import pytest

    from ..judge.budget import RecompileBudget
    from ..record.process_events import ProcessEvents
    from ..record.snapshot import ProcessSnapshot, TestSnapshot

SECTION_TITLE = "nocompile recompiles"


def format_event(index: int, total: int, event: RecompileEvent,
                 shown: Optional[set[object]] = None) -> list[str]:
    """The lines for one recompile: what recompiled, which guards failed, whose code.

    ``shown``: the guards (and fixes) earlier events of the same failure showed, left out
    here (and then added to).
    """
    lines = [f"[{index}/{total}] recompiled {event.code_place}"]
    repeated: list[GuardFailure] = []
    for reason in event.reasons or ():
        if (shown is not None and not _first_time(shown, (event.process, event.filename, event.line,
                                                          reason.compile_id or reason.guard))):
            repeated.append(reason)
            continue
        # Multi-line guards (an object's repr) stay inside the reason's indentation.
        lines.append("    guard failed: " + str(reason).replace("\n", "\n                  "))
        # A place in dynamo's wrapper around a module (its "return fn(*args, **kwargs)") is
        # nothing the user wrote.
        where = None if _in_wrapper(event, reason) else reason.location or reason.source
        if where:
            lines.append(f"      guarded at: {where}")
        fix = classify(reason.named or reason.guard).fix
        if fix is not None and (shown is None or _first_time(shown, fix)):
            lines.append(f"      usual fix: {fix}")
    if repeated:
        lines.append(f"    failed again: {_repeated(repeated)} (shown above)")
    unread = event.unread
    if event.witness is not None:
        attempt = (event.compile_id or "").partition("/")[2]
        lines.append(f"    no recompile record: counted from its compile id {event.compile_id} "
                     f"(dynamo's attempt {attempt} at this frame); {_log_not_read('recompiles')}")
    elif unread is not None:
        lines += unread_lines("this recompile" if event.function == UNPARSED else "its reasons",
                              unread)
    elif not event.reasons:
        lines.append("    guard failed: (torch gave no reason)")
    renamed = _torch_names(event)
    if renamed:
        lines.append(
            f"    torch's names: {renamed} (dynamo compiled its wrapper around the module)")
    if event.user_code is not None:
        lines.append(f"    triggered by: {event.user_code}")
    if event.thread is not None:
        lines.append(f"    in thread: {event.thread}")
    return lines


def _in_wrapper(event: RecompileEvent, reason: GuardFailure) -> bool:
    """Whether the guard's place is in dynamo's wrapper around a module (the
    recompiled code's own file)."""
    module, location = event.module, reason.location
    return (module is not None and module.wrapped and location is not None
            and location.filename == event.filename)


def _torch_names(event: RecompileEvent) -> str:
    """``args[0] for input, fn for self``: the names torch's guards gave the arguments a failure
    shows by the user's names."""
    module = event.module
    if module is None:
        return ""
    pairs = dict.fromkeys(pair for reason in event.reasons for pair in module.renames(reason.guard))
    return ", ".join(f"{torch_name} for {user_name}" for torch_name, user_name in pairs)


def _first_time(shown: set[object], key: object) -> bool:
    """Whether a guard failure (its cache entry's key) or a fix is news to a failure
    text (and from now on, not).

    dynamo's message for a recompile lists every cache entry of the frame
    with the guard that failed, the older ones again each time: 8 recompiles
    of one frame are 36 guard failures, 8 of them distinct. A cache entry is
    known by its process and compile id (the guard text names the value that
    failed it, which changes from call to call); before torch 2.5, which
    gives no compile ids, by the guard text.
    """
    if key in shown:
        return False
    shown.add(key)
    return True


def _repeated(reasons: list[GuardFailure]) -> str:
    """``the guard of 0/0``, ``the guards of 0/0, 0/1``,
    ``the guards of 6 cache entries, 0/0 … 0/5``; ``2 guards`` without ids."""
    ids = [reason.compile_id for reason in reasons if reason.compile_id]
    if len(ids) != len(reasons):
        return plural(len(reasons), "guard")
    ids.reverse()  # dynamo lists the newest cache entry first
    noun = "the guard of" if len(ids) == 1 else "the guards of"
    if len(ids) <= _IDS_LISTED:
        return f"{noun} {', '.join(ids)}"
    return f"{noun} {len(ids)} cache entries, {ids[0]} … {ids[-1]}"


_IDS_LISTED = 4  # more cache entries than this are given as a range


def format_events(events: Sequence[RecompileEvent], with_phase: bool = False) -> list[str]:
    lines: list[str] = []
    shown: set[object] = set()
    for index, event in enumerate(events, start=1):
        first, *rest = format_event(index, len(events), event, shown)
        lines += [f"({event.phase}) {first}" if with_phase else first, *rest]
    return lines


def format_limit_hits(hits: Iterable[RecompileLimitHit]) -> list[str]:
    lines = []
    for hit in hits:
        lines.append(f"{hit.headline}: later calls run uncompiled and log no recompiles, "
                     "so the count above is a lower bound")
        refused = hit.refused
        if refused is not None:  # dynamo logged the attempt, then refused it: not a recompile
            lines.append("    refused attempt, not counted as a recompile: guard failed: "
                         f"{refused.first_reason}")
        if not hit.read:
            lines += unread_lines("its limit warning", hit.message)
    return lines


def _log_not_read(log: str) -> str:
    """Why a count is a lower bound where its second witness saw more than its log."""
    from ..judge.installed_versions import distribution_version  # here: rarely needed

    return (f"torch {distribution_version('torch')} logged none in its {log} log, so the count "
            "is a lower bound")


_RAW_LINES_SHOWN = 12  # of torch's text not read: enough to recognise it, not a page


def unread_lines(what: str, text: str) -> list[str]:
    """torch's text that the parser could not read, raw, under a line that says so and names the
    torch: nothing torch wrote is passed over as "no reason"."""
    from ..judge.installed_versions import distribution_version  # here: rarely needed

    raw = text.splitlines() or [""]
    lines = [f"    not read: torch {distribution_version('torch')} wrote {what} in a form "
             "pytest-nocompile does not know; torch's text:",
             *(f"      | {line.rstrip()}" for line in raw[:_RAW_LINES_SHOWN])]
    if len(raw) > _RAW_LINES_SHOWN:
        lines.append(f"      | ... ({plural(len(raw) - _RAW_LINES_SHOWN, 'more line')})")
    return lines


def format_graph_breaks(events: Sequence[GraphBreakEvent], user_only: bool = False,
                        counted: Optional[str] = None) -> list[str]:
    """The user's graph breaks, then those inside torch after a line that says so: with
    ``user_only`` not counted (numbered on their own), else counted (``counted``: what the line
    adds, e.g. how a budget leaves them out)."""
    mine = [event for event in events if not event.inside_torch]
    torchs = [event for event in events if event.inside_torch]
    if user_only:
        lines = _graph_break_entries(mine, 1, len(mine))
        if torchs:
            lines.append(f"not counted (inside torch): {plural(len(torchs), 'graph break')}")
            lines += _graph_break_entries(torchs, 1, len(torchs))
        return lines
    lines = _graph_break_entries(mine, 1, len(events))
    if torchs:
        note = f" ({counted})" if counted else ""
        lines.append(f"inside torch: {plural(len(torchs), 'graph break')}{note}")
        lines += _graph_break_entries(torchs, len(mine) + 1, len(events))
    return lines


def _graph_break_entries(events: Sequence[GraphBreakEvent], first: int, total: int) -> list[str]:
    """One entry per graph break, numbered from ``first`` of ``total``: where, why, in what, from
    which user line."""
    lines: list[str] = []
    advised: dict[tuple[tuple[str, ...], Optional[str]], str] = {}  # advice shown, by its entry
    for index, event in enumerate(events, start=first):
        entry = f"[{index}/{total}]"
        lines.append(f"{entry} graph break at {event.place}")
        if event.witness is not None:
            lines.append("    no graph-break record: counted from the function dynamo compiled to "
                         f"resume after it; {_log_not_read('graph-break')}")
        elif event.filename != UNKNOWN_FILE:  # a message not read has no reason but its text
            lines.append(f"    reason: {event.reason}")
        if event.unread is not None:
            lines += unread_lines("this graph break" if event.filename == UNKNOWN_FILE
                                  else "its reason", event.unread)
        if event.explanation:
            lines.append(f"    explanation: {event.explanation}")
        if event.module is not None:
            lines.append(f"    compiling: {event.module.place}")
        if event.user_code is not None:
            lines.append(f"    user code: {event.user_code}")
        lines += _torch_advice(event, entry, advised)
    return lines


def graph_breaks_resumed_after(recompiles: Sequence[RecompileEvent],
                               graph_breaks: Sequence[GraphBreakEvent]) -> list[str]:
    """The graph breaks that recompiled code resumes after (a resume function's), in full: what
    broke the graph and torch's advice, beside the recompiles that the break's split brought."""
    places = {(event.filename, point.line)
              for event in recompiles if (point := resume_point(event.function)) is not None}
    led = [event for event in graph_breaks if any(broke_at(event, *place) for place in places)]
    if not led:
        return []
    heading = "the graph break" if len(led) == 1 else "the graph breaks"
    return [f"recompiled after {heading} (dynamo compiles the code after a graph break "
            "as a function of its own):", *format_graph_breaks(led)]


def _torch_advice(event: GraphBreakEvent, entry: str,
                  advised: dict[tuple[tuple[str, ...], Optional[str]], str]) -> list[str]:
    """torch's hints and its page on this graph break, where it gave them; a later break of the same
    kind points back at the first rather than repeating them."""
    advice = (event.hints, event.link)
    if not event.hints and event.link is None:
        return []
    if advice in advised:
        return [f"    hints: as for {advised[advice]} above"]
    advised[advice] = entry
    lines = [f"    hint: {hint}" for hint in event.hints]
    if event.link is not None:
        lines.append(f"    details: {event.link}")
    return lines


def format_health_events(events: Sequence[HealthEvent], measure: Measure = COUNT) -> list[str]:
    """One entry per health event: the signal and where it happened, torch's
    reason, the user's line."""
    lines: list[str] = []
    for index, event in enumerate(events, start=1):
        amount = measure.event_amount(event.amount)
        compile_id = f" in compile {event.compile_id}" if event.compile_id else ""
        of = f" of {event.compiling_place}" if event.compiling is not None else ""
        lines.append(f"[{index}/{len(events)}] {event.what}{amount}{compile_id}{of}")
        if event.reason:
            lines.append("    reason: " + event.reason.replace("\n", "\n            "))
        if event.user_code is not None:
            lines.append(f"    triggered by: {event.user_code}")
        if event.thread is not None:
            lines.append(f"    in thread: {event.thread}")
    return lines


def _shown_totals(kind: BudgetKind, health: Sequence[HealthEvent]) -> list[str]:
    """The line after a health kind's headline with its shown signals' totals (a compile
    time's breakdown), if any."""
    totals = sum_by_signal((event.what, event.amount) for event in health
                           if event.what in kind.shown_signals)
    if not totals:
        return []
    text = (kind.describe_shown(totals) if kind.describe_shown
            else ", ".join(f"{total:g} {name}" for name, total in totals.items()))
    return [f"    {kind.shown_label}: {text}"] if text else []


def explain(kind: BudgetKind, headline: str, recompiles: Sequence[RecompileEvent],
            limit_hits: Sequence[RecompileLimitHit], graph_breaks: Sequence[GraphBreakEvent],
            not_counted: Sequence[RecompileEvent] = (),
            health: Sequence[HealthEvent] = (), health_not_counted: Sequence[HealthEvent] = (),
            budget_source: Optional[str] = None, user_only: bool = False,
            unlogged: Optional[str] = None) -> str:
    """A kind's failure: its headline, then the events its table entry says explain it
    (``health``: the events of its signals, listed, and of its shown signals, summed up in one
    line; ``health_not_counted``: its signals' events outside the call phase, listed after them
    by a kind with lines of its own; ``budget_source``: where a graph-break budget was set, to
    say how it would leave out the breaks inside torch; ``user_only``: it leaves them out;
    ``unlogged``: why its count is a lower bound, where a second witness saw more than its log)."""
    lines = [headline]
    if unlogged is not None:
        lines.append(f"    a lower bound: {unlogged}")
    if kind.events == "health":
        lines += [f"    a lower bound: {event.reason}" for event in health
                  if event.what == kind.lower_bound_signal][:1]
        if kind.shown_signals:
            lines += _shown_totals(kind, health)
        counted = [event for event in health if event.what in kind.signals]
        describe = kind.describe_events
        if describe is None:
            lines += format_health_events(counted, kind.measure)
        else:
            lines += describe(counted)
            if health_not_counted:
                total = sum(event.amount for event in health_not_counted)
                lines.append("not counted (in fixtures, outside the call phase): "
                             f"{kind.measure.amount(total, kind.noun)}")
                lines += describe(health_not_counted)
    for source in kind.explained_by:
        if source == "recompiles":
            lines += format_events(recompiles) + format_limit_hits(limit_hits)
            if "graph_breaks" not in kind.explained_by:  # else each graph break is listed below
                lines += graph_breaks_resumed_after(recompiles, graph_breaks)
            if not_counted:
                lines.append("not counted (outside the call phase): "
                             f"{plural(len(not_counted), 'recompile')}")
                lines += format_events(not_counted, with_phase=True)
        elif source == "graph_breaks":
            torchs_note = None
            if USER_ONLY in kind.keywords:
                how = _how_to_leave_out(budget_source)
                torchs_note = f"counted; {how} leaves them out" if how else "counted"
            lines += format_graph_breaks(graph_breaks, user_only, torchs_note)
    return "\n".join(lines)


def _how_to_leave_out(budget_source: Optional[str]) -> Optional[str]:
    """What makes a graph-break budget set there (``from --max-graph-breaks``, ``marker on the
    test``) count only the user's breaks: the option, the ini key or the marker's keyword; None for
    a block assertion (no source)."""
    if budget_source is None:
        return None
    if budget_source.startswith("from --"):
        return USER_ONLY_OPTION
    if budget_source.startswith("from "):  # an ini key, in the file or given with -o
        return f"ini key {USER_ONLY_INI}"
    return f"{USER_ONLY}=True"


def format_budget_failure(snapshot: TestSnapshot, budget: RecompileBudget, over: Sequence[str],
                          stance: Optional[str] = None,
                          found: Optional[list[tuple[ProcessSnapshot, tuple[str, ...]]]] = None,
                          ) -> str:
    """The failure text of a test over its marker, CLI or ini budget: one part per kind in ``over``.

    When child processes reported, one part per process and kind over budget,
    each headline naming its process, e.g. ``rank 1 (pid 4242, python -u train.py): 1 recompile >
    max_recompiles(0) (marker on the test)``. A floor missed (``min_compiles``) is one part for
    the whole test, with why so little compiled (``stance``: torch.compiler's stance when the
    call ended, when not the default). ``found``: the processes over budget, as the verdict found
    them (:func:`~..judge.verdict.processes_over_budget`), written here, not judged again.
    """
    from ..judge.floors import floor_count, why_too_few
    from ..judge.verdict import budget_count, processes_over_budget, unlogged_in

    # Without children the test's own process is the only one, and its headline names none.
    if not snapshot.with_children:
        over_by_process = [(snapshot.own, tuple(over))]
    else:
        over_by_process = processes_over_budget(snapshot, budget) if found is None else found
    parts = []
    for process, kinds_over in over_by_process:
        label = f"{process.label}: " if snapshot.with_children else ""
        unlogged = unlogged_in(process)
        parts += [
            explain(kind, label + kind.headline(budget_count(process, kind, budget),
                                                budget.allowed(kind) or 0, budget.describe(kind)),
                    process.call_recompiles, process.call_limit_hits, process.call_graph_breaks,
                    not_counted=[event for event in process.recompiles if event.phase == "setup"],
                    health=process.signals(kind.health_signals) + lower_bound(process, kind),
                    health_not_counted=_outside_the_call(process, kind),
                    budget_source=budget.source(kind) or "",
                    user_only=budget.counts_user_only(kind), unlogged=unlogged.get(kind.key))
            for kind in KINDS if kind.key in kinds_over and not kind.is_floor
        ]
    for kind in KINDS:
        if kind.is_floor and kind.key in over:
            count = floor_count(snapshot, kind)
            headline = kind.headline(count, budget.allowed(kind) or 0, budget.describe(kind))
            parts.append("\n".join([headline, *why_too_few(snapshot.processes, count, stance)]))
    return "\n\n".join(parts)


def lower_bound(events: ProcessSnapshot | ProcessEvents, kind: BudgetKind) -> list[HealthEvent]:
    """The event saying a process's count of ``kind`` is a lower bound, if any: said once, as its
    source armed (in setup)."""
    return events.signals((kind.lower_bound_signal,), None)[:1] if kind.lower_bound_signal else []


def _outside_the_call(events: ProcessSnapshot, kind: BudgetKind) -> list[HealthEvent]:
    """A kind's events in fixtures (setup, teardown so far), for a kind whose failure lists
    them: shown, not counted."""
    if kind.describe_events is None or kind.events != "health":
        return []
    return [event for event in events.signals(kind.signals, None) if event.phase != "call"]


def add_recompile_section(report: pytest.TestReport, snapshot: TestSnapshot, when: str,
                          in_failure: Sequence[object] = ()) -> None:
    """Show recompiles beside a test's own failure, or those of setup/teardown.

    ``in_failure``: the events the failure's own text lists (a block assertion's), left out here.
    """
    heading = "recorded"
    if when == "call":
        listed = {id(event) for event in in_failure}
        events = [event for process in snapshot.processes for event in process.recompiles
                  if event.phase != "teardown" and id(event) not in listed]
        limit_hits = [hit for process in snapshot.processes for hit in process.limit_hits
                      if id(hit) not in listed]
        suffix = ""
        shown = report.failed and bool(events or limit_hits)
        if listed:
            heading = "recorded besides those in the failure above"
    else:
        # the section lists recompiles: a test that only compiled has none
        if not (snapshot.own.recompiles or snapshot.with_children):
            return
        events = [event for process in snapshot.processes for event in process.recompiles
                  if event.phase == when]
        # a process a fixture started in setup reports whenever it compiles
        if when == "teardown" and snapshot.with_children:
            events = [event for child in snapshot.children for event in child.recompiles
                      if event.phase == "setup"] + events
        phases = ", ".join(dict.fromkeys(event.phase for event in events))
        limit_hits, suffix = [], f" ({phases}, not counted)"
        shown = bool(events)
    if shown:
        lines = [f"{plural(len(events), 'recompile')} {heading}",
                 *format_events(events, with_phase=True), *format_limit_hits(limit_hits)]
        report.sections.append((SECTION_TITLE + suffix, "\n".join(lines)))
