"""Baselines of per-test counts, and the comparison that gates pull requests. Pure code.

Which counts a baseline holds and gates comes from the budget kinds' table.
A baseline written before a kind existed lacks its key: that kind is then not
compared for that test, so older baselines keep working.

A baseline holds counts only; a count that rose is explained by the test's
own recorded events of this run (function, guard, user line), as the result
carries them for the JSON report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..kinds import KINDS, KINDS_BY_KEY
from ..measures import plural

if TYPE_CHECKING:
    from ..result import TestResult

BASELINE_FORMAT = "pytest-nocompile-baseline/1"
GATED = tuple(kind.key for kind in KINDS if kind.gated_by_baseline)
EVENTS_SHOWN = 5  # per test that rose: enough to act on; the JSON report lists every one


class BaselineError(ValueError):
    """The baseline file is missing, unreadable or of another format."""


def baseline_document(results: dict[str, TestResult]) -> dict[str, Any]:
    return {
        "format": BASELINE_FORMAT,
        "tests": {nodeid: {key: result.counts[key] for key in GATED} for nodeid, result in sorted(results.items())},
    }


def load_baseline(path: str) -> dict[str, dict[str, int]]:
    try:
        with open(path) as source:
            document = json.load(source)
    except FileNotFoundError:
        raise BaselineError(f"baseline {path} does not exist (write one with --nocompile-save={path})") from None
    except (OSError, ValueError) as error:
        raise BaselineError(f"baseline {path} is not readable JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != BASELINE_FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise BaselineError(f"baseline {path} has format {found!r}, expected {BASELINE_FORMAT!r}")
    tests = document.get("tests")
    if not isinstance(tests, dict) or not all(
        isinstance(counts, dict)
        and any(key in counts for key in GATED)
        and all(isinstance(counts[key], int) and not isinstance(counts[key], bool) for key in GATED if key in counts)
        for counts in tests.values()
    ):
        raise BaselineError(f"baseline {path} is corrupt: 'tests' must map node ids to counts ({', '.join(GATED)})")
    return tests


@dataclass
class Comparison:
    """How this run's counts stand against a baseline."""

    increased: list[tuple[str, str, int, int]] = field(default_factory=list)  # nodeid, what, before, now
    decreased: list[tuple[str, str, int, int]] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # in the baseline, not run here (a -k subset, or gone)
    explained: dict[str, list[str]] = field(default_factory=dict)  # nodeid: the lines naming what made its counts rise

    @property
    def regressed(self) -> bool:
        return bool(self.increased)

    def lines(self) -> list[str]:
        lines = []
        for nodeid, changes in _by_test(self.increased).items():
            lines.append(f"{nodeid}: " + ", ".join(f"{what.replace('_', ' ')} rose {before} -> {now}" for what, before, now in changes))
            lines += self.explained.get(nodeid, [])
        lines += [f"{nodeid}: " + ", ".join(f"{what.replace('_', ' ')} fell {before} -> {now}" for what, before, now in changes)
                  for nodeid, changes in _by_test(self.decreased).items()]
        lines += [f"new test (not in baseline): {nodeid}" for nodeid in self.new]
        if self.removed:  # one line: a -k subset leaves most of the baseline out
            lines.append(f"{plural(len(self.removed), 'test')} of the baseline did not run here "
                         "(deselected, not collected, or removed): not compared")
        return lines or ["no change against the baseline"]

    def verdict(self, path: str) -> str:
        """What rose, in one line, for the run's last line."""
        tests = len({nodeid for nodeid, *_ in self.increased})
        return (f"{plural(len(self.increased), 'count')} rose against the baseline {path}, "
                f"in {plural(tests, 'test')} (listed above)")


def _by_test(changes: list[tuple[str, str, int, int]]) -> dict[str, list[tuple[str, int, int]]]:
    grouped: dict[str, list[tuple[str, int, int]]] = {}
    for nodeid, what, before, now in changes:
        grouped.setdefault(nodeid, []).append((what, before, now))
    return grouped


def compare(baseline: dict[str, dict[str, int]], results: dict[str, TestResult]) -> Comparison:
    comparison = Comparison()
    for nodeid, result in sorted(results.items()):
        before = baseline.get(nodeid)
        if before is None:
            comparison.new.append(nodeid)
            continue
        rose = []
        for key in GATED:
            if key not in before:  # a kind newer than this baseline
                continue
            now = int(result.counts[key])  # gated kinds are counts
            if now > before[key]:
                comparison.increased.append((nodeid, key, before[key], now))
                rose.append(key)
            elif now < before[key]:
                comparison.decreased.append((nodeid, key, before[key], now))
        if rose:
            comparison.explained[nodeid] = explain_rise(result, rose)
    comparison.removed = sorted(set(baseline) - set(results))
    return comparison


def explain_rise(result: TestResult, rose: list[str]) -> list[str]:
    """The call-phase events behind the kinds that rose, a line or two each: function, guard and the user's line."""
    sources = {source for key in rose for source in KINDS_BY_KEY[key].explained_by}
    signals = {signal for key in rose for signal in KINDS_BY_KEY[key].signals}
    events = [("recompiles", event) for event in result.details["recompile_events"] if "recompiles" in sources] + \
             [("graph_breaks", event) for event in result.details["graph_break_events"] if "graph_breaks" in sources] + \
             [("health", event) for event in result.details["health_events"] if event["what"] in signals]
    called = [(source, event) for source, event in events if event.get("phase") == "call"]  # what the counts count
    lines: list[str] = []
    for source, event in called[:EVENTS_SHOWN]:
        lines += _LINES[source](event)
    if len(called) > EVENTS_SHOWN:
        lines.append(f"    and {len(called) - EVENTS_SHOWN} more (--nocompile-json=PATH writes every one)")
    return lines


def _recompile_lines(event: dict[str, Any]) -> list[str]:
    from ..events import GuardFailure, code_place

    reasons = event.get("reasons") or []
    if reasons:
        first = reasons[0]
        guard = (str(GuardFailure(first["guard"], first.get("compile_id"))).splitlines() or [""])[0]
        more = f" (and {plural(len(reasons) - 1, 'other failed guard')})" if len(reasons) > 1 else ""
    else:
        guard, more = "(torch gave no reason)", ""
    lines = [f"    {_process_prefix(event)}recompiled {code_place(event['function'], event['filename'], event['line'])}: "
             f"guard failed: {guard}{more}"]
    if event.get("user_code"):
        lines.append(f"        triggered by: {event['user_code']}")
    return lines


def _graph_break_lines(event: dict[str, Any]) -> list[str]:
    from ..events import display_path

    lines = [f"    {_process_prefix(event)}graph break at {display_path(event['filename'])}:{event['line']}: {event['reason']}"]
    if event.get("user_code"):
        lines.append(f"        user code: {event['user_code']}")
    return lines


def _health_lines(event: dict[str, Any]) -> list[str]:
    amount = "" if event["amount"] == 1 else f" ({event['amount']:g})"
    reason = f": {event['reason']}" if event.get("reason") else ""
    lines = [f"    {_process_prefix(event)}{event['what']}{amount}{reason}"]
    if event.get("user_code"):
        lines.append(f"        triggered by: {event['user_code']}")
    return lines


_LINES = {"recompiles": _recompile_lines, "graph_breaks": _graph_break_lines, "health": _health_lines}


def _process_prefix(event: dict[str, Any]) -> str:
    """``rank 1 (pid 4242): `` for an event of a child process; nothing for the test's own."""
    process = event.get("process")
    if not process:
        return ""
    from ..result import process_label

    return f"{process_label(process)}: "
