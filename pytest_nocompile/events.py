"""Recompile events as plain data, and the parser for dynamo's recompile messages.

This module never imports torch: it is unit-tested on recorded messages from
several torch versions, so a change of message format shows up in our tests.

The message dynamo logs for one recompile looks like this (torch 2.13)::

    Recompiling function step in .../torch/optim/adam.py:214
        triggered by the following guard failure(s):
        - 2/0: self.param_groups[0]['lr'] == 0.0033   # for group in ...  # optim/adam.py:229 in step
        - User stack trace:
        -   File ".../torch/optim/adam.py", line 229, in step
        -     for group in self.param_groups:

Older torch has no ``N/M:`` compile-id prefix and no source comment;
``recompiles_verbose`` groups the reasons under ``guard i failures:``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Literal

Phase = Literal["setup", "call", "teardown"]

_HEADER = re.compile(r"^Recompiling function (?P<function>\S+) in (?P<filename>.+):(?P<line>\d+)\s*$")
_COMPILE_ID = re.compile(r"^(?P<compile_id>\d+/\d+(?:_\d+)?):\s*(?P<rest>.*)$")
_STACK_FILE = re.compile(r'^\s*File "(?P<filename>.+)", line (?P<line>\d+), in (?P<function>.+)$')
_SOURCE_SEPARATOR = re.compile(r"\s{2,}# ")


@dataclass(frozen=True)
class CodeLocation:
    """A line of Python code: where a guard came from or where user code ran."""

    filename: str
    line: int
    function: str
    code: str | None = None

    def __str__(self) -> str:
        where = f"{display_path(self.filename)}:{self.line} in {self.function}"
        return f"{where}: {self.code}" if self.code else where


def display_path(filename: str) -> str:
    """A path as users read it: relative to the working directory when inside it."""
    if not os.path.isabs(filename):
        return filename
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative


@dataclass(frozen=True)
class GuardFailure:
    """One reason dynamo gave for a cache entry not matching.

    ``compile_id`` is the ``frame/attempt`` id of the cache entry whose guard
    failed (None before torch 2.5), ``guard`` the failed guard or torch's
    description of it, ``source`` torch's trailing source comment, and
    ``location`` the last frame of torch's "User stack trace", if given.
    """

    guard: str
    compile_id: str | None = None
    source: str | None = None
    location: CodeLocation | None = None

    def __str__(self) -> str:
        prefix = f"{self.compile_id}: " if self.compile_id else ""
        return f"{prefix}{self.guard}"


@dataclass(frozen=True)
class RecompileEvent:
    """One dynamo recompilation of a frame that already had a cache entry.

    ``function``, ``filename`` and ``line`` name the code object dynamo
    recompiled; ``reasons`` are the guard failures it logged; ``phase`` is the
    test phase it happened in; ``compile_id`` is the id of the new compile;
    ``user_code`` is the innermost frame outside torch, pytest and this plugin
    that was running when dynamo recompiled (the user's line that triggered it);
    ``thread`` names the thread that recompiled when it was not the main thread.
    """

    function: str
    filename: str
    line: int
    reasons: tuple[GuardFailure, ...]
    message: str = field(repr=False)
    phase: Phase = "call"
    compile_id: str | None = None
    user_code: CodeLocation | None = None
    thread: str | None = None

    @property
    def guards(self) -> tuple[str, ...]:
        """The failed guard expressions, newest cache entry first."""
        return tuple(reason.guard for reason in self.reasons)


class UnrecognisedMessage(ValueError):
    """The text is not a dynamo recompile message this parser understands."""


def parse_recompile_message(message: str) -> tuple[str, str, int, tuple[GuardFailure, ...]]:
    """Split a dynamo recompile message into function, filename, line and reasons."""
    lines = message.splitlines()
    header = _HEADER.match(lines[0].strip()) if lines else None
    if header is None:
        raise UnrecognisedMessage(f"not a recompile message: {message[:80]!r}")
    reasons = _parse_reasons(lines[1:])
    return header["function"], header["filename"], int(header["line"]), tuple(reasons)


def event_from_message(
    message: str,
    phase: Phase = "call",
    compile_id: str | None = None,
    user_code: CodeLocation | None = None,
    thread: str | None = None,
) -> RecompileEvent:
    """Build a :class:`RecompileEvent` from one dynamo recompile message."""
    function, filename, line, reasons = parse_recompile_message(message)
    return RecompileEvent(function, filename, line, reasons, message, phase, compile_id, user_code, thread)


@dataclass(frozen=True)
class RecompileLimitHit:
    """Dynamo reached ``recompile_limit`` for a frame and stopped compiling it.

    After this, dynamo runs the frame uncompiled and logs no further recompiles
    of it, so any recompile count is a lower bound.
    """

    limit_name: str
    limit: int
    function: str
    message: str = field(repr=False)
    phase: Phase = "call"


_LIMIT_HEADER = re.compile(r"hit config\.(?P<name>\w+) \((?P<limit>\d+)\)")
_LIMIT_FUNCTION = re.compile(r"function: (?P<function>.+)")


def parse_limit_warning(message: str, phase: Phase = "call") -> RecompileLimitHit | None:
    """Parse dynamo's "hit config.recompile_limit" warning; None for any other text."""
    header = _LIMIT_HEADER.search(message)
    if header is None:
        return None
    function = _LIMIT_FUNCTION.search(message)
    return RecompileLimitHit(
        limit_name=header["name"],
        limit=int(header["limit"]),
        function=function["function"].strip() if function else "?",
        message=message,
        phase=phase,
    )


def _parse_reasons(lines: list[str]) -> list[GuardFailure]:
    # Every reason line, the headers ("triggered by ...", "guard 0 failures:") left out.
    items = [text.strip()[2:] for text in lines if text.strip().startswith("- ")]
    # With compile ids (torch >= 2.5) a line without one continues the guard above:
    # torch 2.11 prints an optimizer's multi-line repr inside ___check_obj_id guards.
    has_ids = any(_COMPILE_ID.match(item) for item in items)
    groups: list[tuple[list[str], list[str]]] = []  # (guard lines, user stack lines)
    in_stack = False
    for item in items:
        if item.strip() == "User stack trace:":
            in_stack = True
            continue
        if in_stack and groups and item.startswith("  "):
            groups[-1][1].append(item)
            continue
        in_stack = False
        if not groups or not has_ids or _COMPILE_ID.match(item):
            groups.append(([item], []))
        else:
            groups[-1][0].append(item)
    return [_with_location(_parse_reason(guard_lines), stack) for guard_lines, stack in groups]


def _parse_reason(guard_lines: list[str]) -> GuardFailure:
    first, *more = guard_lines
    compile_id = None
    match = _COMPILE_ID.match(first)
    if match:
        compile_id, first = match["compile_id"], match["rest"]
    *body, last = [first, *more]
    guard_tail, *source = _SOURCE_SEPARATOR.split(last, maxsplit=1)
    guard = "\n".join([*body, guard_tail.rstrip()])
    return GuardFailure(guard=guard, compile_id=compile_id, source=source[0].strip() if source else None)


def _with_location(reason: GuardFailure, stack: list[str]) -> GuardFailure:
    """Attach the innermost frame of torch's user stack trace to a reason."""
    location = _innermost_frame(stack)
    if location is None:
        return reason
    return GuardFailure(reason.guard, reason.compile_id, reason.source, location)


def _innermost_frame(stack: list[str]) -> CodeLocation | None:
    """The last ``File "...", line N, in f`` frame of a traceback, with its code line."""
    location = None
    for index, line in enumerate(stack):
        frame = _STACK_FILE.match(line)
        if frame:
            following = stack[index + 1].strip() if index + 1 < len(stack) else ""
            code = following if following and not _STACK_FILE.match(stack[index + 1]) else None
            location = CodeLocation(frame["filename"], int(frame["line"]), frame["function"], code)
    return location


@dataclass(frozen=True)
class GraphBreakEvent:
    """One graph break dynamo traced: where in user code, and why.

    ``reason`` is the first line of dynamo's reason (e.g. "Failed to trace
    builtin operator"), ``explanation`` its "Explanation:" line when given.
    """

    filename: str
    line: int
    reason: str
    explanation: str | None = None
    message: str = field(default="", repr=False)
    phase: Phase = "call"
    user_code: CodeLocation | None = None


_GRAPH_BREAK_HEADER = re.compile(r"^Graph break\b.*? in user code at (?P<filename>.+):(?P<line>\d+)\s*$")
_REASON_LABEL = "Graph Break Reason:"


def parse_graph_break_message(message: str, phase: Phase = "call") -> GraphBreakEvent:
    """Parse one record of dynamo's ``graph_breaks`` artifact."""
    lines = message.splitlines()
    header = _GRAPH_BREAK_HEADER.match(lines[0].strip()) if lines else None
    if header is None:
        raise UnrecognisedMessage(f"not a graph break message: {message[:80]!r}")
    reason_lines: list[str] = []
    traceback: list[str] = []
    for line in lines[1:]:
        if traceback or line.strip().startswith("User code traceback:"):
            traceback.append(line)
            continue
        if line.startswith(_REASON_LABEL):
            line = line[len(_REASON_LABEL):]
        if line.strip():
            reason_lines.append(line.strip())
    # Recent torch opens with "Encountered graph break when attempting to trace X:"; the cause follows.
    if len(reason_lines) > 1 and reason_lines[0].startswith("Encountered graph break"):
        reason_lines = reason_lines[1:]
    reason = reason_lines[0] if reason_lines else "(torch gave no reason)"
    explanation = next((line[len("Explanation:"):].strip() for line in reason_lines if line.startswith("Explanation:")), None)
    user_code = _innermost_frame(traceback[1:])
    return GraphBreakEvent(header["filename"], int(header["line"]), reason, explanation, message, phase, user_code)
