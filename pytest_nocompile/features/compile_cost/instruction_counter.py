"""torch's compile instruction counter: whether it works here, switched on while armed, read as
deltas.

dynamo counts the CPU instructions of each frame compile (tracing and the
backend it calls; not a backward compiled lazily) in
``torch._dynamo.utils.CompileTimeInstructionCounter`` when
``torch._dynamo.config.record_compile_time_instruction_count`` is set (torch
>= 2.5). It reads a Linux perf event of the compiling thread. Where the
kernel refuses perf events (most containers and VMs: no hardware counter,
or ``kernel.perf_event_paranoid``), ``torch._C._instruction_counter.start()``
returns -1 after printing to the C stderr, and ``end(-1)`` adds 2**64 - 1
to the counter: so the counter is probed once per process with C's output
captured, and switched on only where it works.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from functools import cache
from typing import Any, Iterator, Optional

from .kinds import INSTRUCTIONS_SINCE

_IMPOSSIBLE = 2**63  # a delta this large is end(-1)'s 2**64 - 1: a failed read, not a count


@cache
def instruction_counter_problem() -> Optional[str]:
    """Why compile instructions cannot be counted in this process, or None when they can;
    needs torch._dynamo imported."""
    try:
        import torch
        import torch._dynamo.config as dynamo_config
        from torch._C import _instruction_counter
        from torch._dynamo.utils import CompileTimeInstructionCounter  # noqa: F401

        dynamo_config.record_compile_time_instruction_count  # noqa: B018
    except (ImportError, AttributeError):
        return (f"torch {getattr(sys.modules.get('torch'), '__version__', '?')} has no compile "
                f"instruction counter (it came in torch {'.'.join(map(str, INSTRUCTIONS_SINCE))})")
    with _c_output_captured() as said:
        handle = _instruction_counter.start()
        if handle != -1:
            _instruction_counter.end(handle)
    if handle == -1:
        why = said().strip() or "the perf event could not be opened"
        return (f"torch {torch.__version__} could not open a perf event to count instructions "
                f"({why}); containers and VMs often have no hardware counter or forbid perf "
                "events (kernel.perf_event_paranoid)")
    return None


def instructions_not_counted() -> Optional[str]:
    """Why this process's compiles were not counted in instructions;
    None when they were, or dynamo never came (nothing compiled)."""
    return instruction_counter_problem() if "torch._dynamo" in sys.modules else None


@contextmanager
def _c_output_captured() -> Iterator[Any]:
    """Send what C code writes to file descriptors 1 and 2 to a temporary file instead;
    yields a reader of it.

    torch's counter reports a failure with printf/fprintf, past Python's
    sys.stdout and sys.stderr: nothing the user did not ask for may show.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or odd stream: nothing of ours to flush
            pass
    import tempfile  # here: most runs never probe

    text = ""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = [os.dup(fd) for fd in (1, 2)]
        try:
            for fd in (1, 2):
                os.dup2(sink.fileno(), fd)
            yield lambda: text
        finally:
            for fd, original in zip((1, 2), saved):
                os.dup2(original, fd)
                os.close(original)
            sink.seek(0)
            text = sink.read().decode(errors="replace")


class InstructionCounting:
    """Switches dynamo's instruction counting on while armed (where it works), and reads what each
    compile added."""

    def __init__(self) -> None:
        self._switched_on = False  # we set the config: ours to put back
        self._last = 0  # the counter's value at our last read
        self._before = 0  # its value when we switched it on

    def arm(self) -> None:
        if instruction_counter_problem() is not None:
            return
        import torch._dynamo.config as dynamo_config
        from torch._dynamo.utils import CompileTimeInstructionCounter

        self._last = CompileTimeInstructionCounter.value()
        if not dynamo_config.record_compile_time_instruction_count:
            dynamo_config.record_compile_time_instruction_count = True
            self._switched_on = True
            self._before = self._last

    def disarm(self) -> None:
        if self._switched_on:
            import torch._dynamo.config as dynamo_config
            from torch._dynamo.utils import CompileTimeInstructionCounter

            dynamo_config.record_compile_time_instruction_count = False
            # What we counted is ours: torch's counter reads as if it had never run.
            CompileTimeInstructionCounter._counter = self._before
            self._switched_on = False

    def take(self) -> Optional[int]:
        """The instructions counted since the last take, or None when the counter does not run
        (ours, or the user's own: benchmarks switch it on)."""
        config = sys.modules.get("torch._dynamo.config")
        if not (getattr(config, "record_compile_time_instruction_count", False)
                and instruction_counter_problem() is None):
            return None
        from torch._dynamo.utils import CompileTimeInstructionCounter

        value = CompileTimeInstructionCounter.value()
        # User code (torch's own benchmarks) may clear() the counter: then all of it is new.
        added = value - self._last if value >= self._last else value
        self._last = value
        return added if 0 <= added < _IMPOSSIBLE else None
