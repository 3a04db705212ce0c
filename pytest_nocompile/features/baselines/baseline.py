"""Baselines of per-test counts and reasons, and the comparison that gates pull requests. Pure code.

A baseline (format 2) holds, per torch ``major.minor``, each test's gated
counts (which kinds, from the budget kinds' table) and the reasons behind
them (:mod:`.reasons`: what recompiled and which class of guard failed,
each graph break's kind). A run compares with its own torch's entries, else
the nearest older torch's (else the nearest newer), and says which. Saving
writes the entries of the tests that ran, for the torch that ran: it keeps
the other torch versions' entries, so one file serves a suite that runs on
several torch versions, and this torch's entries of tests that did not run
(a subset, a shard) or failed (unless asked), so no test loses its entry
without the save's line saying so.

A count that rose, or a reason that is new, fails the run; a reason that is
gone, a count that fell, a new test are reported only. A baseline of format 1
(counts only, any torch) still loads, and is compared on its counts; a kind
newer than the baseline is not compared for its tests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Optional, Sequence

from ...judge.installed_versions import major_minor
from ...vocabulary.kinds import KINDS, KINDS_BY_KEY, BudgetKind, Selection
from ...vocabulary.measures import plural
from .reasons import call_reasons, reasons_with_events

if TYPE_CHECKING:
    from ...judge.result import TestResult

BASELINE_FORMAT = "pytest-nocompile-baseline/2"
# written before reasons and torch versions; still read
COUNTS_ONLY_FORMAT = "pytest-nocompile-baseline/1"
def _gated(kinds: Sequence[BudgetKind]) -> tuple[str, ...]:
    return tuple(kind.key for kind in kinds if kind.gated_by_baseline)


# The keys of the counts a baseline keeps and gates (those of kinds gated by baselines).
GATED = Selection(KINDS, _gated)
EVENTS_SHOWN = 5  # per test that rose: enough to act on; the JSON report lists every one
ANY_TORCH = ""  # the one version key of a counts-only baseline

# node id: {gated kind key: count, ..., "reasons": [reason, ...]}
Entries = dict[str, dict[str, Any]]


class BaselineError(ValueError):
    """The baseline file is missing, unreadable or of another format."""


@dataclass
class Baseline:
    """A baseline file as read: its entries by torch ``major.minor``
    (:data:`ANY_TORCH` alone for format 1)."""

    versions: dict[str, Entries]
    counts_only: bool = False  # format 1: no reasons, and one set of entries for every torch


def torch_minor(version: str) -> str:
    """``2.13`` for ``2.13.0+cpu``; the text as given where it is no version (``not installed``)."""
    found = major_minor(version)
    return f"{found[0]}.{found[1]}" if found else version


def _version_key(minor: str) -> tuple[int, ...]:
    """How a baseline's torch versions sort: ``2.9`` before ``2.13``; a key that
    is no ``X.Y`` is (-1,)."""
    return (major_minor(minor) if re.fullmatch(r"\d+\.\d+", minor) else None) or (-1,)


def baseline_entry(counts: Mapping[str, Any],
                   details: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """What a baseline keeps of one test, from its counts and its events' details (a result's, or a
    JSON report's test): its gated counts and the reasons behind them."""
    return {**{key: counts.get(key) for key in GATED}, "reasons": call_reasons(details)}


@dataclass
class SavedBaseline:
    """What a save writes (``document``), and for the line that says so, what it did with this
    torch's entries."""

    document: dict[str, Any]
    torch: str  # the torch major.minor whose entries it wrote
    saved: int  # tests of the run whose entries it wrote
    kept: int = 0  # entries of tests that did not run (skipped, deselected, not collected), kept
    dropped: int = 0  # entries of tests not in the run, dropped (asked to replace)
    failed: int = 0  # tests that failed, not saved (an entry they had is kept)

    def line(self, path: str) -> str:
        """``nocompile: baseline PATH (torch 2.13): 7 tests saved, 6 kept (not run)``: one line,
        of what is not 0."""
        parts = [f"{plural(self.saved, 'test')} saved"]
        parts += [f"{self.kept} kept (not run)"] if self.kept else []
        parts += [f"{self.dropped} dropped (not run)"] if self.dropped else []
        parts += [f"{self.failed} not saved (failed)"] if self.failed else []
        return f"nocompile: baseline {path} (torch {self.torch}): {', '.join(parts)}"


