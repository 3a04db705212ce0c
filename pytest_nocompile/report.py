"""The text users read: budget failures and report sections. Pure string work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from .events import GraphBreakEvent, RecompileEvent, RecompileLimitHit, display_path

if TYPE_CHECKING:
    from .record import RecompileRecord

SECTION_TITLE = "nocompile recompiles"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def budget_headline(count: int, allowed: int, budget: str, exact: bool = False) -> str:
    """First line of a failure, e.g. ``3 recompiles > max_recompiles(0)``."""
    if count > allowed:
        return f"{plural(count, 'recompile')} > {budget}"
    if exact and count != allowed:
        return f"{plural(count, 'recompile')} != {budget}"
    return f"{plural(count, 'recompile')} within {budget}, but dynamo hit its recompile limit"


def format_event(index: int, total: int, event: RecompileEvent) -> list[str]:
    """The lines for one recompile: what recompiled, which guards failed, whose code."""
    lines = [f"[{index}/{total}] recompiled {event.function} ({display_path(event.filename)}:{event.line})"]
    for reason in event.reasons or ():
        # Multi-line guards (an object's repr) stay inside the reason's indentation.
        lines.append("    guard failed: " + str(reason).replace("\n", "\n                  "))
        if reason.location is not None:
            lines.append(f"      guarded at: {reason.location}")
        elif reason.source:
            lines.append(f"      guarded at: {reason.source}")
    if not event.reasons:
        lines.append("    guard failed: (torch gave no reason)")
    if event.user_code is not None:
        lines.append(f"    triggered by: {event.user_code}")
    if event.thread is not None:
        lines.append(f"    in thread: {event.thread}")
    return lines


def format_events(events: Sequence[RecompileEvent]) -> list[str]:
    lines: list[str] = []
    for index, event in enumerate(events, start=1):
        lines += format_event(index, len(events), event)
    return lines


def format_limit_hits(hits: Iterable[RecompileLimitHit]) -> list[str]:
    return [
        f"dynamo hit config.{hit.limit_name} ({hit.limit}) for {hit.function}: later calls run "
        "uncompiled and log no recompiles, so the count above is a lower bound"
        for hit in hits
    ]


def format_failure(
    headline: str,
    counted: Sequence[RecompileEvent],
    limit_hits: Sequence[RecompileLimitHit] = (),
    not_counted: Sequence[RecompileEvent] = (),
) -> str:
    """A budget failure: headline, each counted recompile, limit hits, then the rest."""
    lines = [headline, *format_events(counted), *format_limit_hits(limit_hits)]
    if not_counted:
        lines.append(f"not counted (outside the call phase): {plural(len(not_counted), 'recompile')}")
        lines += _format_with_phase(not_counted)
    return "\n".join(lines)


def format_section(events: Sequence[RecompileEvent], limit_hits: Sequence[RecompileLimitHit] = ()) -> str:
    """Body of the report section added to a test that failed for its own reason."""
    lines = [f"{plural(len(events), 'recompile')} recorded", *_format_with_phase(events)]
    lines += format_limit_hits(limit_hits)
    return "\n".join(lines)


def _format_with_phase(events: Sequence[RecompileEvent]) -> list[str]:
    lines: list[str] = []
    for index, event in enumerate(events, start=1):
        first, *rest = format_event(index, len(events), event)
        lines += [f"({event.phase}) {first}", *rest]
    return lines


def graph_break_headline(count: int, allowed: int) -> str:
    return f"{plural(count, 'graph break')} > max_graph_breaks({allowed})"


def format_graph_breaks(events: Sequence[GraphBreakEvent]) -> list[str]:
    lines: list[str] = []
    for index, event in enumerate(events, start=1):
        lines.append(f"[{index}/{len(events)}] graph break at {display_path(event.filename)}:{event.line}")
        lines.append(f"    reason: {event.reason}")
        if event.explanation:
            lines.append(f"    explanation: {event.explanation}")
        if event.user_code is not None:
            lines.append(f"    user code: {event.user_code}")
    return lines


def format_budget_failure(record: "RecompileRecord") -> str:
    """The failure text of a test over its marker, CLI or ini budget."""
    parts: list[str] = []
    budget = record.budget
    if record.recompiles_over_budget():
        counted = record.in_phase("call")
        headline = budget_headline(len(counted), budget.max_recompiles or 0, budget.describe())
        parts.append(format_failure(headline, counted, record.limit_hits_in("call"), record.in_phase("setup")))
    if record.graph_breaks_over_budget():
        breaks = record.graph_breaks_in("call")
        parts.append("\n".join([graph_break_headline(len(breaks), budget.max_graph_breaks or 0), *format_graph_breaks(breaks)]))
    return "\n\n".join(parts)
