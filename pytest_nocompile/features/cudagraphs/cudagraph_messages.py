"""CUDA-graph trees' log messages, read: which mean a skip, which a re-record, and why.

Pure code: no torch. Inductor's CUDA-graph trees (``mode="reduce-overhead"``)
log on the ``cudagraphs`` artifact (older torch: skips on ``perf_hints``):

- a skip, at WARNING: ``skipping cudagraphs due to mutated inputs (1
  instances). Found from : \\n File "x.py", line 3, in f\\n    buf.add_(1)``
  (also ``skipping cudagraph due to function 0 exceeding max re-recording
  limit ...`` and ``disabling cudagraphs due to ...``);
- each recording of a function's graph, at DEBUG: ``[0/0] Recording
  function=partition_0, cuda_graph_id=1, inputs: ...`` (torch >= 2.12 adds
  ``mode=FORWARD, ``; older torch: ``Recording function 0 of graph recording
  id 1``, for a while with the name: ``Recording function 0 (f) of ...``);
- why a recorded graph could not be replayed, at DEBUG: ``[0/0] Re-recording
  function=partition_0, reason=static input data pointer changed.\\ninput
  name: arg0_1. data pointer changed from ... input stack trace: ...``. It is
  logged for each recorded graph that does not fit, even when another one
  then does: on its own it is no re-record (older torch logs no reason);
- a new tree for each dynamic size, at INFO: ``Recording cudagraph tree for
  symint key 16``.

:class:`CudagraphTracker` turns a thread's sequence of them into skips and
re-records: a re-record is a recording of a function (compile id, name and
mode) that was recorded before in the same tree manager, with the last
``Re-recording`` reason given for it, else the new size that made it. A
message about a re-record that none of these forms reads (a new wording)
is shown raw as its reason, marked not read: "torch gave no reason" only
where torch logged none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

RERECORD = "cudagraph_rerecord"  # the health signals this module's events are counted by
SKIP = "cudagraph_skip"

_SKIP = re.compile(r"^(?:skipping|disabling) cudagraphs?\b(?: due to)?\s*(?P<reason>.*)", re.DOTALL)
_FOUND_FROM = re.compile(r"\.? ?Found from ?:\s*", re.IGNORECASE)
_RECORDING = re.compile(
    r"^(?:\[(?P<compile_id>[^\]]*)\] )?Recording function=(?P<function>[^,]+), "
    r"(?:mode=(?P<mode>\w+), )?cuda_graph_id=(?P<graph>\d+)"
    r"|^Recording function (?P<function_id>\d+)(?: \([^)]*\))? "
    r"of graph recording id (?P<old_graph>\d+)")
_RERECORD_REASON = re.compile(
    r"^(?:\[(?P<compile_id>[^\]]*)\] )?Re-recording function=(?P<function>[^,]+), "
    r"(?:mode=\w+, )?reason=(?P<reason>.*)", re.DOTALL)
_WARMUP = re.compile(r"^\[(?P<compile_id>[^\]]*)\] Running warmup function=(?P<function>[^,]+)"
                     r"(?:, mode=(?P<mode>\w+))?")
_NEW_TREE = re.compile(r"^(?:\[[^\]]*\] )?[Rr]ecording cudagraph tree for "
                       r"(?:symint key (?P<key>.+)|graph without symints)")
# a message of a re-record's that none of the patterns above read: a reason in a new wording
_MENTIONS_RERECORD = re.compile(r"re-?record", re.IGNORECASE)
MAX_UNREAD = 200  # characters of an unread reason's first line, shown raw
_INPUT = re.compile(r"input name: (?P<name>[^\s.]+)\. data pointer changed from \S+ to \S+\. "
                    r"input stack trace: (?P<trace>.*?)(?=\ninput name: |\Z)",
                    re.DOTALL)


def parse_skip(message: str) -> Optional[str]:
    """A skip's reason as users read it (``mutated inputs (1 instances)`` and where), or None for
    any other message."""
    match = _SKIP.match(message)
    if match is None:
        return None
    # the stack torch quotes after "Found from", if any
    reason, *stack = _FOUND_FROM.split(match["reason"], maxsplit=1)
    # Only the first line: a re-record limit's reason goes on with every input's data pointers.
    return _with_place(reason.strip().partition("\n")[0].rstrip(".") or "no reason given",
                       stack[0] if stack else "")


def _with_place(reason: str, stack: str) -> str:
    # the events' module loads with the first event, as elsewhere
    from ...vocabulary.events import innermost_frame

    place = innermost_frame(stack.splitlines())
    return f"{reason}\nat {place}" if place else reason


def rerecord_reason(reason: str) -> str:
    """torch's ``Re-recording`` reason, shortened: the mismatch, the inputs it names and the first
    one's user line."""
    first_line, _, details = reason.partition("\n")
    inputs = list(_INPUT.finditer(details))
    text = first_line.strip().rstrip(".")
    if inputs:
        names = ", ".join(match["name"] for match in inputs)
        text += f" (input {names})"
        return _with_place(text, inputs[0]["trace"])
    return text


