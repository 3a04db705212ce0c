"""The one module that touches torch internals.

It switches dynamo's ``recompiles`` logging artifact on without printing
anything, hands each recompile message (and each recompile-limit warning) to a
sink, and puts every piece of torch state it changed back as it was. A torch
upgrade that moves these internals should need changes here and nowhere else.

Why not ``torch._logging.set_logs``: it clears all of torch's log state and is
ignored when ``TORCH_LOGS`` is set. Instead we add the artifact to
``log_state`` directly (dynamo builds the message only when it is enabled),
attach our handler, and silence only the logger we switched on ourselves, so a
user's own ``TORCH_LOGS=recompiles`` output stays intact.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import warnings
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Callable, Iterator, Optional

if TYPE_CHECKING:  # for annotations only: building these aliases at import costs every pytest run
    from ..events import CodeLocation

    # (message, compile id, user code, thread name when not the main thread)
    RecompileSink = Callable[[str, Optional[str], Optional[CodeLocation], Optional[str]], None]
    LimitSink = Callable[[str], None]
    GraphBreakSink = Callable[[str], None]

MIN_TORCH = (2, 4)
RECOMPILES_ARTIFACT = "recompiles"
VERBOSE_ARTIFACT = "recompiles_verbose"
GRAPH_BREAKS_ARTIFACT = "graph_breaks"
RECOMPILES_LOGGER = "torch._dynamo.guards.__recompiles"
VERBOSE_LOGGER = "torch._dynamo.guards.__recompiles_verbose"
# symbolic_convert logs one record per graph break it traces; the other two
# modules log graph breaks that end a frame before tracing starts.
GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)
# dynamo warns here when a frame hits recompile_limit; after that it logs no recompiles for it.
LIMIT_LOGGER = "torch._dynamo.convert_frame"



def compiled_anything() -> bool:
    """Whether dynamo compiled anything in this process; never imports torch or dynamo."""
    return _dynamo_utils() is not None and _compile_stamp() != (0, 0)


@cache
def torch_problem() -> str | None:
    """Why torch cannot be used by the plugin, or None when it can; imports torch, never dynamo."""
    try:
        with _torch_import_warnings_silenced():
            import torch
    except Exception as error:  # ImportError, or a broken install raising anything
        return f"torch cannot be imported ({type(error).__name__}: {error})"
    version = _parse_version(torch.__version__)
    if version < MIN_TORCH:
        needed = ".".join(map(str, MIN_TORCH))
        return f"torch {torch.__version__} is too old; pytest-nocompile needs torch>={needed}"
    return None


def torch_imported_or_missing() -> bool:
    """Whether torch is imported, or cannot be: then :func:`torch_problem` costs no import of torch."""
    return "torch" in sys.modules or not _torch_installed()


@cache
def _torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def _parse_version(text: str) -> tuple[int, int]:
    major, _, rest = text.partition(".")
    minor = "".join(ch for ch in rest.partition(".")[0] if ch.isdigit())
    return int(major), int(minor or 0)


@contextmanager
def _torch_import_warnings_silenced() -> Iterator[None]:
    """Hide warnings raised while the plugin itself imports or resets torch internals.

    torch 2.11's reset() imports inductor modules whose import emits a
    DeprecationWarning (torch.jit.script_method); under ``-W error`` that would
    fail the user's test for work the plugin did, not the test.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# A fresh process has compiled nothing and has nothing to reset; torch 2.11's
# reset() would import inductor (seconds) for a suite that never compiles.
_stamp_after_reset: tuple[int, int] = (0, 0)


def _dynamo_utils():  # type: ignore[no-untyped-def]
    """The module that holds dynamo's counters, once dynamo imported it; never imports it."""
    return sys.modules.get("torch._dynamo.utils")


def _compile_stamp() -> tuple[int, int]:
    counters = _dynamo_utils().counters
    # Every compile dynamo attempts moves one of these (fullgraph ones only the second).
    return int(counters["frames"]["total"]), int(counters["stats"]["unique_graphs"])


def reset_dynamo() -> None:
    """Clear dynamo's code caches and automatic-dynamic state (about 0.2 ms).

    Skipped when dynamo compiled nothing since the last reset done here (or
    ever): the caches are still empty, and suites of tests that never compile
    pay nothing.
    """
    global _stamp_after_reset
    if _dynamo_utils() is None or _compile_stamp() == _stamp_after_reset:
        return
    with _torch_import_warnings_silenced():
        import torch._dynamo

        torch._dynamo.reset()
    _stamp_after_reset = _compile_stamp()


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


class _SinkHandler(logging.Handler):
    def __init__(self, level: int, emit: Callable[[logging.LogRecord], None]) -> None:
        super().__init__(level)
        self._emit = emit

    def emit(self, record: logging.LogRecord) -> None:
        self._emit(record)