def saved_baseline(
    results: Mapping[str, TestResult], torch_version: str, previous: Optional[Baseline] = None,
    failed: Collection[str] = (), skipped: Collection[str] = (), replace: bool = False,
) -> SavedBaseline:
    """The file a save writes: this torch's entries from ``results``, over ``previous``'s.

    Of ``previous``, it keeps the other torch versions' entries, the ``failed`` tests' (which it
    does not save), the ``skipped`` tests' (saved where they had none) and, unless ``replace``, the
    entries of tests not in ``results`` (deselected, not collected, or gone). A counts-only
    baseline's entries are kept as this torch's.
    """
    mine = torch_minor(torch_version)
    versions = {} if previous is None or previous.counts_only else dict(previous.versions)
    before: Entries = {}
    if previous is not None:
        before = previous.versions.get(ANY_TORCH if previous.counts_only else mine, {})
    not_saved = {nodeid for nodeid in failed if nodeid in results}
    # A skipped test did not run either: its entry stands, where it has one.
    skipped_kept = {nodeid for nodeid in skipped if nodeid in results and nodeid in before}
    skipped_kept -= not_saved
    absent = {nodeid: entry for nodeid, entry in before.items() if nodeid not in results}
    entries = {} if replace else dict(absent)
    held = not_saved | skipped_kept  # in the run, but their entries stand
    entries.update((nodeid, before[nodeid]) for nodeid in held if nodeid in before)
    written = {nodeid: result for nodeid, result in results.items() if nodeid not in held}
    entries.update((nodeid, baseline_entry(result.counts, result.details))
                   for nodeid, result in written.items())
    versions[mine] = entries
    kept, dropped = (0, len(absent)) if replace else (len(absent), 0)
    return SavedBaseline(document_of(Baseline(versions)), mine, saved=len(written),
                         kept=kept + len(skipped_kept), dropped=dropped, failed=len(not_saved))


def document_of(baseline: Baseline) -> dict[str, Any]:
    """A baseline as JSON, sorted (torch versions oldest first; written one count or
    reason a line): saving the same results again writes the same bytes, and a change
    reads as a diff in code review."""
    if baseline.counts_only:
        return {"format": COUNTS_ONLY_FORMAT,
                "tests": dict(sorted(baseline.versions.get(ANY_TORCH, {}).items()))}
    return {"format": BASELINE_FORMAT,
            "torch": {minor: dict(sorted(entries.items()))
                      for minor, entries in sorted(baseline.versions.items(),
                                                   key=lambda item: _version_key(item[0]))}}


def previous_baseline(path: str) -> Optional[Baseline]:
    """The baseline a save is about to write over, whose entries it keeps; None where there is none
    (no file, or not a baseline: the save writes it anew)."""
    try:
        return load_baseline(path)
    except BaselineError:
        return None


def load_baseline(path: str) -> Baseline:
    try:
        with open(path) as source:
            document = json.load(source)
    except FileNotFoundError:
        raise BaselineError(f"baseline {path} does not exist (write one with "
                            f"--nocompile-save={path})") from None
    except (OSError, ValueError) as error:
        raise BaselineError(f"baseline {path} is not readable JSON: {error}") from None
    return baseline_from_document(document, path)


