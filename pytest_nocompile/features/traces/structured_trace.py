"""torch's structured trace (what ``TORCH_TRACE`` writes, read with tlparse) for one watched test,
in every process it runs.

torch writes it through the logger ``torch.__trace``: ``trace_structured``
builds a record only when that logger has a handler (it is always at DEBUG
and never propagates). ``torch._logging._init_logs``, run by ``import torch``,
gives it a ``LazyTraceHandler`` on the folder ``TORCH_TRACE`` names, which
opens ``dedicated_log_torch_trace_[rank_<N>_]<random>.log`` there at its first
record; without the variable that handler removes itself at its first record
(outside Meta's own machines). The same in torch 2.4 and 2.13; only 2.13
keeps the handler in ``LOG_TRACE_HANDLER`` and reopens a file after a fork.

A test's trace is therefore:

- **in the test's process**, a ``LazyTraceHandler`` of our own on
  ``torch.__trace``, attached once dynamo is imported (nothing writes a trace
  before) and removed when the test ends. torch's ``_init_logs`` (``set_logs``)
  clears only the handlers it made, so ours survives it. Nothing else of the
  logger (level, ``propagate``, its other handlers) is changed;
- **in the processes it starts**, the variable ``TORCH_TRACE`` naming the
  test's folder, which each reads as it imports torch (spawned ranks,
  ``subprocess``, ``torchrun``'s workers), for the test's duration. A process
  that was forked keeps the test process's handler (torch 2.13 opens a file of
  its own for it).

When torch itself is first imported during the test, it reads the variable
too and makes its own handler on the test's folder: that one writes this
process's trace (ours is not added beside it), and when the test ends it is
put back as the variable's absence would have made it (no folder; it removes
itself at its next record).

Nothing here imports torch: it acts only once torch's logging is imported.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

TRACE_VARIABLE = "TORCH_TRACE"
_LOGGING = "torch._logging._internal"


class StructuredTrace:
    """One watched test's structured trace, written to :attr:`folder` (made by the first process
    that writes)."""

    __slots__ = ("folder", "_handler", "_torch_took_it")

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._handler: Any = None  # ours, while attached
        # torch made its own handler on this folder (first imported during the test)
        self._torch_took_it = False

    def start(self) -> None:
        """The test begins: the processes it starts write their traces to its folder."""
        os.environ[TRACE_VARIABLE] = self.folder

    def attach(self) -> None:
        """This process's trace goes to the test's folder from now on (called once dynamo is
        imported)."""
        internal = sys.modules.get(_LOGGING)
        if internal is None or self._handler is not None:
            return
        handler_class = getattr(internal, "LazyTraceHandler", None)
        trace_log = getattr(internal, "trace_log", None)
        if handler_class is None or trace_log is None:  # a torch without structured traces
            return
        if any(self._writes_here(handler) for handler in trace_log.handlers):
            self._torch_took_it = True
            return
        handler = handler_class(self.folder)
        handler.setFormatter(internal.TorchLogsFormatter(trace=True))
        trace_log.addHandler(handler)
        self._handler = handler

    def stop(self) -> None:
        """The test ended: this process's handler off and its file closed, the variable as the test
        found it (unset)."""
        # else the test changed it itself: not ours to undo
        if os.environ.get(TRACE_VARIABLE) == self.folder:
            del os.environ[TRACE_VARIABLE]
        handler, self._handler = self._handler, None
        internal = sys.modules.get(_LOGGING)
        if handler is not None and internal is not None:
            internal.trace_log.removeHandler(handler)
            handler.close()
        if internal is not None and (self._torch_took_it or self._torchs_here(internal)):
            self._give_back(internal)

    def _writes_here(self, handler: Any) -> bool:
        return getattr(handler, "root_dir", None) == self.folder

    def _torchs_here(self, internal: Any) -> set[Any]:
        """torch's own handlers on this folder (one made after the test attached: torch imported in
        the test, no dynamo)."""
        return {handler for handler in (*internal.trace_log.handlers,
                                        getattr(internal, "LOG_TRACE_HANDLER", None))
                if handler is not None and self._writes_here(handler)}

    def _give_back(self, internal: Any) -> None:
        """torch's own handlers that took the test's folder: file closed, and no folder, as without
        the variable."""
        for handler in self._torchs_here(internal):
            handler.acquire()
            try:
                stream, handler.stream = handler.stream, None
                handler.root_dir = None
                if stream is not None:
                    stream.close()
            finally:
                handler.release()
        self._torch_took_it = False


def user_trace_folder() -> Optional[str]:
    """The folder the user's own ``TORCH_TRACE`` names, if they set it: torch writes every process's
    trace there."""
    return os.environ.get(TRACE_VARIABLE)
