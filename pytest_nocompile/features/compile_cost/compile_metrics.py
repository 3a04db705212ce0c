"""Compile time from torch's own compilation metrics, read as each entry is recorded: one health
source.

dynamo records one ``CompilationMetrics`` entry per frame it compiles (with
its time and, by torch version, a breakdown), one per backward graph
compiled lazily at the first ``backward()``, and from torch 2.7 one per
autotuning at run time. ``record_compilation_metrics`` appends each to the
module-level deque ``torch._dynamo.utils._compilation_metrics`` (torch 2.4
to 2.13 alike). While armed, that deque is replaced by one that also
reports each entry as it is appended: reading the deque later would miss
what ``clear_compilation_metrics()`` or its 64-entry limit dropped, and
entries already there before the test. torch's callbacks
(``torch._dynamo.callback``) are no alternative: ``torch._dynamo.reset()``
removes them.

What each version reports (the parts, :data:`~.kinds.PARTS`, are
made to not overlap, so they add up to the entry's total):

- 2.4 and 2.5: ``entire_frame_compile_time_s``, ``backend_compile_time_s``,
  ``inductor_compile_time_s``; a backward's ``BwdCompilationMetrics`` has
  only ``inductor_compile_time_s``. A failed compile's time is
  ``dynamo_time_before_restart_s``.
- 2.6 on: also ``duration_us``, ``dynamo_cumulative_compile_time_us``,
  ``aot_autograd_cumulative_compile_time_us`` (torch's name for the whole
  backend call), ``inductor_cumulative_compile_time_us``, and for a backward
  ``is_forward=False`` and ``backward_cumulative_compile_time_us``.
- 2.7 on: ``compile_time_autotune_time_us``, and ``is_runtime`` entries
  with ``runtime_triton_autotune_time_us``.
"""

from __future__ import annotations

import collections
import functools
import sys
from typing import Any, Callable, Collection, Optional

from ...observe.metrics_entries import METRICS_DEQUE, UTILS, is_frame
from .instruction_counter import InstructionCounting
from .kinds import (
    COMPILE_INSTRUCTIONS,
    COMPILE_SECONDS,
    PART_SIGNALS,
    breakdown_text,
)


class _ReportingDeque(collections.deque):
    """torch's metrics deque, which also hands each entry appended to ``report``."""

    def __init__(self, entries: Any, maxlen: Optional[int], report: Callable[[Any], None]) -> None:
        super().__init__(entries, maxlen)
        self.report = report

    def append(self, entry: Any) -> None:
        super().append(entry)
        try:
            self.report(entry)
        except Exception:  # never break torch's compile for a report of ours
            pass


class CompileMetricsSource:
    """A health source: for each compilation-metrics entry, its seconds, their parts, and the
    instructions counted."""

    signals = frozenset((COMPILE_SECONDS, *PART_SIGNALS, COMPILE_INSTRUCTIONS))

    def __init__(self, emit: Callable[..., None], wanted: Callable[[], Collection[str]]) -> None:
        self._emit = emit  # DYNAMO_LOGS.emit_health
        self._wanted = wanted  # the signals the process reports now (see observe.wanted_signals)
        self._ours: Optional[collections.deque[Any]] = None
        self._torchs: Optional[collections.deque[Any]] = None
        self.instructions = InstructionCounting()

    def arm(self) -> None:
        # The capture arms this source only where one of its signals is wanted;
        # instructions may not be.
        # dynamo counts instructions only when asked: a cost in every compile
        if COMPILE_INSTRUCTIONS in self._wanted():
            self.instructions.arm()
        utils = sys.modules.get(UTILS)
        current = getattr(utils, METRICS_DEQUE, None)
        if not isinstance(current, collections.deque) or isinstance(current, _ReportingDeque):
            return  # a torch without the deque, or armed already
        self._torchs = current
        self._ours = _ReportingDeque(current, current.maxlen, self.on_entry)
        setattr(utils, METRICS_DEQUE, self._ours)

    def disarm(self) -> None:
        self.instructions.disarm()
        utils, ours, torchs = sys.modules.get(UTILS), self._ours, self._torchs
        self._ours = self._torchs = None
        if ours is None or torchs is None:
            return
        current: object = getattr(utils, METRICS_DEQUE, None)
        if current is not ours:
            return  # set_compilation_metrics_limit() replaced ours: torch's own deque stands
        torchs.clear()
        torchs.extend(ours)  # torch's deque again, with what was recorded meanwhile
        setattr(utils, METRICS_DEQUE, torchs)

    def on_entry(self, entry: Any) -> None:
        """One entry recorded, in the thread that compiled: its health events."""
        measured = compile_seconds(entry)
        if measured is not None:
            total, parts, what = measured
            # A backward or an autotuning is one part: its name says all the breakdown would.
            reason = (f"{what}: {breakdown_text(parts) or 'no breakdown from torch'}"
                      if len(parts) > 1 else what)
            self._emit(COMPILE_SECONDS, round(total, 6), reason)
            for signal, seconds in parts.items():
                if seconds > 0:
                    self._emit(signal, round(seconds, 6))
        if is_frame(entry):  # dynamo's counter runs around frame compiles only
            counted = self.instructions.take()
            if counted is not None:
                self._emit(COMPILE_INSTRUCTIONS, float(counted), getattr(entry, "co_name", None))


