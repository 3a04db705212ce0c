"""Recompile events as plain data, and the parser for dynamo's recompile messages.

This module never imports torch: it is unit-tested on messages recorded from
every torch minor release from 2.4 on (tests/data), so a change of message
format shows up in our tests.

The message dynamo logs for one recompile looks like this (torch 2.13)::

    Recompiling function step in .../torch/optim/adam.py:214
        triggered by the following guard failure(s):
        - 2/0: self.param_groups[0]['lr'] == 0.0033   # for group in ...  # optim/adam.py:229 in step
        - User stack trace:
        -   File ".../torch/optim/adam.py", line 229, in step
        -     for group in self.param_groups:

What differs between versions (all recorded in tests/data), and how it is read:

* torch 2.4 has no ``N/M:`` compile-id prefix (``compile_id`` is None).
* Up to 2.6 guards name locals as ``L['n']`` and ``tensor 'L['x']'``, later
  as ``n`` and ``tensor 'x'``; the guard text is kept as torch wrote it, less
  the blank padding torch put after it up to 2.8.
* From 2.9 a guard may end in a source comment (``  # code  # file:line in
  f``), kept apart as ``source``; from 2.11 a "User stack trace" may follow,
  whose innermost frame becomes ``location``; 2.10 to 2.12 print an object
  guard's repr over several lines (``type=Adam (`` ... ``)``), one reason.
* ``recompiles_verbose`` groups the same reasons under ``guard i failures:``.
* torch 2.4 guards a bool by the identity of True or False and writes only the
  number, ``___check_obj_id(L['use_cache'], 94113)``; later torch writes
  ``use_cache == True``, or types its identity guards (``, type=<class 'bool'>``,
  from 2.10). The number means something only in the process that logged it,
  so there the capture types such a guard as later torch would
  (:func:`typed_bool_ids`): it reads as a bool's wherever it is judged.
* The limit warning names ``config.cache_size_limit`` up to 2.6 and
  ``config.recompile_limit`` from 2.7.
* Graph breaks: see :mod:`.graph_break_events`.
"""  # noqa: E501

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Collection, Literal, Optional

from .display_paths import display_path
from .resume_names import RESUME_PREFIX, resume_point, user_function

if TYPE_CHECKING:
    from .module_names import CompiledModule

Phase = Literal["setup", "call", "teardown"]

_HEADER = re.compile(r"^Recompiling function (?P<function>\S+) in "
                     r"(?P<filename>.+):(?P<line>\d+)\s*$")
_COMPILE_ID = re.compile(r"^(?P<compile_id>\d+/\d+(?:_\d+)?):\s*(?P<rest>.*)$")
_STACK_FILE = re.compile(r'^\s*File "(?P<filename>.+)", line (?P<line>\d+), in (?P<function>.+)$')
# "triggered by the following guard failure(s):", "guard 0 failures:" (recompiles_verbose)
_REASONS_HEADING = re.compile(r"^(?:triggered by\b.*|guard \d+ failures?):$")
_SOURCE_SEPARATOR = re.compile(r"\s{2,}# ")
_HINT = re.compile(r"^(?P<rest>.*?)\s+\(HINT: (?P<hint>.*)\)\s*$")
# A size guard's comment ends in the place inside torch that made it:
# "(_dynamo/variables/tensor.py:2606 in evaluate_expr)".
_SOURCE_PLACE = re.compile(r"^(?P<code>.*?)\s{2,}# (?P<path>\S+):(?P<line>\d+) in (?P<function>\S+)"
                           r"(?: \([^()]*:\d+ in \S+\))?$")


@dataclass(frozen=True)
class CodeLocation:
    """A line of Python code: where a guard came from or where user code ran."""

    filename: str
    line: int
    function: str
    code: str | None = None

    def __str__(self) -> str:
        where = f"{display_path(self.filename)}:{self.line} in {user_function(self.function)}"
        return f"{where}: {self.code}" if self.code else where


@dataclass(frozen=True)
class ProcessInfo:
    """A process a watched test started (at any depth) that reported events to it.

    ``rank`` is its ``torch.distributed`` rank when initialised, else ``RANK``,
    else ``LOCAL_RANK``, else None, read when it reported. ``nth`` tells
    processes of one pid apart (an ``exec`` keeps the pid): shown as ``pid N #2``.
    ``command`` says what it runs, as the process said it (its command line,
    shortened, or its ``multiprocessing`` name), when it did: a pid alone means
    nothing to the reader once the process is gone.
    """

    pid: int
    rank: int | None = None
    nth: int = 1
    command: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        pid = f"pid {self.pid}" if self.nth == 1 else f"pid {self.pid} #{self.nth}"
        if self.rank is not None:
            return (f"rank {self.rank} ({pid}, {self.command})" if self.command
                    else f"rank {self.rank} ({pid})")
        return f"{pid} ({self.command})" if self.command else pid


