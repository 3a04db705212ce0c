"""The terminal table and the JSON report, from each test's :class:`~.result.TestResult`. Pure code.

A test's result is made where the test ran (an xdist worker too) and carried
on its teardown report as :meth:`~.result.TestResult.to_dict`, so the
controller sees every test.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import TYPE_CHECKING, Any, Iterable, Optional

from ..budget import COMPILES, KINDS

if TYPE_CHECKING:  # at run time this module imports no event or record module
    from ..result import TestResult

JSON_FORMAT = "pytest-nocompile-report/1"


def summary_lines(results: dict[str, TestResult]) -> list[str]:
    """The terminal table: tests with any count (or over budget), worst first, then each one's cause."""
    from ..result import Verdict

    # Any count: a frame that only broke compiles no graph, but its graph breaks count.
    shown = [(nodeid, result) for nodeid, result in results.items() if any(result.counts.values()) or result.verdict is Verdict.OVER]
    if not shown:
        return [f"no test compiled ({len(results)} watched)"]

    # Worst first: over budget, then most recompiles and graph breaks; every test here compiled.
    worst_first = [kind for kind in KINDS if kind is not COMPILES] + [COMPILES]

    def badness(item: tuple[str, TestResult]) -> tuple[object, ...]:
        nodeid, result = item
        return (result.verdict is not Verdict.OVER, *(-result.counts[kind.key] for kind in worst_first), nodeid)

    shown.sort(key=badness)
    rows = [(*(kind.column for kind in KINDS), "budget", "verdict", "test")]
    for nodeid, result in shown:
        rows.append((*(str(result.counts[kind.key]) for kind in KINDS), result.budget_text(), result.verdict.value, nodeid))
    counts = len(KINDS)
    widths = [max(len(row[column]) for row in rows) for column in range(counts + 2)]
    table = [
        "  ".join(cell.rjust(width) if column < counts else cell.ljust(width) for column, (cell, width) in enumerate(zip(row, widths)))
        + "  " + row[-1]
        for row in rows
    ]
    return table + [f"{nodeid}: {result.cause}" for nodeid, result in shown if result.verdict is Verdict.OVER]


def json_document(
    results: dict[str, TestResult], outcomes: dict[str, list[tuple[str, str, bool]]], versions: dict[str, str]
) -> dict[str, Any]:
    """The JSON report: each test's result with its outcome (from ``outcomes``, its reports that were not plain passes)."""
    return {
        "format": JSON_FORMAT,
        **versions,
        "tests": [
            {"nodeid": nodeid, "outcome": outcome_of(outcomes.get(nodeid, ())), **result.to_dict()}
            for nodeid, result in results.items()
        ],
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

