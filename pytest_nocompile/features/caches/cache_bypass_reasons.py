"""A source of health events: torch's reason for each compile-cache bypass, from the log record that
follows its count.

torch counts a bypass in ``torch._dynamo.utils.counters`` (which
:mod:`...observe.sources.counter_increments` reports) and right after logs why, on the cache
module's own logger (read in torch's sources, 2.4 to 2.15):

- ``torch._inductor.codecache``: ``"Bypassing FX Graph Cache because '%s'"``
  at INFO, from torch 2.5 (2.4 counts the bypass and logs nothing);
- ``torch._functorch._aot_autograd.autograd_cache``: ``"Bypassing autograd
  cache due to: %s"``, at INFO from 2.8 for a bypass found at lookup and at
  save; 2.7 logs only the bypass found at save (at INFO), 2.6 too (at
  WARNING), 2.5 none.

This source turns such a record into a health event of the same signal with
amount 0 and the reason: the record joins it to the bypass just counted
(:meth:`~...record.process_events.ProcessEvents.add_health`), so a bypass is counted
once, by torch's counter, and shown with its reason where torch gave one.

An INFO record is made only when the logger's level lets it through, and
these loggers are at WARNING unless the user said otherwise; lowering a
level would also make records of its child loggers (``__output_code``) that
pytest then captures. So the logger's levels are left alone: while armed,
the logger's ``info`` and ``warning`` methods are wrapped, on that logger
object only, to hand a bypass message's reason to us before torch's call
goes on as it would. Nothing is printed, made or captured that was not
before; disarming removes the wrappers.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Collection, Optional

from ...observe.patches import Patches

FX_GRAPH_BYPASS = "inductor.fxgraph_cache_bypass"
AUTOGRAD_BYPASS = "aot_autograd.autograd_cache_bypass"

# logger name -> (the start of torch's message template, the signal its bypass is counted as)
BYPASS_RECORDS: dict[str, tuple[str, str]] = {
    "torch._inductor.codecache": ("Bypassing FX Graph Cache because", FX_GRAPH_BYPASS),
    "torch._functorch._aot_autograd.autograd_cache": ("Bypassing autograd cache due to",
                                                      AUTOGRAD_BYPASS),
}
MAX_REASON = 300  # characters: torch's reason may hold a graph's repr


def short_reason(text: str) -> str:
    """torch's reason on one line: its lines joined, its outer quotes dropped, cut at
    :data:`MAX_REASON`."""
    joined = " ".join(part.strip() for part in text.splitlines() if part.strip())
    if len(joined) > 1 and joined[0] == joined[-1] == "'":
        joined = joined[1:-1]
    return joined if len(joined) <= MAX_REASON else joined[: MAX_REASON - 1] + "…"


def _wrapped(method: Callable[..., Any], template: str, signal: str,
             emit: Callable[[str, float, Optional[str]], None]) -> Callable[..., Any]:
    """``logger.info`` (or ``warning``) that first hands a bypass message's reason to ``emit``."""

    def log_method(msg: object, *args: Any, **kwargs: Any) -> Any:
        if isinstance(msg, str) and msg.startswith(template):
            try:
                emit(signal, 0, short_reason(str(args[0]) if args else msg))
            # a reason we cannot read is a reason we lack, not an error in the user's compile
            except Exception:
                pass
        return method(msg, *args, **kwargs)

    return log_method


# torch logs a bypass at INFO, and at WARNING where 2.6 found it at save.
_METHODS = ("info", "warning")


class CacheBypassReasons:
    """The source: while armed, each cache logger's ``info`` and ``warning`` wrapped;
    disarmed, torch's again."""

    signals = frozenset(signal for _, signal in BYPASS_RECORDS.values())

    def __init__(self, emit: Callable[[str, float, Optional[str]], None],
                 wanted: Callable[[], Collection[str]]) -> None:
        self._emit = emit
        self._wanted = wanted  # the signals the process reports now (see observe.wanted_signals)
        # Our wrappers of each logger's methods, in place as instance attributes while armed (the
        # class's methods stay as they are).
        self._patches = Patches()

    def arm(self) -> None:
        # the capture arms this source only where one of its signals is wanted: wrap those loggers
        wanted = self._wanted()
        for name, (template, signal) in BYPASS_RECORDS.items():
            if signal not in wanted:
                continue
            logger = logging.getLogger(name)
            for method in _METHODS:
                # the class's function, the same at every arming: its wrapper is made once
                self._patches.wrap(logger, method, self._reporting(logger, template, signal),
                                   original=getattr(type(logger), method))

    def disarm(self) -> None:
        self._patches.undo()

    def _reporting(self, logger: logging.Logger, template: str,
                   signal: str) -> Callable[[Any], Callable[..., Any]]:
        """What makes the wrapper of one of ``logger``'s methods from the class's function."""
        return lambda function: _wrapped(function.__get__(logger), template, signal, self._emit)