def baseline_from_document(document: Any, path: str) -> Baseline:
    """A baseline from its parsed JSON, checked: a :class:`BaselineError` names what is wrong."""
    found = document.get("format") if isinstance(document, dict) else type(document).__name__
    if found == COUNTS_ONLY_FORMAT:
        tests = document.get("tests")
        if not _valid_entries(tests):
            raise BaselineError(f"baseline {path} is corrupt: 'tests' must map node ids to counts "
                                f"({', '.join(GATED)})")
        return Baseline({ANY_TORCH: tests}, counts_only=True)
    if found != BASELINE_FORMAT:
        raise BaselineError(f"baseline {path} has format {found!r}, expected {BASELINE_FORMAT!r} "
                            f"(or {COUNTS_ONLY_FORMAT!r})")
    versions = document.get("torch")
    if not isinstance(versions, dict) or not all(
        isinstance(minor, str) and _version_key(minor) != (-1,) and _valid_entries(entries)
        for minor, entries in versions.items()
    ):
        raise BaselineError(f"baseline {path} is corrupt: 'torch' must map torch versions "
                            f"(2.13) to node ids to counts ({', '.join(GATED)}) and 'reasons' "
                            "(a list of text)")
    return Baseline(versions)


def _valid_entries(tests: object) -> bool:
    return isinstance(tests, dict) and all(
        isinstance(entry, dict)
        and any(key in entry for key in GATED)
        and all(isinstance(entry[key], int) and not isinstance(entry[key], bool) for key in GATED
                if key in entry)
        and (isinstance(entry.get("reasons", []), list)
             and all(isinstance(reason, str) for reason in entry.get("reasons", [])))
        for entry in tests.values()
    )


def entries_for(baseline: Baseline, torch_version: str) -> tuple[Entries, str]:
    """The entries a run on ``torch_version`` compares with, and the line that says which."""
    if baseline.counts_only:
        return (baseline.versions[ANY_TORCH],
                ("counts only (a baseline of format 1, for any torch): reasons are not compared; "
                 "save it again to gate on reasons"))
    mine = torch_minor(torch_version)
    if mine in baseline.versions:
        return baseline.versions[mine], f"compared with the entries for torch {mine}"
    if not baseline.versions:
        return {}, "the baseline holds no entries"
    older = [minor for minor in baseline.versions if _version_key(minor) < _version_key(mine)]
    if older:
        nearest = max(older, key=_version_key)
        return (baseline.versions[nearest],
                f"no entries for torch {mine}: compared with torch {nearest}'s, the nearest older")
    nearest = min(baseline.versions, key=_version_key)
    return (baseline.versions[nearest], f"no entries for torch {mine} or older: compared with "
                                        f"torch {nearest}'s, the nearest newer")


