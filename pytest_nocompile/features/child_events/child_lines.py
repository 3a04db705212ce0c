"""What one read of a test's report folders holds (:mod:`.event_files` reads), and each line of it
checked field by field before anything is made of it (:mod:`.child_intake` takes it in).

The variable that points children at a test's folder reaches every Python on
``PATH``, with whatever copy (whatever version) of the plugin it has: a line
may carry any JSON at all. Each line is checked on its own; one that is not
what this version writes is skipped, and the test hears which and why
(:class:`ChildReportWarning`), while the other lines still count.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional

import pytest

from ..child_startup.event_writer import MAX_MESSAGE

if TYPE_CHECKING:
    from ...vocabulary.events import CodeLocation
    from ...vocabulary.module_names import CompiledModule

EVENTS = ("compile", "recompile", "limit", "graph_break", "problem", "health")
_WITH_MESSAGE = ("recompile", "limit", "graph_break", "problem")
_MAX_ID = 200  # characters of a token, compile id or thread name
_MAX_INT = 1 << 31  # pids and ranks are well below
_SHOWN_REASONS = 5  # per file, in a warning


class FileLines:
    """What one process's file held that was new since the last read: its
    entries, and what was skipped."""

    __slots__ = ("path", "token", "entries", "skipped", "started_in")

    def __init__(self, path: str, token: str) -> None:
        self.path = path
        self.token = token  # the file's name without its suffix: the writer's token
        # the test's phase that started the process, where its folder says
        self.started_in: Optional[str] = None
        self.entries: list[tuple[int, dict[str, Any]]] = []  # (line number, entry)
        self.skipped: list[tuple[int, str]] = []  # (line number, or 0 for the whole file; why)


class Reading:
    """One read of a test's directory: each file's new lines, processes that could not report,
    and the folder's state."""

    __slots__ = ("files", "unreported", "problem")

    def __init__(self) -> None:
        self.files: list[FileLines] = []
        self.unreported: list[tuple[str, str]] = []  # (token, errno name) from markers, each once
        self.problem: Optional[str] = None  # why the test's processes could not report there at all


class ChildReportWarning(pytest.PytestWarning):
    """A process the test started could not report everything: lines of its report were skipped,
    or it could not write."""


class BadLine(ValueError):
    """A line this version of the plugin does not write: the reason, as a warning shows it."""


class ChildLine:
    """A checked line: every field of the type the record expects, texts cut to their caps
    (else :class:`BadLine`)."""

    __slots__ = ("moment", "pid", "key", "rank", "world", "command", "event", "message",
                 "compile_id", "user_code", "thread", "started_in", "what", "amount", "compiling",
                 "module")

    def __init__(self, entry: dict[str, Any], file_token: str,
                 started_in: Optional[str] = None) -> None:
        # the test's phase that started the process (its folder's, never the line's word)
        self.started_in = started_in
        self.moment = _number(entry, "t")
        self.pid = _integer(entry, "pid")
        proc = _short_text(entry, "proc")
        # a writer without tokens: one file, one key
        self.key = proc if proc is not None else f"{file_token}.jsonl"
        self.rank = None if entry.get("rank") is None else _integer(entry, "rank")
        # the job's world size (absent from older writers)
        self.world = None if entry.get("world") is None else _integer(entry, "world")
        # what the process runs (absent from older writers)
        self.command = _short_text(entry, "cmd")
        event = entry.get("event")
        if event not in EVENTS:
            raise BadLine(f"unknown event {_shown(event)}")
        self.event: str = event
        self.message = _message(entry) if event in _WITH_MESSAGE else ""
        # a health event's signal, its amount and (as message) its reason
        self.what: Optional[str] = None
        self.amount = 0.0
        # A compile's or a health event's: the function dynamo was compiling.
        self.compiling: Optional[CodeLocation] = (_location(entry.get("compiling"), "compiling")
                                                  if event in ("compile", "health") else None)
        # the module whose method dynamo compiled (absent from older writers)
        self.module = _module(entry.get("module"))
        if event == "health":
            self.what = _short_text(entry, "what")
            if not self.what:
                raise BadLine("a health event without 'what'")
            self.amount = _number(entry, "amount")
            self.message = "" if entry.get("message") is None else _message(entry)
        self.compile_id = _short_text(entry, "compile_id")
        self.thread = _short_text(entry, "thread")
        self.user_code = _location(entry.get("user_code"))