class _SinkFilter(logging.Filter):
    """Sees each record before any handler; drops it unless the user asked for it.

    A filter rather than a handler: pytest attaches its log-capture handler to
    every non-propagating logger, so only a filter keeps a record we enabled
    for ourselves out of "Captured log" sections. A logger that propagates is
    one the user (TORCH_LOGS, set_logs) switched on, even mid-test: keep those.
    """

    def __init__(self, emit: Callable[[logging.LogRecord], None]) -> None:
        super().__init__()
        self._emit = emit

    def filter(self, record: logging.LogRecord) -> bool:
        self._emit(record)
        return logging.getLogger(record.name).propagate


class _ArtifactTap:
    """One logging artifact switched on silently, its records sent to a sink, then restored."""

    def __init__(self, artifacts: tuple[str, ...], loggers: tuple[str, ...], emit: Callable[[logging.LogRecord], None]) -> None:
        self._artifacts = artifacts  # the first is the one we enable; any of them enabled by the user counts
        self._logger_names = loggers
        self._loggers: tuple[logging.Logger, ...] = ()  # looked up once: getLogger takes logging's lock
        self._filter = _SinkFilter(emit)
        self._saved: list[tuple[int, bool]] = []  # each logger's level and propagate, as the test found them
        self._enabled_in: object | None = None

    def start(self, state: object) -> None:
        if not self._loggers:
            self._loggers = tuple(map(logging.getLogger, self._logger_names))
        self._saved = [(logger.level, logger.propagate) for logger in self._loggers]
        if not any(state.is_artifact_enabled(name) for name in self._artifacts):  # type: ignore[attr-defined]
            state.enable_artifact(self._artifacts[0])  # type: ignore[attr-defined]
            self._enabled_in = state
            for logger in self._silenced():
                set_level(logger, logging.DEBUG)
                logger.propagate = False
        for logger in self._loggers:
            logger.addFilter(self._filter)

    def _silenced(self) -> Iterator[logging.Logger]:
        """The loggers we switch on and keep quiet (the verbose one only tells the artifact apart)."""
        return (logger for logger in self._loggers if logger.name != VERBOSE_LOGGER)

    def capturing(self) -> bool:
        """Whether torch still builds and routes these messages to us."""
        state = _logging_internals().log_state
        enabled = any(state.is_artifact_enabled(name) for name in self._artifacts)
        return enabled and all(self._filter in logger.filters for logger in self._loggers)

    def stop(self) -> None:
        # A logger we silenced that propagates again was switched on by the user
        # mid-test (set_logs): their configuration stays, ours goes.
        reconfigured = self._enabled_in is not None and any(logger.propagate for logger in self._silenced())
        for logger, (level, propagate) in zip(self._loggers, self._saved):
            logger.removeFilter(self._filter)
            if not reconfigured:
                set_level(logger, level)
                logger.propagate = propagate
        self._saved = []
        if self._enabled_in is not None and not reconfigured:
            self._enabled_in.artifact_names.discard(self._artifacts[0])  # type: ignore[attr-defined]
        self._enabled_in = None


@cache
def _logging_internals():  # type: ignore[no-untyped-def]
    """torch's logging internals, once the modules that own our artifact loggers are imported.

    Those modules configure their artifact loggers on import and would turn
    propagation back on for an artifact we had already enabled.
    """
    with _torch_import_warnings_silenced():
        import torch._dynamo.convert_frame
        import torch._dynamo.exc
        import torch._dynamo.guards
        import torch._dynamo.symbolic_convert  # noqa: F401
        import torch._logging._internal as torch_logging
    return torch_logging


_STARTED: set[RecompileCapture] = set()  # every capture now started in this process