@dataclass
class Comparison:
    """How this run's counts and reasons stand against a baseline."""

    # nodeid, what, before, now
    increased: list[tuple[str, str, int, int]] = field(default_factory=list)
    decreased: list[tuple[str, str, int, int]] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    # in the baseline, not run here (a -k subset, another shard, or gone)
    removed: list[str] = field(default_factory=list)
    # nodeid: the lines naming what made its counts rise
    explained: dict[str, list[str]] = field(default_factory=dict)
    # nodeid: each new reason, and the lines on where it came from
    new_reasons: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)
    # nodeid: reasons of the baseline not seen here
    gone_reasons: dict[str, list[str]] = field(default_factory=dict)
    # nodeid: the structured trace kept of a test that regressed
    traces: dict[str, str] = field(default_factory=dict)
    entries: str = ""  # which torch's entries were compared with

    @property
    def regressed(self) -> bool:
        return bool(self.increased or self.new_reasons)

    def lines(self) -> list[str]:
        lines = [self.entries] if self.entries else []
        rose = _by_test(self.increased, "rose")
        for nodeid in sorted(rose.keys() | self.new_reasons.keys()):
            if nodeid in rose:
                lines.append(f"{nodeid}: " + ", ".join(rose[nodeid]))
                # else its new reasons, below, show where they came from
                if nodeid not in self.new_reasons:
                    lines += self.explained.get(nodeid, [])
            for reason, explained in self.new_reasons.get(nodeid, []):
                lines += [f"{nodeid}: new reason: {reason}", *explained]
            if nodeid in self.traces:
                lines.append(f"    trace: {self.traces[nodeid]}")
        lines += [f"{nodeid}: " + ", ".join(changes)
                  for nodeid, changes in _by_test(self.decreased, "fell").items()]
        lines += [f"{nodeid}: reason gone: {reason}"
                  for nodeid, reasons in sorted(self.gone_reasons.items()) for reason in reasons]
        lines += [f"new test (not in baseline): {nodeid}" for nodeid in self.new]
        if self.removed:  # one line: a -k subset or another shard leaves most of the baseline out
            lines.append(f"{plural(len(self.removed), 'test')} of the baseline did not run here "
                         "(deselected, not collected, run by another shard, or "
                         "removed): not compared")
        return (lines if len(lines) > bool(self.entries)
                else [*lines, "no change against the baseline"])

    def regressions(self) -> dict[str, list[str]]:
        """By test, what failed it against the baseline, a line each (``recompiles rose 0 -> 2``,
        ``new reason: ...``): what the JSON report's entry of each such test holds."""
        found = _by_test(self.increased, "rose")
        for nodeid, reasons in self.new_reasons.items():
            found.setdefault(nodeid, []).extend(f"new reason: {reason}" for reason, _ in reasons)
        return found

    def verdict(self, path: str) -> str:
        """What rose or is new, in one line, for the run's last line."""
        tests = len({nodeid for nodeid, *_ in self.increased} | self.new_reasons.keys())
        new = sum(len(reasons) for reasons in self.new_reasons.values())
        what = [plural(len(self.increased), "count") + " rose"] if self.increased else []
        what += [plural(new, "new reason")] if new else []
        return (f"{' and '.join(what)} against the baseline {path}, in {plural(tests, 'test')} "
                "(listed above)")


def _by_test(changes: list[tuple[str, str, int, int]], verb: str) -> dict[str, list[str]]:
    """By test, a line per count that changed: ``recompiles rose 0 -> 2``."""
    grouped: dict[str, list[str]] = {}
    for nodeid, what, before, now in changes:
        grouped.setdefault(nodeid, []).append(f"{what.replace('_', ' ')} {verb} {before} -> {now}")
    return grouped


def compare(baseline: Baseline, results: dict[str, TestResult], torch_version: str) -> Comparison:
    entries, which = entries_for(baseline, torch_version)
    comparison = Comparison(entries=which)
    for nodeid, result in sorted(results.items()):
        before = entries.get(nodeid)
        if before is None:
            comparison.new.append(nodeid)
        elif _compare_test(comparison, nodeid, before, result) and result.trace is not None:
            comparison.traces[nodeid] = result.trace
    comparison.removed = sorted(set(entries) - set(results))
    return comparison


def regression_check(baseline: Baseline, torch_version: str) -> Callable[[str, TestResult], bool]:
    """Whether one test's result fails against its entry (a count rose, a reason is new), as the
    run's comparison will judge it: for a process that has to decide when the test ends (keep its
    trace), before the run's results are in."""
    entries, _ = entries_for(baseline, torch_version)

    def regressed(nodeid: str, result: TestResult) -> bool:
        before = entries.get(nodeid)
        return before is not None and _compare_test(Comparison(), nodeid, before, result)

    return regressed


def _compare_test(comparison: Comparison, nodeid: str, before: dict[str, Any],
                  result: TestResult) -> bool:
    """One test's counts and reasons against its entry, into ``comparison``;
    whether they regressed."""
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
    if "reasons" in before:  # else an entry of counts only
        _compare_reasons(comparison, nodeid, set(before["reasons"]), result)
    return bool(rose) or nodeid in comparison.new_reasons