def checked(reading: Reading) -> tuple[list[ChildLine], dict[str, list[str]]]:
    """A read's good lines, the earliest process's first; and each file's skipped
    lines, as a warning shows them.

    Earliest first: of two processes of one pid (an ``exec``), the first to
    write is ``pid N`` and the program it became ``pid N #2``.
    """
    by_file: list[tuple[float, list[ChildLine]]] = []
    skipped: dict[str, list[str]] = {}
    for lines in reading.files:
        good = []
        for number, entry in lines.entries:
            try:
                good.append(ChildLine(entry, lines.token, lines.started_in))
            except BadLine as bad:
                lines.skipped.append((number, str(bad)))
        if lines.skipped:
            skipped[lines.path] = [f"line {number}: {why}" if number else why
                                   for number, why in sorted(lines.skipped)]
        by_file.append((good[0].moment if good else 0.0, good))
    return [line for _, good in sorted(by_file, key=lambda pair: pair[0]) for line in good], skipped


def skipped_warning(path: str, reasons: list[str]) -> ChildReportWarning:
    """One warning for one file: what was skipped in it, the first few reasons in full."""
    shown = "; ".join(reasons[:_SHOWN_REASONS])
    more = f"; and {len(reasons) - _SHOWN_REASONS} more" if len(reasons) > _SHOWN_REASONS else ""
    return ChildReportWarning(
        f"pytest-nocompile skipped part of a child process's report {path} "
        f"(written by another version of pytest-nocompile, or not by it at all?): {shown}{more}"
    )


def unreported_warning(problems: list[str]) -> ChildReportWarning:
    return ChildReportWarning("pytest-nocompile could not hear from every process of this test, "
                              "so their compiles are not counted: " + "; ".join(problems))


def report_warnings(skipped: dict[str, list[str]],
                    problems: list[str]) -> list[pytest.PytestWarning]:
    """A test's warnings as it ends: one per file whose lines were skipped (by its path), and one
    for the processes that could not report."""
    found: list[pytest.PytestWarning] = [skipped_warning(path, reasons)
                                         for path, reasons in skipped.items()]
    if problems:
        found.append(unreported_warning(problems))
    return found


def _number(entry: dict[str, Any], key: str) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadLine(f"{key!r} is {_type(value)}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an int past float's range
        number = math.inf
    if not math.isfinite(number) or number < 0:
        raise BadLine(f"{key!r} is {_shown(value)}, not a finite number >= 0")
    return number


def _integer(entry: dict[str, Any], key: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadLine(f"{key!r} is {_type(value)}, not an integer")
    if not 0 <= value < _MAX_INT:
        raise BadLine(f"{key!r} is {_shown(value)}, out of range")
    return value


def _short_text(entry: dict[str, Any], key: str) -> Optional[str]:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadLine(f"{key!r} is {_type(value)}, not text")
    if len(value) > _MAX_ID:
        raise BadLine(f"{key!r} is {len(value)} characters long, over {_MAX_ID}")
    return value


def _message(entry: dict[str, Any]) -> str:
    value = entry.get("message")
    if not isinstance(value, str):
        raise BadLine(f"'message' is {_type(value)}, not text")
    return _capped(value, MAX_MESSAGE)


def _location(fields: Any, key: str = "user_code") -> Optional[CodeLocation]:
    """A child's ``[file, line, function, code]``, as written by :mod:`..child_startup.startup`."""
    from ...vocabulary.events import CodeLocation

    if fields is None:
        return None
    if (isinstance(fields, list) and len(fields) == 4 and isinstance(fields[0], str)
            and isinstance(fields[2], str)
            and isinstance(fields[1], int) and not isinstance(fields[1], bool)
            and 0 <= fields[1] < _MAX_INT and (fields[3] is None or isinstance(fields[3], str))):
        code = None if fields[3] is None else _capped(fields[3], 1000)
        return CodeLocation(_capped(fields[0], 4096), fields[1], _capped(fields[2], 1000), code)
    raise BadLine(f"'{key}' is not [file, line, function, code]")


def _module(fields: Any) -> Optional[CompiledModule]:
    from ...vocabulary.module_names import module_from_dict

    try:
        return module_from_dict(fields)
    except ValueError as bad:
        raise BadLine(f"'module' is not a module as this version writes it: {bad}") from None


def _capped(text: str, limit: int) -> str:
    return (text if len(text) <= limit
            else f"{text[:limit]}... [{len(text) - limit} more characters not shown]")


def _type(value: Any) -> str:
    return "missing" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."