@dataclass
class _ThreadState:
    # (compile id, function, mode) recorded in this tree manager
    recorded: set[tuple[str, ...]] = field(default_factory=set)
    # warm-ups of a new function id with that key, not yet recorded
    warmed: dict[tuple[str, ...], int] = field(default_factory=dict)
    # (compile id, function): the last Re-recording reason
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)
    # the symint keys of new trees, by how many ints they have
    sizes: dict[int, set[str]] = field(default_factory=dict)
    # a new tree's symint key not seen before among keys of as many ints
    new_size: Optional[str] = None
    # the last message about a re-record in a form not read, since the last recording
    unread: Optional[str] = None


class CudagraphTracker:
    """Reads one process's CUDA-graph messages, in order, per thread;
    says which are skips and re-records.

    A re-record is a recording of a (compile id, function, mode) recorded
    before in the same tree manager. Two cases look alike and are not one:

    - A new function id with a recorded key: a warm-up run ("Running warmup
      function=...") comes first. It is a new dynamic size (a re-record) when a
      new tree's symint key came before it, else another function by the same
      name: torch 2.11 logs no mode, so a backward's ``partition_0`` reads as
      its forward's, and its first recording is no re-record.
    - The same function id recorded again: no warm-up; the reason is the last
      "Re-recording" one logged for it.

    A tree manager is per device and thread, and its graph ids start at 0: a
    recording with graph id 0 is a new manager (``torch._dynamo.reset()``
    drops them all), so what was recorded before no longer counts.
    """

    def __init__(self) -> None:
        self._threads: dict[Optional[str], _ThreadState] = {}

    def read(self, message: str, thread: Optional[str] = None) -> Optional[tuple[str, str]]:
        """``(signal, reason)`` when the message is a skip or a re-record; None otherwise."""
        skip = parse_skip(message)
        if skip is not None:
            return SKIP, skip
        state = self._threads.get(thread)
        if state is None:
            state = self._threads[thread] = _ThreadState()
        recording = _RECORDING.match(message)
        if recording is not None:
            return self._recorded(state, recording)
        warmup = _WARMUP.match(message)
        if warmup is not None:
            key = (warmup["compile_id"], warmup["function"], warmup["mode"] or "")
            state.warmed[key] = state.warmed.get(key, 0) + 1
            return None
        reason = _RERECORD_REASON.match(message)
        if reason is not None:
            state.reasons[(reason["compile_id"] or "", reason["function"])] = rerecord_reason(
                reason["reason"])
            return None
        tree = _NEW_TREE.match(message)
        if tree is not None:
            if tree["key"] is not None:
                _new_tree(state, tree["key"])
        elif _MENTIONS_RERECORD.search(message):
            state.unread = message
        return None

    def _recorded(self, state: _ThreadState, recording: re.Match[str]) -> Optional[tuple[str, str]]:
        # older torch's wording: a function id, unique in its tree manager
        if recording["function_id"] is not None:
            graph, function, compile_id = (recording["old_graph"],
                                           f"function {recording['function_id']}", "")
        else:
            graph, function, compile_id = (recording["graph"], recording["function"],
                                           recording["compile_id"] or "")
        if graph == "0":
            state.recorded.clear()
        key = (compile_id, function, recording["mode"] or "")
        reason = state.reasons.pop((compile_id, function), None)
        unread, state.unread = state.unread, None
        warmed = state.warmed.pop(key, 0)
        if warmed > 1:
            state.warmed[key] = warmed - 1
        if key not in state.recorded:
            state.recorded.add(key)
            state.new_size = None
            return None
        if warmed:  # a new function id under a recorded key
            if state.new_size is None:
                # another function by the same name: a backward where torch logs no mode
                return None
            reason, state.new_size = f"a new size (symint key {state.new_size})", None
        of_compile = f" of compile {compile_id}" if compile_id else ""
        return RERECORD, (f"{function}{of_compile} recorded again: "
                          f"{reason or _not_read(unread) or 'torch gave no reason'}")


def _not_read(message: Optional[str]) -> Optional[str]:
    """A reason torch gave in a form not read, shown raw (its first line), or None where it gave
    none."""
    if message is None:
        return None
    first = message.strip().partition("\n")[0]
    if len(first) > MAX_UNREAD:
        first = first[: MAX_UNREAD - 1] + "…"
    return f"torch's reason not read (a form pytest-nocompile does not know): {first}"


def _new_tree(state: _ThreadState, size: str) -> None:
    """A new tree for a symint key: a new size when keys of as many ints were seen, and not this
    one."""
    seen = state.sizes.setdefault(size.count(",") + 1, set())
    # the first of a step's new trees (its forward's) names the size
    if seen and size not in seen and state.new_size is None:
        state.new_size = size
    seen.add(size)