def process_label(process: ProcessInfo | None, test_pid: int) -> str:
    """How reports name a process: ``rank 1 (pid 4242, python train.py)``, ``pid 4242``, or ``test
    process (pid 4241)`` for None."""
    return f"test process (pid {test_pid})" if process is None else str(process)


@dataclass(frozen=True)
class GuardFailure:
    """One reason dynamo gave for a cache entry not matching.

    ``compile_id`` is the ``frame/attempt`` id of the cache entry whose guard
    failed (None before torch 2.5), ``guard`` the failed guard or torch's
    description of it, ``source`` torch's trailing source comment,
    ``location`` the last frame of torch's "User stack trace" (or of the
    source comment), and ``hint`` torch's "(HINT: ...)" advice after the
    guard (torch 2.8) or its source comment (2.10), each if given;
    ``named``: the guard in the user's names, which reports show, where torch named a module's
    arguments after its own wrapper (:mod:`.module_names`).
    """

    guard: str
    compile_id: str | None = None
    source: str | None = None
    location: CodeLocation | None = None
    hint: str | None = None
    named: str | None = None

    def __str__(self) -> str:
        prefix = f"{self.compile_id}: " if self.compile_id else ""
        return f"{prefix}{self.guard if self.named is None else self.named}"


@dataclass(frozen=True)
class RecompileEvent:
    """One dynamo recompilation of a frame that already had a cache entry.

    ``function``, ``filename`` and ``line`` name the code object dynamo
    recompiled; ``reasons`` are the guard failures it logged; ``phase`` is the
    test phase it happened in; ``compile_id`` is the id of the new compile;
    ``user_code`` is the innermost frame outside torch, pytest and this plugin
    that was running when dynamo recompiled (the user's line that triggered it);
    ``thread`` names the thread that recompiled when it was not the main thread;
    ``process`` the child process it happened in (None: the test's own);
    ``module`` the module whose method it is.
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
    process: ProcessInfo | None = None  # None: the test's own process
    module: CompiledModule | None = None
    # what saw it where its log record did not come (COMPILE_ID_WITNESS), else None
    witness: str | None = None

    @property
    def guards(self) -> tuple[str, ...]:
        """The failed guard expressions, newest cache entry first."""
        return tuple(reason.guard for reason in self.reasons)

    @property
    def code_name(self) -> str:
        """The recompiled code as users know it: ``scale``, a module's ``Sequential.forward``, or
        for the code dynamo runs after a graph break ``train_step (resumed after the graph break at
        trainlib.py:23)``."""
        point = resume_point(self.function)
        return (self.module.name if self.module is not None
                else self.function if point is None
                else resumed_after(point.function, self.filename, point.line))

    @property
    def code_place(self) -> str:
        """:attr:`code_name` with the place of the code: ``scale (test_x.py:4)``;
        a resume function's name has its place."""
        if self.function == UNPARSED:
            return "a function pytest-nocompile could not name"
        return code_place(self.function, self.filename, self.line, self.module)

    @property
    def first_reason(self) -> str:
        """The first failed guard's first line, as a one-line report gives it, or why there is
        none (:func:`no_reason`)."""
        if self.reasons:
            return str(self.reasons[0]).splitlines()[0]
        return no_reason(self.witness, self.unread)

    @property
    def unread(self) -> str | None:
        """torch's text that the parser could not read, or None: the whole message where its
        header was not read; the lines after the header where they name no reason this parser
        knows (where torch wrote none after its heading, it gave no reason)."""
        if self.witness is not None:
            return None  # no text came: its compile id alone told of it
        if self.function == UNPARSED:
            return self.message
        if self.reasons:
            return None
        body = [line for line in self.message.splitlines()[1:]
                if line.strip() and not _REASONS_HEADING.match(line.strip())]
        return "\n".join(body) or None


def no_reason(witness: str | None, unread: str | None) -> str:
    """What a report says for a recompile without a reason read: that no record came for it (a
    second witness told of it), that its text was not read, or that torch gave none."""
    if witness is not None:
        return f"(no recompile record: counted from its {witness})"
    if unread is not None:
        return "(its text not read: in a form pytest-nocompile does not know)"
    return "(torch gave no reason)"