def _compare_reasons(comparison: Comparison, nodeid: str, before: set[str],
                     result: TestResult) -> None:
    """A reason the baseline lacks fails the test, shown with the event it came from; one it has
    that did not come is reported."""
    now: dict[str, tuple[dict[str, Any], Optional[dict[str, Any]]]] = {}
    for reason, event, guard in reasons_with_events(result.details):
        # the first event of each reason: where it first came from
        now.setdefault(reason, (event, guard))
    new = [(reason, (_recompile_lines(*now[reason]) if now[reason][1] is not None
                     else _graph_break_lines(now[reason][0])))
           for reason in sorted(now.keys() - before)]
    if new:
        comparison.new_reasons[nodeid] = new
    gone = sorted(before - now.keys())
    if gone:
        comparison.gone_reasons[nodeid] = gone


def explain_rise(result: TestResult, rose: list[str]) -> list[str]:
    """The call-phase events behind the kinds that rose, a line or two each: function,
    guard and the user's line."""
    sources = {source for key in rose for source in KINDS_BY_KEY[key].explained_by}
    signals = {signal for key in rose for signal in KINDS_BY_KEY[key].signals}
    events = [("recompiles", event) for event in result.details["recompile_events"]
              if "recompiles" in sources] + \
             [("graph_breaks", event) for event in result.details["graph_break_events"]
              if "graph_breaks" in sources] + \
             [("health", event) for event in result.details["health_events"]
              if event["what"] in signals]
    # what the counts count
    called = [(source, event) for source, event in events if event.get("phase") == "call"]
    lines: list[str] = []
    for source, event in called[:EVENTS_SHOWN]:
        lines += _LINES[source](event)
    if len(called) > EVENTS_SHOWN:
        lines.append(f"    and {len(called) - EVENTS_SHOWN} more (--nocompile-json=PATH "
                     "writes every one)")
    return lines


def _recompile_lines(event: dict[str, Any], reason: Optional[dict[str, Any]] = None) -> list[str]:
    """A recompile in a line or three: what recompiled, the failed guard (``reason``, else its
    first), the user's line, the fix."""
    from ...vocabulary.events import GuardFailure, code_place, no_reason
    from ...vocabulary.module_names import module_from_dict

    reasons = event.get("reasons") or []
    chosen = reason if reason is not None else (reasons[0] if reasons else None)
    if chosen and chosen.get("guard"):
        guard = (str(GuardFailure(chosen["guard"], chosen.get("compile_id"),
                                  named=chosen.get("named_guard"))).splitlines() or [""])[0]
        others = len(reasons) - 1
        more = (f" (and {plural(others, 'other failed guard')})" if others > 0 and reason is None
                else "")
    else:
        guard, more = no_reason(event.get("witness"), event.get("unread_text")), ""
    where = code_place(event["function"], event["filename"], event["line"],
                       module_from_dict(event.get("module")))
    lines = [f"    {_process_prefix(event)}recompiled {where}: "
             f"guard failed: {guard}{more}"]
    if event.get("user_code"):
        lines.append(f"        triggered by: {event['user_code']}")
    if chosen and chosen.get("fix"):
        lines.append(f"        usual fix: {chosen['fix']}")
    return lines


def _graph_break_lines(event: dict[str, Any]) -> list[str]:
    from ...vocabulary.events import display_path
    from ...vocabulary.module_names import module_from_dict

    lines = [f"    {_process_prefix(event)}graph break at "
             f"{display_path(event['filename'])}:{event['line']}: {event['reason']}"]
    module = module_from_dict(event.get("module"))
    if module is not None:  # as the failure names it: the module's class and method, and where
        lines.append(f"        compiling: {module.place}")
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


_LINES = {"recompiles": _recompile_lines, "graph_breaks": _graph_break_lines,
          "health": _health_lines}


def _process_prefix(event: dict[str, Any]) -> str:
    """``rank 1 (pid 4242): `` for an event of a child process; nothing for the test's own."""
    process = event.get("process")
    if not process:
        return ""
    from ...judge.result import process_label

    return f"{process_label(process)}: "