# A frame's entry's total time, by the names torch 2.4 to 2.15 give it (the first one it has).
FRAME_TOTAL_FIELDS = ("entire_frame_compile_time_s", "duration_us", "dynamo_time_before_restart_s")


def compile_time_not_measured() -> Optional[str]:
    """Why compile times cannot be read in this process (a torch that moved its metrics, or renamed
    the fields of their entries); None when they can, or dynamo never came."""
    utils = sys.modules.get(UTILS)
    if utils is None:
        return None
    torch_version = getattr(sys.modules.get("torch"), "__version__", "?")
    if not isinstance(getattr(utils, METRICS_DEQUE, None), collections.deque):
        return (f"torch {torch_version} keeps no {UTILS}.{METRICS_DEQUE}, where the plugin reads "
                "each compile's time (torch 2.4 to 2.15 do)")
    fields = _entry_fields(getattr(utils, "CompilationMetrics", None))
    if fields is not None and fields.isdisjoint(FRAME_TOTAL_FIELDS):
        return (f"torch {torch_version}'s {UTILS}.CompilationMetrics has none of the fields "
                f"{', '.join(FRAME_TOTAL_FIELDS)}, where the plugin reads each compile's time "
                "(a field renamed)")
    return None


@functools.cache  # asked at every test with a compile-time budget: the class is torch's, for good
def _entry_fields(entry_class: Any) -> Optional[frozenset[str]]:
    """The field names of torch's class of metrics entries, or None where it is not a dataclass
    (nothing then says a field is missing)."""
    fields = getattr(entry_class, "__dataclass_fields__", None)
    return None if fields is None else frozenset(fields)


def compile_seconds(entry: Any) -> Optional[tuple[float, dict[str, float], str]]:
    """An entry's total seconds, its parts (``{part signal: seconds}``) and what compiled;
    None when it holds no compile time."""
    if getattr(entry, "is_runtime", False):
        autotune = _seconds(entry, "runtime_triton_autotune_time_us")
        # A run-time entry without autotuning records CUDA-graph recording: not compile time.
        return ((autotune, {f"{COMPILE_SECONDS}.autotune": autotune}, "autotuning at run time")
                if autotune else None)
    if not is_frame(entry):
        total = _seconds(entry, "backward_cumulative_compile_time_us", "duration_us",
                         "inductor_compile_time_s")
        return total, {f"{COMPILE_SECONDS}.backward": total}, "backward"
    total = _seconds(entry, *FRAME_TOTAL_FIELDS)
    backend = min(_seconds(entry, "aot_autograd_cumulative_compile_time_us",
                           "backend_compile_time_s"), total)
    inductor = min(_seconds(entry, "inductor_cumulative_compile_time_us",
                            "inductor_compile_time_s"), backend)
    autotune = min(_seconds(entry, "compile_time_autotune_time_us"), inductor)
    parts = {
        f"{COMPILE_SECONDS}.dynamo": total - backend,
        f"{COMPILE_SECONDS}.aot_autograd": backend - inductor,
        f"{COMPILE_SECONDS}.inductor": inductor - autotune,
        f"{COMPILE_SECONDS}.autotune": autotune,
    }
    return total, parts, str(getattr(entry, "co_name", None) or "a frame")


def _seconds(entry: Any, *fields: str) -> float:
    """The first of ``fields`` the entry has a number in, in seconds (``*_us`` fields are
    microseconds); 0.0 if none."""
    for name in fields:
        value = getattr(entry, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value / 1e6 if name.endswith("_us") else float(value)
    return 0.0
