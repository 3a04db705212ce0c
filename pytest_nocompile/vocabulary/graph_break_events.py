"""Graph-break events as plain data, and the parser for dynamo's ``graph_breaks`` records.
Never imports torch.

What differs between versions (each recorded in tests/data): torch 2.4 and
2.5 log ``Graph break: from user code at:`` and the user stack, the reason
only in the record's exception (not in the message);
2.6 logs ``Graph break in user code at FILE:LINE`` and ``Reason: ...``; from
2.7 ``Graph Break Reason: ...`` with an ``Explanation:`` line and the whole
stack as "User code traceback"; from 2.10 the reason opens with
"Encountered graph break when attempting to trace ...:".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Sequence

from .display_paths import display_path, is_torch_file
from .events import (
    UNKNOWN_FILE,
    UNPARSED,
    CodeLocation,
    CompileEvent,
    Phase,
    ProcessInfo,
    UnrecognisedMessage,
    innermost_frame,
)
from .resume_names import resume_point

if TYPE_CHECKING:
    from .module_names import CompiledModule


@dataclass(frozen=True)
class GraphBreakEvent:
    """One graph break dynamo traced: where in user code, and why.

    ``reason`` is the first line of dynamo's reason (e.g. "Failed to trace
    builtin operator"), ``explanation`` its "Explanation:" line when given,
    ``graph_break_id`` torch's stable id of the kind of graph break
    (``GB0059``, from the page it links to: torch 2.9 on) when given;
    ``module`` the module whose method dynamo was compiling, where it was one
    (a module compiled whole: :mod:`.module_names`); ``inside_torch`` whether
    the break's place is in torch's own code (``optimizer.step()``'s), which
    the user cannot change, rather than in theirs: set where it is recorded;
    ``hints`` torch's "Hint:" lines and ``link`` the page its "For more details
    about this graph break" line points at (both torch 2.7 on, the link 2.9
    on), where it gives them.
    """

    filename: str
    line: int
    reason: str
    explanation: str | None = None
    message: str = field(default="", repr=False)
    phase: Phase = "call"
    user_code: CodeLocation | None = None
    process: ProcessInfo | None = None  # None: the test's own process
    graph_break_id: str | None = None
    module: CompiledModule | None = None
    inside_torch: bool = False
    hints: tuple[str, ...] = ()
    link: str | None = None
    # torch's text that the parser could not read (the whole message, or the exception after it),
    # where it could not: shown raw, never passed over
    unread: str | None = None
    # what saw it where its log record did not come (RESUME_WITNESS), else None
    witness: str | None = None

    @property
    def place(self) -> str:
        """Where it broke, as reports say it: ``test_x.py:5``."""
        if self.filename == UNKNOWN_FILE:
            return "a place pytest-nocompile could not read"
        return f"{display_path(self.filename)}:{self.line}"


# torch >= 2.6: "Graph break in user code at FILE:LINE", the reason ("Reason: ..." in 2.6,
# "Graph Break Reason: ..." since 2.7) and a "User code traceback:" follow. Duplicates may read
# "Graph break (user stack suppressed due to duplicate graph break) in user code at FILE:LINE".
_GRAPH_BREAK_HEADER = re.compile(r"^Graph break\b.*? in user code at "
                                 r"(?P<filename>.+):(?P<line>\d+)\s*$")
# torch 2.4 and 2.5: "Graph break: from user code at:" and the user stack, innermost frame last; the
# reason is the exception dynamo logged with it (the record's exc_info), not part of the message.
_GRAPH_BREAK_STACK_HEADER = re.compile(r"^Graph break\b[^:]*:? from user code at:?\s*$")
_REASON_LABELS = ("Graph Break Reason:", "Reason:")
_TRACEBACK_START = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<error>[A-Za-z_]\w*): (?P<text>.+)$")
NO_GRAPH_BREAK_REASON = "(torch gave no reason)"
# "For more details about this graph break, please visit:
# https://.../compile-graph-break-site/gb/gb0059.html" (torch 2.9 on)
_GRAPH_BREAK_ID = re.compile(r"/gb/(?P<id>gb\d+)\.html")
# The link itself, by the words before it rather than by its address: the page has moved before.
_DETAILS_LINK = re.compile(r"For more details about this graph break.*?:\s*(?P<link>https?://\S+)")
_HINT_LABEL = "Hint:"


def parse_graph_break_message(message: str, phase: Phase = "call") -> GraphBreakEvent:
    """Parse one record of dynamo's ``graph_breaks`` artifact, of any torch from 2.4 on.

    The location is where the graph break happened in user code; without a
    reason in the message (torch 2.4 and 2.5) ``reason`` is
    :data:`NO_GRAPH_BREAK_REASON`.
    """
    lines = message.splitlines()
    first = lines[0].strip() if lines else ""
    header = _GRAPH_BREAK_HEADER.match(first)
    if header is not None:
        return _located_graph_break(header["filename"], int(header["line"]), lines[1:], message,
                                    phase)
    if _GRAPH_BREAK_STACK_HEADER.match(first):
        return _stack_graph_break(lines[1:], message, phase)
    raise UnrecognisedMessage(f"not a graph break message: {message[:80]!r}")


def graph_break_event(message: str, is_torch_file: Callable[[str], bool],
                      phase: Phase = "call") -> GraphBreakEvent:
    """:func:`parse_graph_break_message`, never raising, told whether the break's place is inside
    torch (``is_torch_file`` of its file): a message torch wrote in a form this parser does not know
    is still a graph break (the user's: a budget of the user's breaks only counts it too)."""
    try:
        event = parse_graph_break_message(message, phase)
    except UnrecognisedMessage:
        reason = message.splitlines()[0] if message else UNPARSED
        return GraphBreakEvent(UNKNOWN_FILE, 0, reason, None, message, phase, unread=message)
    return replace(event, inside_torch=True) if is_torch_file(event.filename) else event


def _located_graph_break(filename: str, line: int, body: list[str], message: str,
                         phase: Phase) -> GraphBreakEvent:
    """torch >= 2.6: the header names the place; reason lines, then a user code traceback."""
    reason_lines: list[str] = []
    traceback: list[str] = []
    for text in body:
        if traceback or text.strip().startswith("User code traceback:"):
            traceback.append(text)
            continue
        label = next((label for label in _REASON_LABELS if text.startswith(label)), None)
        if label is not None:
            text = text[len(label):]
        if text.strip():
            reason_lines.append(text.strip())
    # Recent torch opens with "Encountered graph break when attempting to trace X:";
    # the cause follows.
    if len(reason_lines) > 1 and reason_lines[0].startswith("Encountered graph break"):
        reason_lines = reason_lines[1:]
    reason = reason_lines[0] if reason_lines else NO_GRAPH_BREAK_REASON
    explanation = next((text[len("Explanation:"):].strip() for text in reason_lines
                        if text.startswith("Explanation:")), None)
    user_code = innermost_frame(traceback[1:])
    graph_break_id = _GRAPH_BREAK_ID.search(message)
    link = _DETAILS_LINK.search(message)
    return GraphBreakEvent(filename, line, reason, explanation, message, phase, user_code,
                           graph_break_id=graph_break_id["id"].upper() if graph_break_id else None,
                           hints=_hints(reason_lines), link=link["link"] if link else None)


def _hints(reason_lines: list[str]) -> tuple[str, ...]:
    """torch's advice, one "Hint:" line each (torch 2.7 on), as torch wrote it."""
    return tuple(text[len(_HINT_LABEL):].strip() for text in reason_lines
                 if text.startswith(_HINT_LABEL) and text[len(_HINT_LABEL):].strip())