def code_place(function: str, filename: str, line: int,
               module: CompiledModule | None = None) -> str:
    """Recompiled code as reports name it: ``scale (test_x.py:4)``, for the code dynamo runs after a
    graph break ``train_step (resumed after the graph break at trainlib.py:23)``, a module's method
    ``Sequential.forward (compiled at test_x.py:18)`` (else its place)."""
    if module is not None:
        return module.place
    point = resume_point(function)
    if point is not None:
        return resumed_after(point.function, filename, point.line)
    return f"{function} ({display_path(filename)}:{line})"


def resumed_after(function: str, filename: str, line: int) -> str:
    """``train_step (resumed after the graph break at trainlib.py:23)``: how reports name a resume
    function."""
    return f"{function} (resumed after the graph break at {display_path(filename)}:{line})"


def resumed_function(message: str) -> Optional[tuple[str, str]]:
    """``(filename, function)`` of the user's function when a recompile message names a resume
    function, else None.

    Cheap for every other message: it looks no further than the header.
    """
    header_line = message.partition("\n")[0]
    if RESUME_PREFIX not in header_line:
        return None
    header = _HEADER.match(header_line.strip())
    point = resume_point(header["function"]) if header else None
    return None if header is None or point is None else (header["filename"], point.function)


# An identity guard, and the type later torch writes after it: ___check_obj_id(L['flag'], 94113)
# (torch 2.4), ___check_obj_id(flag, 94113), type=<class 'bool'> (from 2.10). The first ", N)"
# ends it: a comma in its object's name (an item's key) stays in the name.
_ID_GUARD = re.compile(r"___check_obj_id\([^\n]+?, (?P<id>\d+)\)(?P<typed>, type=)?")


def typed_bool_ids(message: str, bool_ids: Collection[int]) -> str:
    """``message`` with each identity guard whose number is in ``bool_ids`` (``id(False)`` and
    ``id(True)`` in the process that logged it) and that names no type typed as later torch types
    it: ``___check_obj_id(L['use_cache'], 94113), type=<class 'bool'>``."""
    def typed(found: re.Match[str]) -> str:
        if found["typed"] is None and int(found["id"]) in bool_ids:
            return f"{found[0]}, type=<class 'bool'>"
        return found[0]

    return _ID_GUARD.sub(typed, message)


class UnrecognisedMessage(ValueError):
    """The text is not a dynamo recompile message this parser understands."""


def parse_recompile_message(message: str) -> tuple[str, str, int, tuple[GuardFailure, ...]]:
    """Split a dynamo recompile message into function, filename, line and reasons."""
    lines = message.splitlines()
    header = _HEADER.match(lines[0].strip()) if lines else None
    if header is None:
        raise UnrecognisedMessage(f"not a recompile message: {message[:80]!r}")
    return (header["function"], header["filename"], int(header["line"]),
            tuple(_parse_reasons(lines[1:], header["filename"])))


def event_from_message(message: str, phase: Phase = "call", compile_id: str | None = None,
                       user_code: CodeLocation | None = None, thread: str | None = None,
                       module: CompiledModule | None = None) -> RecompileEvent:
    """Build a :class:`RecompileEvent` from one dynamo recompile message (``module``: the module
    whose method it recompiled)."""
    function, filename, line, reasons = parse_recompile_message(message)
    if module is not None:  # its guards in the user's names, where dynamo's wrapper renamed them
        reasons = tuple(replace(reason, named=module.named_guard(reason.guard))
                        for reason in reasons)
    return RecompileEvent(function, filename, line, reasons, message, phase, compile_id, user_code,
                          thread, module=module)


# What an event read from a text the parser does not know holds for its function and file.
UNPARSED = "<unparsed>"
UNKNOWN_FILE = "?"


