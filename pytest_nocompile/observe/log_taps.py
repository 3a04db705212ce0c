"""Taps on torch's artifact loggers: each record to the capture, and on to torch's handlers only
where the user asked.

Why not ``torch._logging.set_logs``: it clears all of torch's log state and is
ignored when ``TORCH_LOGS`` is set. Instead a :class:`Tap` adds the artifact
to ``log_state`` directly, puts one filter first on each logger, and lets a
record through to torch's handlers only when the user switched that artifact
on (``TORCH_LOGS``, ``set_logs``): a user's own output stays intact, and ours
never prints. :class:`~.capture.DynamoLogs` owns the taps of dynamo's
artifacts; the CUDA-graph kinds' source (``features/cudagraphs/cudagraph_logs.py``) has one of
its own.
"""

from __future__ import annotations

import logging
import sys
from functools import cache
from typing import Any, Callable, Optional

from ..vocabulary.kinds import LOGS_NOT_READ
from .dynamo_state import torch_import_warnings_silenced


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
def logging_internals():  # type: ignore[no-untyped-def]
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


class Fanout(logging.Filter):
    """The one filter a tap puts first on each of its loggers: every record to the hub, then on only
    if the user asked.

    A filter rather than a handler: pytest (>= 9.1) attaches its log-capture
    handler to every non-propagating logger, so only a filter that runs
    before any handler keeps a record we switched on for ourselves out of
    "Captured log" sections, and out of torch's own handlers.
    """

    def __init__(self, emit: Callable[[logging.LogRecord], None]) -> None:
        super().__init__()
        self._emit = emit
        # the user switched this artifact on: the record goes on to their handlers
        self.passes = False

    def filter(self, record: logging.LogRecord) -> bool:
        self._emit(record)
        return self.passes


class Tap:
    """One artifact's loggers, switched on silently (unless the user switched them on) and
    restored."""

    def __init__(self, artifacts: tuple[str, ...], loggers: tuple[str, ...],
                 silenced: tuple[str, ...], emit: Callable[[logging.LogRecord], None],
                 enable_in_state: bool = True) -> None:
        # the first is the one we enable; any of them enabled by the user makes it theirs
        self._artifacts = artifacts
        self._logger_names = loggers
        self._silenced_names = silenced  # those we set to DEBUG; the others only carry the filter
        # dynamo builds the message only when enabled (recompiles)
        self._enable_in_state = enable_in_state
        # looked up once: getLogger takes logging's lock
        self._loggers: tuple[logging.Logger, ...] = ()
        self._silenced: tuple[logging.Logger, ...] = ()
        self.filter = Fanout(emit)
        # what to put back: (level, propagate)
        self._saved: dict[logging.Logger, tuple[int, bool]] = {}
        self._ours: list[Any] = []  # the log states we enabled the artifact in
        # Why torch would not let it arm (a torch that moved what it calls), or None: the kinds it
        # reads are then not measured, and nothing checks or re-arms it.
        self.broken: Optional[str] = None

    @property
    def artifact(self) -> str:
        """The artifact it switches on, by torch's name (``recompiles``)."""
        return self._artifacts[0]

    def arm_or_say_why(self, internals: Any, after_reinit: bool = False) -> None:
        """:meth:`arm`; where torch moved what it calls, remember why (:attr:`broken`) instead of
        raising into the test that attached."""
        try:
            self.arm(internals, after_reinit)
        except Exception as error:
            self.broken = f"{type(error).__name__}: {error}"
            torch = sys.modules.get("torch")
            LOGS_NOT_READ[self.artifact] = (
                f"torch {getattr(torch, '__version__', '?')} moved what pytest-nocompile calls to "
                f"read its {self.artifact} log ({self.broken})")

    def arm(self, internals: Any, after_reinit: bool = False) -> None:
        if not self._loggers:
            self._loggers = tuple(map(logging.getLogger, self._logger_names))
            self._silenced = tuple(logger for logger in self._loggers
                                   if logger.name in self._silenced_names)
        state = internals.log_state  # read each time: torch rebinds it
        ours_filter = self.filter
        for logger in self._loggers:
            filters = logger.filters
            # first, so that no other filter hides a record from us
            if not filters or filters[0] is not ours_filter:
                if ours_filter in filters:
                    logger.removeFilter(ours_filter)
                filters.insert(0, ours_filter)
        ours = False
        for mine in self._ours:
            if state is mine:
                ours = True
                break
        users = not ours and self._switched_on(state)
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
                self._saved[logger] = (_torch_default(internals, self._artifacts[0]) if ours
                                       else (logger.level, logger.propagate))
            else:
                self._saved.setdefault(logger, (logger.level, logger.propagate))
            set_level(logger, logging.DEBUG)

    def _switched_on(self, state: Any) -> bool:
        """Whether any of the tap's artifacts is on in torch's log state (the user's, where it is
        not ours)."""
        # a plain loop, not any() over a generator: asked at every arming and check
        for name in self._artifacts:
            if state.is_artifact_enabled(name):
                return True
        return False

    def forget_ours(self) -> None:
        """``set_logs`` is about to clear the log state: whatever is enabled after it is the
        user's."""
        for state in self._ours:
            state.artifact_names.discard(self._artifacts[0])
        self._ours.clear()

    def capturing(self, internals: Any) -> bool:
        """Whether torch still builds and routes these records to us."""
        if self.broken is not None:  # said as its kinds' reason for not measuring, not lost
            return True
        # Plain loops, not all() over generators: asked at every watched call's end.
        ours = self.filter
        for logger in self._loggers:
            if ours not in logger.filters:
                return False
        state = internals.log_state
        if ours.passes:
            return self._switched_on(state)
        if self._enable_in_state and not state.is_artifact_enabled(self._artifacts[0]):
            return False
        for logger in self._silenced:
            level = logger.level  # ours (DEBUG) nearly always; else what it inherits
            if (level or logger.getEffectiveLevel()) > logging.DEBUG:
                return False
        return True

    def disarm(self) -> None:
        for logger in self._loggers:
            logger.removeFilter(self.filter)
        for logger, (level, propagate) in self._saved.items():
            set_level(logger, level)
            logger.propagate = propagate
        self._saved.clear()
        self.forget_ours()


def _torch_default(internals: Any, artifact: str) -> tuple[int, bool]:
    """An artifact logger's (level, propagate) as torch's ``_init_logs`` leaves it when the artifact
    is off."""
    try:
        off_by_default = bool(internals.log_registry.is_off_by_default(artifact))
    except Exception:  # an older registry: torch let such loggers propagate
        off_by_default = False
    return logging.NOTSET, not off_by_default


class WarningHandler(logging.Handler):
    """Hands each warning (and worse) of the logger it is added to on to ``emit``: the
    recompile-limit warnings."""

    def __init__(self, emit: Callable[[logging.LogRecord], None]) -> None:
        super().__init__(logging.WARNING)
        self._emit = emit

    def emit(self, record: logging.LogRecord) -> None:
        self._emit(record)


def current_compile_id() -> str | None:
    """The id of the compile under way in this thread (``2/0``), or None;
    read at every record dynamo logs."""
    try:
        compile_id = _compile_id_reader()()
    except Exception:  # the API moved: the id is a nicety, the count is not
        return None
    return str(compile_id) if compile_id is not None else None


@cache
def _compile_id_reader() -> Callable[[], Any]:
    """torch's ``CompileContext.current_compile_id``, looked up once: read at every record dynamo
    logs."""
    from torch._guards import CompileContext

    return CompileContext.current_compile_id