def _stack_graph_break(body: list[str], message: str, phase: Phase) -> GraphBreakEvent:
    """torch 2.4 and 2.5: the user stack is the place; a reason only where the record's traceback
    was formatted in."""
    stack = body
    reason = NO_GRAPH_BREAK_REASON
    stripped = [text.strip() for text in body]
    # a Formatter's text: the message, then the exception logged with it
    if _TRACEBACK_START in stripped:
        at = stripped.index(_TRACEBACK_START)
        stack, exception = body[:at], body[at + 1:]
        raised = [match for text in exception
                  if not text.startswith(" ") and (match := _EXCEPTION_LINE.match(text.strip()))]
        if raised:
            reason = f"{raised[-1]['error']}: {raised[-1]['text'].strip()}"
    user_code = innermost_frame(stack)
    if user_code is None:
        raise UnrecognisedMessage(f"graph break message without a user frame: {message[:80]!r}")
    # torch wrote an exception, but none this parser reads: its reason was there, not read
    unread = ("\n".join(body[stripped.index(_TRACEBACK_START):])
              if _TRACEBACK_START in stripped and reason == NO_GRAPH_BREAK_REASON else None)
    return GraphBreakEvent(user_code.filename, user_code.line, reason, None, message, phase,
                           user_code, unread=unread)


# The second witness of a graph break: dynamo compiles the code after it as a function of its own,
# named for the break's line (torch_dynamo_resume_in_f_at_5).
RESUME_WITNESS = "resume function"
UNLOGGED_REASON = "(no graph-break record)"


def broke_at(event: GraphBreakEvent, filename: str, line: int) -> bool:
    """Whether a graph break is the one that a resume function of ``filename`` resumes after at
    ``line``: its own place, or a call on its stack there (a break in a function it called)."""
    if (event.filename, event.line) == (filename, line):
        return True
    return f'File "{filename}", line {line},' in event.message


def unlogged_graph_break(compile: CompileEvent,
                         recorded: Sequence[GraphBreakEvent]) -> GraphBreakEvent | None:
    """The graph break a compiled resume function tells of, where none of ``recorded`` is the one it
    resumes after; None for another compile, or one a record names."""
    code = compile.compiling
    point = None if code is None else resume_point(code.function)
    if code is None or point is None or any(broke_at(event, code.filename, point.line)
                                            for event in recorded):
        return None
    return GraphBreakEvent(code.filename, point.line, UNLOGGED_REASON, phase=compile.phase,
                           user_code=compile.user_code, process=compile.process,
                           module=compile.module, inside_torch=is_torch_file(code.filename),
                           witness=RESUME_WITNESS)