class RecompileCapture:
    """Routes dynamo's recompile and graph-break messages to sinks while started.

    Built once per run and started for each watched test with that test's
    sinks: ``on_recompile(message, compile_id, user_code, thread)`` runs in the
    thread that recompiles, once per recompile; ``on_limit(message)`` once per
    recompile-limit warning; ``on_graph_break(message)`` once per graph break
    dynamo traces. ``stop()`` restores torch's logging state.
    """

    def __init__(self) -> None:
        self._on_recompile: RecompileSink | None = None
        self._on_limit: LimitSink | None = None
        self._on_graph_break: GraphBreakSink | None = None
        self._taps = [
            _ArtifactTap((RECOMPILES_ARTIFACT, VERBOSE_ARTIFACT), (RECOMPILES_LOGGER, VERBOSE_LOGGER), self._handle_recompile),
            _ArtifactTap((GRAPH_BREAKS_ARTIFACT,), GRAPH_BREAK_LOGGERS, self._handle_graph_break),
        ]
        self._limit_logger = logging.getLogger(LIMIT_LOGGER)
        self._limit_handler = _SinkHandler(logging.WARNING, self._handle_limit)
        self.active = False

    def start(self, on_recompile: RecompileSink, on_limit: LimitSink, on_graph_break: GraphBreakSink) -> None:
        self.stop()
        self._on_recompile, self._on_limit, self._on_graph_break = on_recompile, on_limit, on_graph_break
        state = _logging_internals().log_state  # read each time: torch rebinds it
        for tap in self._taps:
            tap.start(state)
        self._limit_logger.addHandler(self._limit_handler)
        self.active = True
        _STARTED.add(self)

    def stop(self) -> None:
        if not self.active:
            return
        self.active = False
        _STARTED.discard(self)
        self._limit_logger.removeHandler(self._limit_handler)
        for tap in reversed(self._taps):
            tap.stop()
        self._on_recompile = self._on_limit = self._on_graph_break = None  # let go of the test's record

    def capturing(self) -> bool:
        """False when something (``torch._logging.set_logs``) switched recompile capture off mid-test."""
        return self.active and self._taps[0].capturing()

    # The filters and the handler stay attached only while started, so a sink is always set here.
    def _handle_recompile(self, record: logging.LogRecord) -> None:
        thread = None if record.threadName == "MainThread" else record.threadName
        self._on_recompile(record.getMessage(), _current_compile_id(), find_user_code(sys._getframe(1)), thread)  # type: ignore[misc]

    def _handle_graph_break(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        # torch 2.4 and 2.5 ("Graph break: from user code at:") log the reason only as the record's
        # exception: format it in after the message, as a Formatter would, so the parser finds it.
        if record.exc_info and record.exc_info[1] is not None and "from user code at" in message.partition("\n")[0]:
            message = f"{message.rstrip()}\n{logging.Formatter().formatException(record.exc_info)}"
        self._on_graph_break(message)  # type: ignore[misc]

    def _handle_limit(self, record: logging.LogRecord) -> None:
        self._on_limit(record.getMessage())  # type: ignore[misc]


def graphs_compiled() -> int:
    """Graphs dynamo compiled in this process so far: first compiles, recompiles, each graph-broken piece."""
    # counters["frames"] skips fullgraph=True compiles; "unique_graphs" counts every graph.
    utils = _dynamo_utils()
    return 0 if utils is None else utils.counters["stats"]["unique_graphs"]


@contextmanager
def raising_on_recompile() -> Iterator[None]:
    """Make dynamo raise RecompileError at the recompiling call (first compiles still pass)."""
    import torch._dynamo.config

    with torch._dynamo.config.patch(error_on_recompile=True):
        yield


def _current_compile_id() -> str | None:
    try:
        from torch._guards import CompileContext

        compile_id = CompileContext.current_compile_id()
    except Exception:  # the API moved: the id is a nicety, the count is not
        return None
    return str(compile_id) if compile_id is not None else None


# A plain class with __slots__, not a NamedTuple: making a NamedTuple class
# costs about 0.4 ms at import, which every pytest run that loads the plugin
# would pay.
class _Roots:
    __slots__ = ("packages", "stdlib", "sites")

    def __init__(self, packages: tuple[str, ...], stdlib: tuple[str, ...], sites: tuple[str, ...]) -> None:
        self.packages = packages  # torch, pytest, pluggy, this plugin: never user code
        self.stdlib = stdlib
        self.sites = sites  # may sit inside stdlib; installed user packages live here


@cache
def _library_roots() -> _Roots:
    import sysconfig

    import _pytest
    import pluggy
    import torch

    def folder(path: str) -> str:
        return os.path.join(os.path.dirname(os.path.abspath(path)), "")

    paths = sysconfig.get_paths()
    return _Roots(
        packages=tuple(folder(module.__file__ or "") for module in (torch, pluggy, _pytest)) + (folder(__file__),),
        stdlib=tuple(os.path.join(paths[key], "") for key in ("stdlib", "platstdlib")),
        sites=tuple(os.path.join(paths[key], "") for key in ("purelib", "platlib")),
    )


def _is_user_file(filename: str, roots: _Roots) -> bool:
    if filename.startswith("<"):
        return False
    if filename.startswith(roots.packages):
        return False
    if filename.startswith(roots.stdlib):
        return filename.startswith(roots.sites)
    return True


def find_user_code(frame) -> CodeLocation | None:  # type: ignore[no-untyped-def]
    """The innermost frame outside torch, pytest, pluggy, the stdlib and this plugin."""
    import linecache

    from ..events import CodeLocation

    roots = _library_roots()
    while frame is not None:
        filename = frame.f_code.co_filename
        if _is_user_file(filename, roots):
            code = linecache.getline(filename, frame.f_lineno).strip() or None
            return CodeLocation(filename, frame.f_lineno, frame.f_code.co_name, code)
        frame = frame.f_back
    return None



def process_rank() -> int | None:
    """This process's rank: ``torch.distributed``'s once initialised, else ``RANK``, else ``LOCAL_RANK``, else None.

    Never imports torch.distributed: a process that has not imported it has no process group.
    """
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None:
        try:
            if distributed.is_available() and distributed.is_initialized():
                return int(distributed.get_rank())
        except Exception:  # a half-torn-down group: the environment still says
            pass
    for variable in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(variable, "")
        if value.isdigit():
            return int(value)
    return None


def stop_every_capture() -> None:
    """Stop every capture this process started: a forked child must not feed its parent's records."""
    for started in list(_STARTED):
        started.stop()