def recompile_event(message: str, phase: Phase = "call", compile_id: str | None = None,
                    user_code: CodeLocation | None = None, thread: str | None = None,
                    module: CompiledModule | None = None) -> RecompileEvent:
    """:func:`event_from_message`, never raising: a message torch wrote in a form this parser does
    not know is still a recompile."""
    try:
        return event_from_message(message, phase, compile_id, user_code, thread, module)
    except UnrecognisedMessage:
        return RecompileEvent(UNPARSED, UNKNOWN_FILE, 0, (), message, phase, compile_id, user_code,
                              thread, module=module)


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
    process: ProcessInfo | None = None  # None: the test's own process
    # The attempt dynamo refused: it logs "Recompiling function ..." and then
    # refuses the compile. That attempt compiled nothing, so it is kept here,
    # not counted as a recompile.
    refused: RecompileEvent | None = None
    # the id of the compile dynamo refused, where torch gives one: how the record finds the attempt
    compile_id: str | None = field(default=None, compare=False, repr=False)
    # False: a warning in a form the parser does not know, taken as a limit hit because it came in
    # a recompile's attempt that then compiled no graph (see ProcessEvents.add_limit_hit)
    read: bool = True

    @property
    def headline(self) -> str:
        """What dynamo did, as reports say it: ``dynamo hit config.recompile_limit (8) for f``."""
        if self.read:
            return f"dynamo hit config.{self.limit_name} ({self.limit}) for {self.function_name}"
        refused = "?" if self.refused is None else self.refused.code_place
        return (f"dynamo refused to recompile {refused}, with a warning pytest-nocompile could "
                "not read (the refused attempt compiled no graph)")

    @property
    def function_name(self) -> str:
        """:attr:`function` as reports show it: a resume function's ``'f' (file:line)`` as ``f
        (resumed after the graph break at file:line)``, a module's method as ``Sequential.forward
        (compiled at test_x.py:18)``, anything else as torch wrote it."""
        # the attempt dynamo refused knows it
        module = None if self.refused is None else self.refused.module
        if module is not None:
            return module.place
        quoted = _QUOTED_FUNCTION.match(self.function)
        point = resume_point(quoted["function"]) if quoted else None
        if quoted is None or point is None:
            return self.function
        return resumed_after(point.function, quoted["filename"], point.line)


_LIMIT_HEADER = re.compile(r"hit config\.(?P<name>\w+) \((?P<limit>\d+)\)")
_LIMIT_FUNCTION = re.compile(r"function: (?P<function>.+)")
# 'f' (file:line)
_QUOTED_FUNCTION = re.compile(r"^'(?P<function>[^']+)' \((?P<filename>.+):(?P<line>\d+)\)$")


@dataclass(frozen=True)
class CompileEvent:
    """One graph dynamo compiled: a first compile, a recompile, or a piece a graph break made.

    ``compile_id`` is the ``frame/attempt`` id of the frame compile that
    produced the graph (None where torch gives none); ``user_code`` the
    innermost frame outside torch, pytest and this plugin that was running
    (the user's call that brought the compile); ``compiling`` the function
    whose frame dynamo compiled (its first line), where it was compiling one;
    ``module`` the module whose method that is.
    """

    compile_id: str | None = None
    user_code: CodeLocation | None = None
    phase: Phase = "call"
    thread: str | None = None
    process: ProcessInfo | None = None  # None: the test's own process
    compiling: CodeLocation | None = None
    module: CompiledModule | None = None
    # what saw it where its log record did not come (METRICS_WITNESS), else None
    witness: str | None = None


# The second witness of a compile: the frame's compilation-metrics entry says it compiled a graph.
METRICS_WITNESS = "compilation metrics"

# The second witness of a recompile: the compile id of a graph dynamo compiled says which attempt at
# its frame it was, and an attempt of 1 or more is a recompile of that frame.
COMPILE_ID_WITNESS = "compile id"
_ATTEMPT = re.compile(r"^(?P<attempt>\d+/\d+)(?:_\d+)?$")


def frame_attempt(compile_id: str | None) -> str | None:
    """``frame/attempt`` of a compile id (``0/1_2``, a restart of the trace, is ``0/1``); None for
    no id or an id in another form (compiled autograd's ``!0/0/0``)."""
    found = None if compile_id is None else _ATTEMPT.match(compile_id)
    return None if found is None else found["attempt"]


def recompile_attempt(compile_id: str | None) -> str | None:
    """:func:`frame_attempt` of a compile id whose attempt is 1 or more (``0/1``): a recompile of
    that frame. None for a frame's first compile, no id, or an id in another form."""
    attempt = frame_attempt(compile_id)
    return None if attempt is None or attempt.endswith("/0") else attempt


def unlogged_recompile(compile: CompileEvent) -> RecompileEvent:
    """The recompile a graph's compile id tells of (:func:`recompile_attempt`), where no recompile
    record came for its attempt: counted, with what was compiling, and no reason to show."""
    code = compile.compiling
    return RecompileEvent(code.function if code else UNPARSED,
                          code.filename if code else UNKNOWN_FILE, code.line if code else 0, (), "",
                          compile.phase, compile.compile_id, compile.user_code, compile.thread,
                          compile.process, compile.module, witness=COMPILE_ID_WITNESS)


