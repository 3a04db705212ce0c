"""Dynamo's logs, captured once per process and fanned out to every sink (torch's internals are
touched in this folder only).

:data:`DYNAMO_LOGS` is this process's one capture of dynamo's logging. Every
sink that wants dynamo's events (a watched test's record, a block
assertion's own record, the reporter of a child process) attaches to it, and
each record dynamo logs goes to every attached sink: no sink can take a
record from another. It switches torch's logging on when the first sink
attaches and puts it back as it was when the last one detaches. A torch
upgrade that moves these internals should need changes in ``observe/`` and nowhere else.

What it listens to, one logging artifact each:

- ``recompiles``: one record per recompile dynamo attempts (the message is
  built only when the artifact is enabled in torch's ``log_state``);
- ``graph_breaks``: one record per graph break dynamo traces;
- ``graph_code``: one record per graph dynamo hands to the backend, which is
  how compiles are counted: from dynamo itself, never from
  ``torch._dynamo.utils.counters``, which user code and torch's own
  ``TestCase`` clear. Its message (the graph's code) is never formatted;
- the ``torch._dynamo.convert_frame`` warning that a frame hit the recompile limit (a warning
  there in a form not read is kept as one where it refused a recompile that compiled no graph).

Compile-health signals (cache misses, CUDA-graph re-records, compile times)
come from *sources*, armed and disarmed with the capture where some signal of
theirs is wanted (:mod:`.wanted_signals`), which report through
:meth:`DynamoLogs.emit_health`: the same fan-out, so a test's record, a block
assertion and a child's reporter all hear them. The capture's own sources are
:mod:`.counter_increments` (torch's counters) and :mod:`.swallowed_errors`
(the compile errors dynamo swallows, read in every armed capture from the
warnings the limit handler also reads); the others are those the kinds name
(``BudgetKind.source``), the gates' own (compile metrics and torch's
instruction counter in ``features/compile_cost/``, torch's reason for each
cache bypass counted in ``features/caches/``, CUDA-graph logs in
``features/cudagraphs/``, syncs in ``features/syncs/``, kernel counts in
``features/kernels/``). A source that needs no dynamo (syncs: a test that
never compiles can sync) arms for a sink attached before dynamo is imported
(:meth:`DynamoLogs.attach_early`); the rest arm once it is. A source whose
signals arrive late (the syncs of torch's C++ code, read from stderr) is
waited for before a count is read (:meth:`DynamoLogs.settle`).

How each logger is tapped, and why not with ``set_logs``: :mod:`.log_taps`. When torch
re-initialises its logging while armed (``_init_logs``, ``set_logs``, torch's
``log_settings`` test helper), the capture re-arms itself right after,
telling its own switches apart from the user's.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Collection, Optional

from ..vocabulary.kinds import KINDS, kind_sources, resolve
from . import wanted_signals
from .log_taps import Tap, WarningHandler, current_compile_id, logging_internals
from .patches import Patches
from .user_code import find_user_code

if TYPE_CHECKING:
    from typing import Protocol

    from .sink import Event, Sink
    from .sources.swallowed_errors import SwallowedErrors

    class Source(Protocol):
        """A source of health events besides the logs: hooked into torch while the capture is
        armed."""

        @property
        def signals(self) -> frozenset[str]:
            """Those it reports: it arms only where one of them is wanted."""

        def arm(self) -> None: ...
        def disarm(self) -> None: ...

        # A source may say ``needs_dynamo = False``: it arms without dynamo too (read with getattr;
        # default True). One whose signals reach the sinks after they happened (the syncs of
        # torch's C++ code, read from stderr) has a ``settle()`` that waits until those of so far
        # have: see DynamoLogs.settle.

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
# torch 2.4 guards a bool by its identity: these are False's and True's ids in this process.
_BOOL_IDS = (id(False), id(True))


class DynamoLogs:
    """This process's one capture of dynamo's logs, fanned out to every attached sink."""

    def __init__(self) -> None:
        self._sinks: list[Sink] = []
        # looked up once: getLogger takes logging's lock
        self._limit_logger: Optional[logging.Logger] = None
        # our wrappers of torch's functions, in place while armed
        self._patches = Patches()
        # torch's functions that re-initialise its logging, and what to do before each (made once).
        self._reinitialisers: tuple[tuple[str, Optional[Callable[[], None]]], ...] = (
            ("_init_logs", None), ("set_logs", self._before_set_logs))
        # The taps, the limit handler and the sources are made when first needed (see _parts): a run
        # that never compiles, nor reads a source that needs no dynamo, never loads their modules.
        self._taps: tuple[Tap, ...] = ()
        self._limit_handler: Optional[WarningHandler] = None
        self._swallowed: Optional[SwallowedErrors] = None
        self._sources: list[Source] = []
        self._counters: Optional[Source] = None  # torch's counters, read for every kind
        self._made: dict[str, Source] = {}  # the kinds' sources made, by path
        self._sources_of: Optional[tuple[str, ...]] = None  # the paths self._sources was made of
        self._source_files: frozenset[str] = frozenset()  # the files they are defined in
        # the sources some wanted signal needs, for the set of signals below
        self._active: list[Source] = []
        self._active_for: Optional[frozenset[str]] = None
        self._armed_sources: list[Source] = []
        # the sources that report late (their settle()), and those of them armed now
        self._late: list[Source] = []
        self.settling: list[Source] = []
        self.armed = False

    def _parts(self) -> list[Source]:
        """The taps, the limit handler and the sources, made once (a kind's source once some kind
        names it); the sources returned."""
        if self._limit_handler is None:
            from .sources.counter_increments import CounterIncrements
            from .sources.swallowed_errors import SwallowedErrors

            self._taps = (
                Tap(("recompiles", "recompiles_verbose"), (RECOMPILES_LOGGER, VERBOSE_LOGGER),
                    (RECOMPILES_LOGGER,), self._on_recompile),
                Tap(("graph_breaks",), GRAPH_BREAK_LOGGERS, GRAPH_BREAK_LOGGERS,
                    self._on_graph_break),
                # The level alone switches graph_code on: nothing in torch asks log_state about it.
                Tap(("graph_code",), (GRAPH_CODE_LOGGER,), (GRAPH_CODE_LOGGER,), self._on_graph,
                    enable_in_state=False),
            )
            # read from the same warnings: one handler for both
            self._swallowed = SwallowedErrors(self.emit_health)
            self._counters = CounterIncrements(self.emit_health, wanted_signals.wanted_signals,
                                               wanted_signals.every_kinds_signals,
                                               not_counters=self._kind_sources_groups)
            self._limit_handler = WarningHandler(self._on_convert_frame_warning)
        paths = KINDS.derived(kind_sources)
        if paths is not self._sources_of:
            self._make_kind_sources(paths)
        return self._sources

    def _make_kind_sources(self, paths: tuple[str, ...]) -> None:
        """The sources the kinds name (``BudgetKind.source``), each made once: a table that grew
        (a gate's plugin registered) adds its sources."""
        for path in paths:
            if path not in self._made:
                self._made[path] = resolve(path)(self.emit_health, wanted_signals.wanted_signals)
        self._sources_of = paths
        self._source_files = frozenset(
            getattr(sys.modules.get(type(self._made[path]).__module__), "__file__", None) or ""
            for path in paths)
        assert self._counters is not None  # made first, by _parts
        self._sources = [self._counters, *(self._made[path] for path in paths)]
        self._late = [source for source in self._sources if hasattr(source, "settle")]
        self._active_for = None  # the active sources are chosen again

    def _kind_sources_groups(self) -> frozenset[str]:
        """The kinds' sources' own signals that name a group of dotted ones (``compile_seconds``,
        whose parts are ``compile_seconds.dynamo``, ...): those are not torch counters."""
        return frozenset(signal for path in KINDS.derived(kind_sources) if path in self._made
                         for signal in self._made[path].signals if "." not in signal)

    def wanted_widened(self) -> None:
        """More signals are wanted (:func:`.wanted_signals.want`): with sinks, arm the sources they
        need at once."""
        if self._sinks:
            self._arm_sources()

    def needs_dynamo(self, signals: Collection[str]) -> bool:
        """Whether some of ``signals`` come from dynamo or a source that arms only with it (False:
        syncs alone)."""
        early = {signal for source in self._parts() if not getattr(source, "needs_dynamo", True)
                 for signal in source.signals}
        return not early.issuperset(signals)

    def _arm_sources(self) -> None:
        """Arm the sources the wanted signals need (each once): a watched test that reads none arms
        none."""
        wanted = wanted_signals.wanted_signals()
        if wanted is not self._active_for:
            self._active_for = wanted
            self._active = [source for source in self._parts()
                            if not source.signals.isdisjoint(wanted)]
        for source in self._active:
            if source not in self._armed_sources and (self.armed
                                                      or not getattr(source, "needs_dynamo", True)):
                source.arm()
                self._armed_sources.append(source)
                if source in self._late:
                    self.settling = [*self.settling, source]

    def _disarm_sources(self) -> None:
        if self._armed_sources:
            self.settling = []
            for source in reversed(self._armed_sources):
                source.disarm()
            self._armed_sources = []

    def settle(self, sink: Optional[Sink] = None,
               signals: Optional[Collection[str]] = None) -> None:
        """Wait until what the armed sources report late (a source's ``settle()``: the syncs of
        torch's C++ code, read from stderr) has reached the sinks, up to now: asked before a count
        is read. ``sink``: only where it is attached; ``signals``: only the sources of those."""
        if sink is not None and sink not in self._sinks:
            return
        for source in self.settling:
            if signals is None or not source.signals.isdisjoint(signals):
                source.settle()  # type: ignore[attr-defined]

    def emit_health(self, what: str, amount: float = 1, reason: Optional[str] = None,
                    compile_id: Optional[str] = None, of_this_moment: bool = True) -> None:
        """A source's signal, to every sink, with the user code and thread of the moment, and the
        compile id (``compile_id``: the source's, when it knows one the moment no longer does;
        ``of_this_moment=False``: none, for a signal heard late, a C++ sync)."""
        if not self._sinks:
            return
        # here: a run that never compiles never loads them
        from ..vocabulary.events import HealthEvent
        from .compiled_modules import compiling

        frame = sys._getframe(1) if of_this_moment else None
        # a kind's source's own frames are not the user's (a gate's, outside the plugin)
        while frame is not None and frame.f_code.co_filename in self._source_files:
            frame = frame.f_back
        compile_id, user_code, (code, module) = (
            compile_id or (current_compile_id() if frame else None), find_user_code(frame),
            compiling(frame))
        name = threading.current_thread().name if of_this_moment else "MainThread"
        self._send(HealthEvent(what, amount, reason, compile_id, user_code,
                               thread=None if name == "MainThread" else name, compiling=code,
                               module=module))

    def attach(self, sink: Sink) -> None:
        """Send dynamo's records to ``sink`` too, from now on; arms the capture for the first sink
        (which hears what arming says)."""
        if sink not in self._sinks:
            # a new list: a thread logging now keeps iterating the old one
            self._sinks = [*self._sinks, sink]
        if not self.armed:
            self._arm()

    def attach_early(self, sink: Sink) -> None:
        """Send ``sink`` the signals of the sources that need no dynamo, before dynamo is imported
        (importing nothing);
        :meth:`attach` arms the rest once it is. Detach it as any sink."""
        if sink not in self._sinks:
            self._sinks = [*self._sinks, sink]
        self._arm_sources()

    def detach(self, sink: Sink) -> None:
        """Stop sending to ``sink``; with the last one gone, torch's logging is as it was before."""
        if sink in self._sinks:
            self._sinks = [other for other in self._sinks if other is not sink]
        if not self._sinks:
            if self.armed:
                self._disarm()
            elif self._armed_sources:  # attached early only
                self._disarm_sources()

    def attached(self, sink: Sink) -> bool:
        return sink in self._sinks

    def check(self) -> bool:
        """Whether capture still works; if not (torch's log state swapped behind our back), re-arm
        and say False."""
        if not self.armed:
            return True
        internals = logging_internals()
        # a plain loop, not all() over a generator: asked at every watched call's end
        for tap in self._taps:
            if not tap.capturing(internals):
                self._rearm()
                return False
        return True

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's sinks are not this process's; stop capturing for them.

        The child reports every signal, as any child does: it cannot know what its test reads.
        """
        wanted_signals.narrow(None)
        for sink in self._sinks:
            self.detach(sink)

    def _arm(self) -> None:
        self._parts()
        internals = logging_internals()
        for tap in self._taps:
            tap.arm_or_say_why(internals)
        if self._limit_logger is None:
            self._limit_logger = logging.getLogger(LIMIT_LOGGER)
        # made by _parts
        self._limit_logger.addHandler(self._limit_handler)  # type: ignore[arg-type]
        self._wrap_reinitialisers(internals)
        # where the user compiles a module, put back as the rest
        from .compiled_modules import remember_compile_sites

        remember_compile_sites(self._patches)
        self.armed = True
        self._arm_sources()

    def _disarm(self) -> None:
        self.armed = False
        self._disarm_sources()
        self._patches.undo()
        # both made by _arm
        self._limit_logger.removeHandler(self._limit_handler)  # type: ignore[union-attr, arg-type]
        for tap in reversed(self._taps):
            tap.disarm()

    def _rearm(self) -> None:
        if self.armed:
            internals = logging_internals()
            for tap in self._taps:
                if tap.broken is None:
                    tap.arm_or_say_why(internals, after_reinit=True)

    def _before_set_logs(self) -> None:
        if self.armed:
            for tap in self._taps:
                tap.forget_ours()

    def _wrap_reinitialisers(self, internals: Any) -> None:
        """Re-arm right after torch re-initialises its logging: ``_init_logs`` (which ``set_logs``
        calls) and ``set_logs``."""
        # internals' package, so imported with it: no import statement per test
        public = sys.modules["torch._logging"]

        def reinitialising(original: Callable[..., Any],
                           before: Optional[Callable[[], None]] = None) -> Callable[..., Any]:
            @functools.wraps(original)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if before is not None:
                    before()
                try:
                    return original(*args, **kwargs)
                finally:
                    self._rearm()

            return wrapper

        for name, before in self._reinitialisers:
            original = getattr(internals, name, None)
            if original is None:
                continue
            for module in (internals, public):
                if getattr(module, name, None) is original:
                    self._patches.wrap(module, name,
                                       functools.partial(reinitialising, before=before), original)

    # -- records, in whatever thread dynamo compiles -----------------------------

    def _send(self, event: Event) -> None:
        """One event, made once, to every sink."""
        for sink in self._sinks:
            sink.add(event)

    def _on_recompile(self, record: logging.LogRecord) -> None:
        from ..vocabulary.events import recompile_event, resumed_function, typed_bool_ids
        from .compiled_modules import compiling

        # A bool's identity guard is typed here, where its number is True's or False's id.
        message = typed_bool_ids(record.getMessage(), _BOOL_IDS)
        frame = sys._getframe(1)
        # After a graph break, the user's line is the call that brought the new value in, not the
        # break.
        self._send(recompile_event(message, compile_id=current_compile_id(),
                                   user_code=find_user_code(frame, resumed_function(message)),
                                   thread=_thread(record), module=compiling(frame)[1]))

    def _on_graph(self, record: logging.LogRecord) -> None:
        from ..vocabulary.events import CompileEvent
        from .compiled_modules import compiling

        frame = sys._getframe(1)
        code, module = compiling(frame)
        self._send(CompileEvent(current_compile_id(), find_user_code(frame),
                                thread=_thread(record), compiling=code, module=module))

    def _on_graph_break(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        # torch 2.4 and 2.5 ("Graph break: from user code at:") log the reason only as the record's
        # exception: format it in after the message, as a Formatter would, so the parser finds it.
        if (record.exc_info and record.exc_info[1] is not None
                and "from user code at" in message.partition("\n")[0]):
            message = f"{message.rstrip()}\n{logging.Formatter().formatException(record.exc_info)}"
        from ..vocabulary.display_paths import is_torch_file
        from ..vocabulary.graph_break_events import graph_break_event
        from .compiled_modules import compiling

        event = graph_break_event(message, is_torch_file)
        module = compiling(sys._getframe(1))[1]
        self._send(event if module is None else replace(event, module=module))

    def _on_convert_frame_warning(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        swallowed = self._swallowed  # made by _parts, before arming
        assert swallowed is not None
        if "hit config." not in message and swallowed.read(record, message):
            return  # a swallowed compile error
        from ..vocabulary.events import limit_hit_from_warning

        # a limit warning, or one in a form not read, which the record keeps where it refused a
        # recompile that then compiled no graph
        hit = limit_hit_from_warning(message, compile_id=current_compile_id())
        if hit is not None:
            self._send(hit)


DYNAMO_LOGS = DynamoLogs()


def _thread(record: logging.LogRecord) -> Optional[str]:
    return None if record.threadName == "MainThread" else record.threadName
