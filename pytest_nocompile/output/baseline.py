"""Baselines of per-test counts, and the comparison that gates pull requests. Pure code.

Which counts a baseline holds and gates comes from the budget kinds' table.
A baseline written before a kind existed lacks its key: that kind is then not
compared for that test, so older baselines keep working.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..budget import KINDS

if TYPE_CHECKING:
    from ..result import TestResult

BASELINE_FORMAT = "pytest-nocompile-baseline/1"
GATED = tuple(kind.key for kind in KINDS if kind.gated_by_baseline)


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
    removed: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return bool(self.increased)

    def lines(self) -> list[str]:
        lines = [f"{nodeid}: {what.replace('_', ' ')} rose {before} -> {now}" for nodeid, what, before, now in self.increased]
        lines += [f"{nodeid}: {what.replace('_', ' ')} fell {before} -> {now}" for nodeid, what, before, now in self.decreased]
        lines += [f"new test (not in baseline): {nodeid}" for nodeid in self.new]
        lines += [f"removed test (only in baseline): {nodeid}" for nodeid in self.removed]
        return lines or ["no change against the baseline"]


def compare(baseline: dict[str, dict[str, int]], results: dict[str, TestResult]) -> Comparison:
    comparison = Comparison()
    for nodeid, result in sorted(results.items()):
        before = baseline.get(nodeid)
        if before is None:
            comparison.new.append(nodeid)
            continue
        for key in GATED:
            if key not in before:  # a kind newer than this baseline
                continue
            now = result.counts[key]
            if now > before[key]:
                comparison.increased.append((nodeid, key, before[key], now))
            elif now < before[key]:
                comparison.decreased.append((nodeid, key, before[key], now))
    comparison.removed = sorted(set(baseline) - set(results))
    return comparison