@dataclass(frozen=True)
class HealthEvent:
    """One compile-health signal: a cache miss, a CUDA-graph re-record, a compile's seconds, a
    swallowed error.

    ``what`` names the signal: a counter of torch's as ``"group.name"``
    (``"inductor.fxgraph_cache_miss"``: one event per increment, ``amount`` the
    increment) or a source's own name (``"compile_seconds"``). ``reason`` is
    torch's word on why, where it gives one. Budget kinds count them by name
    (:attr:`~.kinds.BudgetKind.signals`), summing ``amount``. ``compiling`` is
    the function dynamo was compiling when the signal came (its first line),
    where it was compiling one: the function whose graph missed the cache;
    ``module`` the module whose method that is.
    """

    what: str
    amount: float = 1
    reason: str | None = None
    compile_id: str | None = None
    user_code: CodeLocation | None = None
    phase: Phase = "call"
    thread: str | None = None
    process: ProcessInfo | None = None  # None: the test's own process
    compiling: CodeLocation | None = None
    module: CompiledModule | None = None

    @property
    def compiling_place(self) -> str | None:
        """:attr:`compiling` as reports name it, ``scale (test_x.py:4)``;
        None when no frame was being compiled."""
        code = self.compiling
        return None if code is None else code_place(code.function, code.filename, code.line,
                                                    self.module)


def parse_limit_warning(message: str, phase: Phase = "call",
                        compile_id: str | None = None) -> RecompileLimitHit | None:
    """Parse dynamo's "hit config.recompile_limit" warning (``compile_id``: of the compile it
    refused); None for any other text."""
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
        compile_id=compile_id,
    )


def limit_hit_from_warning(message: str, phase: Phase = "call",
                           compile_id: str | None = None) -> RecompileLimitHit | None:
    """A warning dynamo logged: its limit hit as :func:`parse_limit_warning` reads it; where the
    text is one it does not know but came inside a compile (``compile_id``), a hit whose text was
    not read (``read=False``), which the record keeps only as the refusal of the recompile it came
    in, and only while that attempt compiles no graph; else None.

    A reworded limit warning is still a limit hit: a future torch must not turn one into a pass.
    """
    hit = parse_limit_warning(message, phase, compile_id)
    if hit is not None or compile_id is None:
        return hit
    return RecompileLimitHit(UNREAD_LIMIT, 0, UNPARSED, message, phase, compile_id=compile_id,
                             read=False)


# The limit name of a hit whose warning was not read.
UNREAD_LIMIT = "?"


def _parse_reasons(lines: list[str], function_file: str) -> list[GuardFailure]:
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
    return [_parse_reason(guard_lines, stack, function_file) for guard_lines, stack in groups]


def _parse_reason(guard_lines: list[str], stack: list[str], function_file: str) -> GuardFailure:
    first, *more = guard_lines
    compile_id = None
    match = _COMPILE_ID.match(first)
    if match:
        compile_id, first = match["compile_id"], match["rest"]
    *body, last = [first, *more]
    hinted = _HINT.match(last)  # after the guard (2.8) or after its source comment (2.10)
    if hinted:
        last = hinted["rest"]
    guard_tail, *sources = _SOURCE_SEPARATOR.split(last, maxsplit=1)
    source = sources[0].strip() if sources else None
    # Where the guard came from: the innermost frame of torch's user stack trace, else its source
    # comment.
    location = innermost_frame(stack) or _source_location(source, function_file)
    return GuardFailure("\n".join([*body, guard_tail.rstrip()]), compile_id, source, location,
                        hinted["hint"] if hinted else None)


def _source_location(source: str | None, function_file: str) -> CodeLocation | None:
    """``code  # path:line in f`` (torch 2.9 and 2.10 give no user stack trace) as a location.

    torch shortens the path to its last components; where it is the tail of
    the recompiled function's own file, that file's full path is used. (It cuts
    the path after the folder it shares with torch's own, and one character
    more: a file under ``/tmp`` reads ``mp/...``.) A size guard's comment may
    end in the place in torch that made it, in brackets: left out here.
    """
    match = _SOURCE_PLACE.match(source) if source else None
    if match is None:
        return None
    path = match["path"]
    if function_file.endswith(os.sep + path) or function_file == path or (
            function_file.startswith(os.sep) and function_file[2:] == path):
        path = function_file
    return CodeLocation(path, int(match["line"]), match["function"], match["code"].strip() or None)


def innermost_frame(stack: list[str]) -> CodeLocation | None:
    """The last ``File "...", line N, in f`` frame of a traceback, with its code line."""
    location = None
    for index, line in enumerate(stack):
        frame = _STACK_FILE.match(line)
        if frame:
            following = stack[index + 1].strip() if index + 1 < len(stack) else ""
            code = following if following and not _STACK_FILE.match(stack[index + 1]) else None
            location = CodeLocation(frame["filename"], int(frame["line"]), frame["function"], code)
    return location
