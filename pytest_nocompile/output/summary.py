"""The terminal table, from each test's :class:`~.result.TestResult` (the JSON report:
:mod:`.json_report`). Pure code.

A test's result is made where the test ran (an xdist worker too) and carried
on its teardown report as :meth:`~.result.TestResult.to_dict`, so the
controller sees every test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..vocabulary.kinds import COMPILES, COUNTED_KINDS, KINDS, BudgetKind
from ..vocabulary.measures import plural

if TYPE_CHECKING:  # at run time this module imports no event or record module
    from ..judge.result import TestResult

# Which tests the table lists; "auto" lists only failures once more than
# LONG_TABLE tests would be listed: a CI run budgeting every test would
# otherwise list every test that compiled.
TABLE_CHOICES = ("auto", "failures", "all")
LONG_TABLE = 20


def summary_lines(results: dict[str, TestResult], table: str = "auto") -> list[str]:
    """The terminal table: tests with any count (or over budget), worst
    first, then each one's cause.

    ``table`` is one of :data:`TABLE_CHOICES`. Tests whose fixtures recompiled or broke
    graphs outside the call phase, which no budget counts, are named after the table
    when it does not list them.
    """

    # Any count: a frame that only broke compiles no graph, but its graph breaks count.
    compiled = [(nodeid, result) for nodeid, result in results.items()
                if any(result.counts.values()) or result.failed]
    outside = _outside_the_call(results, {nodeid for nodeid, _ in compiled})
    # a fixture every test uses: one line, not one a test
    if len(outside) > LONG_TABLE and table != "all":
        outside = [f"{plural(len(outside), 'test')} recompiled or broke graphs only outside the "
                   "call (in fixtures), not counted (--nocompile-table=all lists them)"]
    if not compiled:
        return [f"no test compiled in its call phase ({len(results)} watched)", *outside]
    failures_only = table == "failures" or (table == "auto" and len(compiled) > LONG_TABLE)
    shown = ([(nodeid, result) for nodeid, result in compiled if result.failed] if failures_only
             else compiled)
    hidden = len(compiled) - len(shown)
    if not shown:
        return [f"no test over budget; {plural(hidden, 'test')} compiled within budget or without "
                "one (--nocompile-table=all lists them)", *outside]

    # Worst first: over budget, then most recompiles and graph breaks; every test here compiled.
    worst_first = [kind for kind in COUNTED_KINDS if kind is not COMPILES] + [COMPILES]

    def badness(item: tuple[str, TestResult]) -> tuple[object, ...]:
        nodeid, result = item
        return (not result.failed, *(-result.counts.get(kind.key, 0) for kind in worst_first),
                nodeid)

    shown.sort(key=badness)
    columns = _columns(shown)
    rows = [(*(header for header, _ in columns), "budget", "verdict", "test")]
    rows += [(*(cell(result) for _, cell in columns), result.budget_text(), result.verdict.value,
              nodeid) for nodeid, result in shown]
    counts = len(columns)
    widths = [max(len(row[column]) for row in rows) for column in range(counts + 2)]
    lines = [
        "  ".join(cell.rjust(width) if column < counts else cell.ljust(width)
                  for column, (cell, width) in enumerate(zip(row, widths)))
        + "  " + row[-1]
        for row in rows
    ]
    if hidden:
        why = (f"only failures are listed once more than {LONG_TABLE} tests compiled"
               if table == "auto" else "--nocompile-table=failures")
        lines.append(f"and {plural(hidden, 'more test')} that compiled within budget or without "
                     f"one, not listed: {why} (--nocompile-table=all lists every one)")
    return (lines + [f"{nodeid}: {result.cause}" for nodeid, result in shown if result.failed]
            + outside)


def _columns(shown: list[tuple[str, TestResult]]) -> list[tuple[str, Callable[[TestResult], str]]]:
    """Each column's header and cell: the counts every test has, then a
    compile-health kind's only where a listed test has one or a budget for
    it (a kind every compile has, compile time, only where one budgets
    it); then what a kind only shows beside its count (cache hits), where
    a listed test has any."""
    from ..judge.result import shows

    columns = [(kind.column, _count_cell(kind)) for kind in COUNTED_KINDS
               if any(shows(kind, result) for _, result in shown)]
    columns += [(kind.shown_column, _shown_cell(kind)) for kind in KINDS
                if kind.shown_column and any(_shown_total(kind, result) for _, result in shown)]
    return columns


def _count_cell(kind: BudgetKind) -> Callable[[TestResult], str]:
    # A kind not measured where the test ran (syncs without CUDA), or not read in it (compile
    # time before the first test that budgets it), has no count: never a 0 that reads as a pass.
    # A count some of which could not be seen (syncs of torch's C++ code) is at least what it
    # says: ">=".
    return lambda result: "n/a" if kind.key in result.unmeasured else (
        (">=" if kind.key in result.lower_bounds else "")
        + kind.measure.cell(result.counts.get(kind.key, 0)))


def _shown_cell(kind: BudgetKind) -> Callable[[TestResult], str]:
    # What a kind shows beside its count (cache hits) is read with it: not read, no figure either.
    return lambda result: ("n/a" if kind.key in result.unmeasured
                           else kind.measure.cell(_shown_total(kind, result)))


def _shown_total(kind: BudgetKind, result: TestResult) -> float:
    """The call phase's total of the signals a kind shows beside its count, in every process
    (the result's, by signal)."""
    return sum(result.shown.get(kind.key, {}).values())


def _outside_the_call(results: dict[str, TestResult], listed: set[str]) -> list[str]:
    """A line per test not in the table whose setup or teardown (its fixtures) recompiled or
    broke graphs: not counted."""
    lines = []
    # By id of a result: what it says ("" for nothing). Tests that recorded nothing share one
    # result, read once.
    said_by_result: dict[int, str] = {}
    for nodeid, result in results.items():
        if nodeid in listed:
            continue
        said = said_by_result.get(id(result))
        if said is None:
            said = said_by_result[id(result)] = _said_outside_the_call(result)
        if said:
            lines.append(f"{nodeid}: {said}, not counted (budgets count the call phase; a "
                         "fixture's compiles are outside it)")
    return lines


def _said_outside_the_call(result: TestResult) -> str:
    """How many recompiles and graph breaks the test had in each phase but its call (e.g.
    ``1 recompile in setup``), or "" for none."""
    # A plain dict, not a Counter: nearly every test has no such event.
    found: dict[tuple[str, str], int] = {}  # (what, phase): how many
    for what, key in (("recompile", "recompile_events"), ("graph break", "graph_break_events")):
        for event in result.details[key]:
            if event.get("phase") != "call":
                found[what, event["phase"]] = found.get((what, event["phase"]), 0) + 1
    return ", ".join(f"{plural(count, what)} in {phase}" for (what, phase), count in found.items())
