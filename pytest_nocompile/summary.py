"""Per-test results as plain data, the terminal table and the JSON report. Pure code.

A test's entry is a JSON-able dict made where the test ran (an xdist worker
too) and carried on its teardown report, so the controller sees every test.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import TYPE_CHECKING, Any, Iterable, Optional

if TYPE_CHECKING:  # at run time this module imports neither: a test that never compiled needs neither
    from .budget import RecompileBudget
    from .events import CodeLocation
    from .record import RecompileRecord

JSON_FORMAT = "pytest-nocompile-report/1"
COUNT_PROPERTIES = ("nocompile_compiles", "nocompile_recompiles", "nocompile_graph_breaks")


def _where(location: Optional[CodeLocation]) -> Optional[str]:
    return None if location is None else str(location)


def entry_from_record(record: RecompileRecord) -> dict[str, Any]:
    """What one test recorded, as JSON-able data (counts are of the call phase)."""
    return _entry(
        record.budget,
        compiles=record.compiles,
        recompiles=len(record.in_phase("call")),
        graph_breaks=len(record.graph_breaks_in("call")),
        over_budget=record.exceeds_budget(),
        recompile_events=[
            {
                "function": event.function,
                "filename": event.filename,
                "line": event.line,
                "phase": event.phase,
                "compile_id": event.compile_id,
                "thread": event.thread,
                "user_code": _where(event.user_code),
                "reasons": [
                    {"compile_id": reason.compile_id, "guard": reason.guard, "source": reason.source}
                    for reason in event.reasons
                ],
            }
            for event in record.events
        ],
        limit_hits=[
            {"limit_name": hit.limit_name, "limit": hit.limit, "function": hit.function, "phase": hit.phase}
            for hit in record.limit_hits
        ],
        graph_break_events=[
            {
                "filename": event.filename,
                "line": event.line,
                "phase": event.phase,
                "reason": event.reason,
                "explanation": event.explanation,
                "user_code": _where(event.user_code),
            }
            for event in record.graph_breaks
        ],
    )


def idle_entry(budget: RecompileBudget) -> dict[str, Any]:
    """The entry of a test that ran before anything imported torch: nothing can have compiled."""
    return _entry(budget, compiles=0, recompiles=0, graph_breaks=0, over_budget=False,
                  recompile_events=[], limit_hits=[], graph_break_events=[])


def _entry(
    budget: RecompileBudget,
    *,
    compiles: int,
    recompiles: int,
    graph_breaks: int,
    over_budget: bool,
    recompile_events: list[dict[str, Any]],
    limit_hits: list[dict[str, Any]],
    graph_break_events: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "compiles": compiles,
        "recompiles": recompiles,
        "graph_breaks": graph_breaks,
        "max_recompiles": budget.max_recompiles,
        "max_graph_breaks": budget.max_graph_breaks,
        "verdict": "over budget" if over_budget else "within budget" if budget.budgeted else "no budget",
        "recompile_events": recompile_events,
        "recompile_limit_hits": limit_hits,
        "graph_break_events": graph_break_events,
    }


def count_properties(entry: dict[str, Any]) -> list[tuple[str, int]]:
    """The counts as ``user_properties`` (and so junit XML ``<property>`` elements)."""
    return [(name, entry[name.removeprefix("nocompile_")]) for name in COUNT_PROPERTIES]


def summary_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """The terminal table: tests that compiled (or went over budget), worst first."""
    shown = [(nodeid, entry) for nodeid, entry in results.items() if entry["compiles"] or entry["verdict"] == "over budget"]
    if not shown:
        return [f"no test compiled ({len(results)} watched)"]

    def badness(item: tuple[str, dict[str, Any]]) -> tuple[int, int, int, str]:
        nodeid, entry = item
        return (entry["verdict"] != "over budget", -entry["recompiles"], -entry["graph_breaks"], nodeid)

    rows = [("compiles", "recompiles", "graph breaks", "budget", "verdict", "test")]
    for nodeid, entry in sorted(shown, key=badness):
        rows.append((
            str(entry["compiles"]),
            str(entry["recompiles"]),
            str(entry["graph_breaks"]),
            _budget_text(entry),
            entry["verdict"],
            nodeid,
        ))
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    table = ["  ".join(cell.rjust(width) if column < 3 else cell.ljust(width) for column, (cell, width) in enumerate(zip(row[:5], widths))) + "  " + row[5] for row in rows]
    over = [(nodeid, entry) for nodeid, entry in sorted(shown, key=badness) if entry["verdict"] == "over budget"]
    return table + [f"{nodeid}: {first_cause(entry)}" for nodeid, entry in over]


def first_cause(entry: dict[str, Any]) -> str:
    """The first thing that put a test over budget: a recompile's guard, or a graph break's reason."""
    for event in entry["recompile_events"]:
        if event["phase"] == "call" and event["reasons"]:
            reason = event["reasons"][0]
            prefix = f"{reason['compile_id']}: " if reason["compile_id"] else ""
            return f"{event['function']} recompiled: {prefix}{reason['guard'].splitlines()[0]}"
    for event in entry["graph_break_events"]:
        if event["phase"] == "call":
            return f"graph break: {event['reason']}"
    if entry["recompile_limit_hits"]:
        return "dynamo hit its recompile limit"
    return "over budget"


def _budget_text(entry: dict[str, Any]) -> str:
    parts = []
    if entry["max_recompiles"] is not None:
        parts.append(f"recompiles<={entry['max_recompiles']}")
    if entry["max_graph_breaks"] is not None:
        parts.append(f"breaks<={entry['max_graph_breaks']}")
    return ", ".join(parts) or "-"


def json_document(
    results: dict[str, dict[str, Any]], outcomes: dict[str, list[tuple[str, str, bool]]], versions: dict[str, str]
) -> dict[str, Any]:
    """The JSON report: each test's entry with its outcome (from ``outcomes``, its reports that were not plain passes)."""
    return {
        "format": JSON_FORMAT,
        **versions,
        "tests": [{"nodeid": nodeid, "outcome": outcome_of(outcomes.get(nodeid, ())), **entry} for nodeid, entry in results.items()],
    }


def write_json_atomically(path: str, document: Any) -> None:
    """Write to a temporary file beside ``path`` and rename: readers never see half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".nocompile-", suffix=".json", dir=folder)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(document, out, indent=2, sort_keys=False)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def check_writable(path: str) -> Optional[str]:
    """Why ``path`` cannot be written, or None."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        return f"{path} is a directory"
    if not os.path.isdir(folder):
        return f"folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"folder {folder} is not writable"
    return None


def outcome_of(outcomes: Iterable[tuple[str, str, bool]]) -> str:
    """A test's outcome from its reports' (when, outcome, was_xfail): pytest's own words."""
    result = "passed"
    for when, outcome, was_xfail in outcomes:
        if outcome == "failed":
            return "error" if when != "call" else "failed"
        if outcome == "skipped":
            result = "xfailed" if was_xfail else "skipped"
        elif was_xfail and when == "call":
            result = "xpassed"
    return result

