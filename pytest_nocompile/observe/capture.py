"""The one module that touches torch internals: dynamo's logs, its caches and its config.

:data:`DYNAMO_LOGS` is this process's one capture of dynamo's logging. Every
sink that wants dynamo's events (a watched test's record, a block
assertion's own record, the reporter of a child process) attaches to it, and
each record dynamo logs goes to every attached sink: no sink can take a
record from another. It switches torch's logging on when the first sink
attaches and puts it back as it was when the last one detaches. A torch
upgrade that moves these internals should need changes here and nowhere else.

What it listens to, one logging artifact each:

- ``recompiles``: one record per recompile dynamo attempts (the message is
  built only when the artifact is enabled in torch's ``log_state``);
- ``graph_breaks``: one record per graph break dynamo traces;
- ``graph_code``: one record per graph dynamo hands to the backend, which is
  how compiles are counted: from dynamo itself, never from
  ``torch._dynamo.utils.counters``, which user code and torch's own
  ``TestCase`` clear. Its message (the graph's code) is never formatted;
- the ``torch._dynamo.convert_frame`` warning that a frame hit the recompile limit.

Compile-health signals (cache misses, CUDA-graph re-records, compile times)
come from *sources* (:meth:`DynamoLogs.add_source`), armed and disarmed with
the capture, which report through :meth:`DynamoLogs.emit_health`: the same
fan-out, so a test's record, a block assertion and a child's reporter all
hear them. The sources: :mod:`.counter_increments`, :mod:`.compile_metrics`,
:mod:`.cache_bypass_reasons` (torch's reason for each cache bypass counted) and
:mod:`.swallowed_errors` (the compile errors dynamo swallows).

Why not ``torch._logging.set_logs``: it clears all of torch's log state and is
ignored when ``TORCH_LOGS`` is set. Instead the capture adds the artifact to
``log_state`` directly, puts one filter first on each logger, and lets a
record through to torch's handlers only when the user switched that artifact
on (``TORCH_LOGS``, ``set_logs``): a user's own output stays intact, and ours
never prints. When torch re-initialises its logging while armed
(``_init_logs``, ``set_logs``, torch's ``log_settings`` test helper), the
capture re-arms itself right after, telling its own switches apart from the
user's.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from functools import cache
from typing import TYPE_CHECKING, Any, Callable, Optional

from .cache_bypass_reasons import CacheBypassReasons
from .compile_metrics import CompileMetricsSource
from .counter_increments import CounterIncrements
from .dynamo_state import torch_import_warnings_silenced
from .swallowed_errors import SwallowedErrors
from .user_code import find_user_code

if TYPE_CHECKING:
    from typing import Protocol

    from ..events import CodeLocation

    class Sink(Protocol):
        """What a sink takes: each method runs in the thread that compiled, once per record."""

        def add_recompile(self, message: str, compile_id: Optional[str], user_code: Optional[CodeLocation], thread: Optional[str]) -> None: ...
        def add_compile(self, compile_id: Optional[str], user_code: Optional[CodeLocation], thread: Optional[str]) -> None: ...
        def add_limit_warning(self, message: str, compile_id: Optional[str], thread: Optional[str]) -> None: ...
        def add_graph_break(self, message: str) -> None: ...
        def add_health(self, what: str, amount: float, reason: Optional[str], compile_id: Optional[str],
                       user_code: Optional[CodeLocation], thread: Optional[str], compiling: Optional[CodeLocation] = None) -> None: ...

    class Source(Protocol):
        """A source of health events besides the logs: hooked into torch while the capture is armed."""

        def arm(self) -> None: ...
        def disarm(self) -> None: ...

RECOMPILES_ARTIFACT = "recompiles"
VERBOSE_ARTIFACT = "recompiles_verbose"
GRAPH_BREAKS_ARTIFACT = "graph_breaks"
GRAPH_CODE_ARTIFACT = "graph_code"
RECOMPILES_LOGGER = "torch._dynamo.guards.__recompiles"
VERBOSE_LOGGER = "torch._dynamo.guards.__recompiles_verbose"
# symbolic_convert logs one record per graph break it traces; the other two
# modules log graph breaks that end a frame before tracing starts.
GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)
# output_graph logs each graph's code here just before handing it to the backend.
GRAPH_CODE_LOGGER = "torch._dynamo.output_graph.__graph_code"
# dynamo warns here when a frame hits recompile_limit; after that it logs no recompiles for it.
LIMIT_LOGGER = "torch._dynamo.convert_frame"


def set_level(logger: logging.Logger, level: int) -> None:
    """``logger.setLevel`` without its cost where it is not needed.

    setLevel clears the cache of every logger in the process (218 once torch is
    imported), because children inherit levels. The artifact loggers have no
    children, so clearing their own cache is enough; that was 75% of the
    plugin's per-test work.
    """
    if logger.level == level:
        return
    if _has_children(logger.name):
        logger.setLevel(level)
        return
    logger.level = level
    logger._cache.clear()  # type: ignore[attr-defined]  # stdlib's per-logger isEnabledFor cache


@cache
def _has_children(name: str) -> bool:
    # Cached: torch's artifact loggers ("...__recompiles") never get child loggers.
    prefix = name + "."
    return any(other.startswith(prefix) for other in list(logging.root.manager.loggerDict))


@cache
def _logging_internals():  # type: ignore[no-untyped-def]
    """torch's logging internals, once the modules that own our artifact loggers are imported.

    Those modules configure their artifact loggers on import and would reset
    a level we had already set.
    """
    with torch_import_warnings_silenced():
        import torch._dynamo.convert_frame
        import torch._dynamo.exc
        import torch._dynamo.guards
        import torch._dynamo.output_graph
        import torch._dynamo.symbolic_convert  # noqa: F401
        import torch._logging._internal as torch_logging
    return torch_logging


class _Fanout(logging.Filter):
    """The one filter a tap puts first on each of its loggers: every record to the hub, then on only if the user asked.

    A filter rather than a handler: pytest (>= 9.1) attaches its log-capture
    handler to every non-propagating logger, so only a filter that runs
    before any handler keeps a record we switched on for ourselves out of
    "Captured log" sections, and out of torch's own handlers.
    """

    def __init__(self, emit: Callable[[logging.LogRecord], None]) -> None:
        super().__init__()
        self._emit = emit
        self.passes = False  # the user switched this artifact on: the record goes on to their handlers

    def filter(self, record: logging.LogRecord) -> bool:
        self._emit(record)
        return self.passes


class _Tap:
    """One artifact's loggers, switched on silently (unless the user switched them on) and restored."""

    def __init__(self, artifacts: tuple[str, ...], loggers: tuple[str, ...], silenced: tuple[str, ...],
                 emit: Callable[[logging.LogRecord], None], enable_in_state: bool = True) -> None:
        self._artifacts = artifacts  # the first is the one we enable; any of them enabled by the user makes it theirs
        self._logger_names = loggers
        self._silenced_names = silenced  # those we set to DEBUG; the others only carry the filter
        self._enable_in_state = enable_in_state  # dynamo builds the message only when enabled (recompiles)
        self._loggers: tuple[logging.Logger, ...] = ()  # looked up once: getLogger takes logging's lock
        self._silenced: tuple[logging.Logger, ...] = ()
        self.filter = _Fanout(emit)
        self._saved: dict[logging.Logger, tuple[int, bool]] = {}  # what to put back: (level, propagate)
        self._ours: list[Any] = []  # the log states we enabled the artifact in

    def arm(self, internals: Any, after_reinit: bool = False) -> None:
        if not self._loggers:
            self._loggers = tuple(map(logging.getLogger, self._logger_names))
            self._silenced = tuple(logger for logger in self._loggers if logger.name in self._silenced_names)
        state = internals.log_state  # read each time: torch rebinds it
        for logger in self._loggers:
            if logger.filters[:1] != [self.filter]:  # first, so that no other filter hides a record from us
                if self.filter in logger.filters:
                    logger.removeFilter(self.filter)
                logger.filters.insert(0, self.filter)
        ours = any(state is mine for mine in self._ours)
        users = not ours and any(state.is_artifact_enabled(name) for name in self._artifacts)
        self.filter.passes = users
        if users:
            self._saved.clear()  # the user's configuration stands: nothing of ours to put back
            return
        if self._enable_in_state and not state.is_artifact_enabled(self._artifacts[0]):
            state.enable_artifact(self._artifacts[0])
            self._ours.append(state)
        for logger in self._silenced:
            if after_reinit:
                # torch just configured this logger, and configured it as switched on where the
                # artifact it saw enabled was ours: put back what torch does without us.
                self._saved[logger] = _torch_default(internals, self._artifacts[0]) if ours else (logger.level, logger.propagate)
            else:
                self._saved.setdefault(logger, (logger.level, logger.propagate))
            set_level(logger, logging.DEBUG)

    def forget_ours(self) -> None:
        """``set_logs`` is about to clear the log state: whatever is enabled after it is the user's."""
        for state in self._ours:
            state.artifact_names.discard(self._artifacts[0])
        self._ours.clear()

    def capturing(self, internals: Any) -> bool:
        """Whether torch still builds and routes these records to us."""
        if not all(self.filter in logger.filters for logger in self._loggers):
            return False
        state = internals.log_state
        if self.filter.passes:
            return any(state.is_artifact_enabled(name) for name in self._artifacts)
        enabled = not self._enable_in_state or state.is_artifact_enabled(self._artifacts[0])
        return enabled and all(logger.getEffectiveLevel() <= logging.DEBUG for logger in self._silenced)

    def disarm(self) -> None:
        for logger in self._loggers:
            logger.removeFilter(self.filter)
        for logger, (level, propagate) in self._saved.items():
            set_level(logger, level)
            logger.propagate = propagate
        self._saved.clear()
        self.forget_ours()


