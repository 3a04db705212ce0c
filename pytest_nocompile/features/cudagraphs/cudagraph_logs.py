"""A source of health events: CUDA-graph skips and re-records, read from the ``cudagraphs`` log
artifact.

Inductor's CUDA-graph trees (``mode="reduce-overhead"``) keep no counter of
re-records: they log them, at DEBUG, on ``torch._inductor.cudagraph_trees``'s
``cudagraphs`` artifact logger, and skips at WARNING on
``cudagraph_utils``'s (older torch: on its ``perf_hints`` one). This source
puts a filter first on those loggers, as the capture's taps do, and sets the
trees' logger to DEBUG where the user did not switch the artifact on.
Records go to :class:`~.cudagraph_messages.CudagraphTracker`, and each skip
or re-record to every sink as a health event.

What the user sees is unchanged: a record goes on to torch's handlers when
the user switched ``cudagraphs`` on (``TORCH_LOGS``, ``set_logs``), and
warnings (the skips torch prints by default) always do. The artifact is not
enabled in torch's log state: loggers of it created later (inductor is often
imported in the middle of a test) would then print their DEBUG records.
The loggers may not exist yet when the source arms: getting them by name
makes them, and torch configures the same objects when it imports the module.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Collection, Optional

from ...observe.log_taps import Fanout, Tap, logging_internals

if TYPE_CHECKING:
    from .cudagraph_messages import CudagraphTracker

ARTIFACT = "cudagraphs"
# recordings and re-record reasons, at DEBUG and INFO
TREES_LOGGER = "torch._inductor.cudagraph_trees.__cudagraphs"
SKIP_LOGGERS = (
    "torch._inductor.cudagraph_utils.__cudagraphs",
    # torch before skips moved to the cudagraphs artifact
    "torch._inductor.cudagraph_utils.__perf_hints",
    "torch._inductor.compile_fx.__perf_hints",
)


class _KeepsWarnings(Fanout):
    """The taps' filter, but a warning goes on to torch's handlers even where the user did not ask:
    torch prints skips by default."""

    def filter(self, record: logging.LogRecord) -> bool:
        self._emit(record)
        return self.passes or record.levelno >= logging.WARNING


class CudagraphLogs:
    """The source: arms a tap on the CUDA-graph loggers, reads each record, emits skips and
    re-records.

    The capture arms it only where the process wants its signals (see
    :mod:`...observe.wanted_signals`): arming and disarming the tap costs
    some 13 µs per watched test.
    """

    # cudagraph_messages.RERECORD and SKIP, spelled out: a run that never records a CUDA graph loads
    # no reader.
    signals = frozenset(("cudagraph_rerecord", "cudagraph_skip"))

    def __init__(self, emit: Callable[[str, float, Optional[str]], None],
                 wanted: Optional[Callable[[], Collection[str]]] = None) -> None:
        self._emit = emit
        # made at the first record: a run that never compiles loads no reader
        self._tracker: Optional[CudagraphTracker] = None
        self._tap = Tap((ARTIFACT,), (TREES_LOGGER, *SKIP_LOGGERS), (TREES_LOGGER,),
                        self._on_record, enable_in_state=False)
        self._tap.filter = _KeepsWarnings(self._on_record)

    def arm(self) -> None:
        # once until disarmed: the capture arms and disarms each source once
        self._tap.arm(logging_internals())

    def disarm(self) -> None:
        self._tap.disarm()

    def _on_record(self, record: logging.LogRecord) -> None:
        try:
            thread = None if record.threadName == "MainThread" else record.threadName
            tracker = self._tracker
            if tracker is None:
                from .cudagraph_messages import CudagraphTracker

                tracker = self._tracker = CudagraphTracker()
            found = tracker.read(record.getMessage(), thread)
        # a message we cannot read is a count we lack, not an error in the user's call
        except Exception:
            return
        if found is not None:
            signal, reason = found
            self._emit(signal, 1, reason)