def _torch_default(internals: Any, artifact: str) -> tuple[int, bool]:
    """An artifact logger's (level, propagate) as torch's ``_init_logs`` leaves it when the artifact is off."""
    try:
        off_by_default = bool(internals.log_registry.is_off_by_default(artifact))
    except Exception:  # an older registry: torch let such loggers propagate
        off_by_default = False
    return logging.NOTSET, not off_by_default


class _LimitHandler(logging.Handler):
    def __init__(self, emit: Callable[[logging.LogRecord], None]) -> None:
        super().__init__(logging.WARNING)
        self._emit = emit

    def emit(self, record: logging.LogRecord) -> None:
        self._emit(record)


class DynamoLogs:
    """This process's one capture of dynamo's logs, fanned out to every attached sink."""

    def __init__(self) -> None:
        self._sinks: list[Sink] = []
        self._taps = (
            _Tap((RECOMPILES_ARTIFACT, VERBOSE_ARTIFACT), (RECOMPILES_LOGGER, VERBOSE_LOGGER), (RECOMPILES_LOGGER,), self._on_recompile),
            _Tap((GRAPH_BREAKS_ARTIFACT,), GRAPH_BREAK_LOGGERS, GRAPH_BREAK_LOGGERS, self._on_graph_break),
            # The level alone switches graph_code on: nothing in torch asks log_state about it.
            _Tap((GRAPH_CODE_ARTIFACT,), (GRAPH_CODE_LOGGER,), (GRAPH_CODE_LOGGER,), self._on_graph, enable_in_state=False),
        )
        self._limit_handler = _LimitHandler(self._on_limit)
        self._limit_logger: Optional[logging.Logger] = None  # looked up once: getLogger takes logging's lock
        self._patched: list[tuple[Any, str, Any, Any]] = []  # (module, name, torch's function, our wrapper)
        # Our wrapper of each torch function, made once per function (functools.wraps is most of arming's cost).
        self._wrappers: dict[tuple[Any, str], Callable[..., Any]] = {}
        from .cudagraph_logs import CudagraphLogs  # here: it builds on this module's taps

        self._sources: list[Source] = [CounterIncrements(self.emit_health, _wanted_signals), CompileMetricsSource(self.emit_health),
                                       CacheBypassReasons(self.emit_health, _wanted_signals), CudagraphLogs(self.emit_health)]
        self.armed = False

    def add_source(self, source: Source) -> None:
        """Arm ``source`` with the capture from now on (at once, if the capture is armed)."""
        if source not in self._sources:
            self._sources.append(source)
            if self.armed:
                source.arm()

    def emit_health(self, what: str, amount: float = 1, reason: Optional[str] = None, compile_id: Optional[str] = None) -> None:
        """A source's signal, to every sink, with the user code and thread of the moment, and the compile id
        (``compile_id``: the source's, when it knows one the moment no longer does)."""
        sinks = self._sinks
        if not sinks:
            return
        from .compiling_code import compiling_code  # here: a run that never compiles never loads it

        frame = sys._getframe(1)
        compile_id, user_code, compiling = compile_id or _current_compile_id(), find_user_code(frame), compiling_code(frame)
        name = threading.current_thread().name
        thread = None if name == "MainThread" else name
        for sink in sinks:
            sink.add_health(what, amount, reason, compile_id, user_code, thread, compiling)

    def attach(self, sink: Sink) -> None:
        """Send dynamo's records to ``sink`` too, from now on; arms the capture for the first sink."""
        if not self.armed:
            self._arm()
        if sink not in self._sinks:
            self._sinks = [*self._sinks, sink]  # a new list: a thread logging now keeps iterating the old one

    def detach(self, sink: Sink) -> None:
        """Stop sending to ``sink``; with the last one gone, torch's logging is as it was before."""
        if sink in self._sinks:
            self._sinks = [other for other in self._sinks if other is not sink]
        if not self._sinks and self.armed:
            self._disarm()

    def attached(self, sink: Sink) -> bool:
        return sink in self._sinks

    def check(self) -> bool:
        """Whether capture still works; if not (torch's log state swapped behind our back), re-arm and say False."""
        if not self.armed:
            return True
        internals = _logging_internals()
        if all(tap.capturing(internals) for tap in self._taps):
            return True
        self._rearm()
        return False

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's sinks are not this process's; stop capturing for them."""
        self._sinks = []
        if self.armed:
            self._disarm()

    def _arm(self) -> None:
        internals = _logging_internals()
        for tap in self._taps:
            tap.arm(internals)
        if self._limit_logger is None:
            self._limit_logger = logging.getLogger(LIMIT_LOGGER)
        self._limit_logger.addHandler(self._limit_handler)
        self._wrap_reinitialisers(internals)
        self.armed = True
        for source in self._sources:
            source.arm()

    def _disarm(self) -> None:
        self.armed = False
        for source in reversed(self._sources):
            source.disarm()
        for module, name, original, wrapper in self._patched:
            if getattr(module, name, None) is wrapper:  # else someone patched it after us: theirs to undo
                setattr(module, name, original)
        self._patched = []
        if self._limit_logger is not None:
            self._limit_logger.removeHandler(self._limit_handler)
        for tap in reversed(self._taps):
            tap.disarm()

    def _rearm(self) -> None:
        if self.armed:
            internals = _logging_internals()
            for tap in self._taps:
                tap.arm(internals, after_reinit=True)

    def _before_set_logs(self) -> None:
        if self.armed:
            for tap in self._taps:
                tap.forget_ours()

    def _wrap_reinitialisers(self, internals: Any) -> None:
        """Re-arm right after torch re-initialises its logging: ``_init_logs`` (which ``set_logs`` calls) and ``set_logs``."""
        import torch._logging as public

        def reinitialising(original: Callable[..., Any], before: Optional[Callable[[], None]] = None) -> Callable[..., Any]:
            @functools.wraps(original)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if before is not None:
                    before()
                try:
                    return original(*args, **kwargs)
                finally:
                    self._rearm()

            return wrapper

        for name, before in (("_init_logs", None), ("set_logs", self._before_set_logs)):
            original = getattr(internals, name, None)
            if original is None:
                continue
            wrapper = self._wrappers.get((original, name))
            if wrapper is None:
                wrapper = self._wrappers[(original, name)] = reinitialising(original, before)
            for module in (internals, public):
                if getattr(module, name, None) is original:
                    setattr(module, name, wrapper)
                    self._patched.append((module, name, original, wrapper))

    # -- records, in whatever thread dynamo compiles -----------------------------

    def _on_recompile(self, record: logging.LogRecord) -> None:
        from ..events import resumed_function

        message, compile_id, thread = record.getMessage(), _current_compile_id(), _thread(record)
        # After a graph break, the user's line is the call that brought the new value in, not the break.
        user_code = find_user_code(sys._getframe(1), resumed_function(message))
        for sink in self._sinks:
            sink.add_recompile(message, compile_id, user_code, thread)

    def _on_graph(self, record: logging.LogRecord) -> None:
        compile_id, user_code, thread = _current_compile_id(), find_user_code(sys._getframe(1)), _thread(record)
        for sink in self._sinks:
            sink.add_compile(compile_id, user_code, thread)

    def _on_graph_break(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        # torch 2.4 and 2.5 ("Graph break: from user code at:") log the reason only as the record's
        # exception: format it in after the message, as a Formatter would, so the parser finds it.
        if record.exc_info and record.exc_info[1] is not None and "from user code at" in message.partition("\n")[0]:
            message = f"{message.rstrip()}\n{logging.Formatter().formatException(record.exc_info)}"
        for sink in self._sinks:
            sink.add_graph_break(message)

    def _on_limit(self, record: logging.LogRecord) -> None:
        message, compile_id, thread = record.getMessage(), _current_compile_id(), _thread(record)
        if "hit config." not in message:
            return  # another warning of convert_frame
        for sink in self._sinks:
            sink.add_limit_warning(message, compile_id, thread)


def _wanted_signals() -> set[str]:
    """The signals the kinds name (counted or shown): the cache kind's include every cache outcome a warm start reads."""
    from ..budget import KINDS

    return {signal for kind in KINDS for signal in kind.health_signals}


DYNAMO_LOGS = DynamoLogs()
DYNAMO_LOGS.add_source(SwallowedErrors(DYNAMO_LOGS.emit_health))


def _thread(record: logging.LogRecord) -> Optional[str]:
    return None if record.threadName == "MainThread" else record.threadName


def _current_compile_id() -> str | None:
    try:
        from torch._guards import CompileContext

        compile_id = CompileContext.current_compile_id()
    except Exception:  # the API moved: the id is a nicety, the count is not
        return None
    return str(compile_id) if compile_id is not None else None


def stop_every_capture() -> None:
    """A forked child must not feed its parent's sinks: it stops the capture it inherited."""
    DYNAMO_LOGS.forget_after_fork()
