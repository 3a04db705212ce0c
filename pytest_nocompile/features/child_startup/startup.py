"""What runs in a process a watched test started: its recompiles, limit hits and
graph breaks go to the test.

The ``pytest-nocompile.pth`` start-up hook, installed with the package, calls
:func:`start` in every Python process of the environment whose environment
has :data:`~.event_writer.ENV_VAR` set (and does nothing else, importing
nothing, when it is not). The variable is set by a watched test's process for
the test's duration, so this runs in the processes that test starts, at any
depth: ``multiprocessing`` (spawn, forkserver), ``torch.multiprocessing.spawn``,
``subprocess`` running Python, ``torchrun`` and its workers.

Capture arms only when the process's own code imports dynamo (a process that
never compiles imports nothing more and writes nothing). A kind the process
reads only where told (``BudgetKind.children_told_by``: syncs) it reads where
the test's run does; where the run reads syncs, the sources that need no
dynamo (syncs) arm as torch finishes importing, or at once in a fork of a
process that imported it: a sync before the first compile counts too. Where
it does not, torch's sync debug mode is left alone. It never prints and
never changes the process's output or exit code, whatever the environment
(a ``RANK`` that is no number, no pytest importable): each event is written
as it happens, and anything that goes wrong is written as a ``problem`` line
if it can be, else dropped. A user's own ``TORCH_LOGS=recompiles`` still
prints, as in the test's process.

A forked child skips start-up hooks and inherits its parent's state, capture
included: :func:`report_after_fork` stops what it inherited and reports from the
child, to a file of its own.
"""

from __future__ import annotations

import os
import sys
import time

from ...observe import arrival
from .event_writer import ENV_VAR, MAX_MESSAGE, EventWriter

# typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test starts)
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Optional

    from ...observe.sink import Event
    from ...vocabulary.events import CodeLocation
    from ...vocabulary.module_names import CompiledModule

_reporter: Optional[_Reporter] = None  # this process's, once it reports
# Where the capture and dynamo's state live, looked up in sys.modules only: a child
# imports neither for us.
_OBSERVE = __package__.partition(".")[0] + ".observe"


def start() -> None:
    """The start-up hook's entry (its caller catches what it raises): report to the directory the
    environment names, if any."""
    directory = os.environ.get(ENV_VAR)
    # Once per process: site-packages reached by two paths (lib and lib64) runs a .pth twice.
    if directory and (_reporter is None or _reporter.pid != os.getpid()):
        report_to(directory)


def report_to(directory: str, forked_from: Optional[int] = None) -> None:
    """Report this process's events to ``directory``, from when dynamo arrives (or now,
    if it has); its forks report on their own once :func:`.hook.install_fork_handler`
    ran (every caller runs it).

    ``forked_from``: the parent's pid, in a fork that ran no ``exec`` (its
    command line is its parent's).
    """
    global _reporter
    reporter = _reporter = _Reporter(directory, forked_from)
    if arrival.dynamo_imported():
        reporter.arm()
    else:
        arrival.when_dynamo_arrives(reporter.arm)
        # what needs no dynamo (syncs) reports from torch's import on, where the run reads it
        arrival.when_torch_arrives(reporter.arm_early)


def report_after_fork(directory: str) -> None:
    """In a fork (see :func:`.hook.install_fork_handler`): stop what it inherited and report from
    the child, to a file of its own."""
    capture = sys.modules.get(_OBSERVE + ".capture")
    if capture is not None:
        # the parent's sinks would get records the parent never sees
        capture.DYNAMO_LOGS.forget_after_fork()
    arrival.forget_callbacks()
    report_to(directory, os.getppid())


class _Reporter:
    """A sink of this process's dynamo capture that writes each event as it happens, so no exit
    is needed to report it."""

    def __init__(self, directory: str, forked_from: Optional[int] = None) -> None:
        self.pid = os.getpid()
        self.writer = EventWriter(directory)
        self._rank: Optional[int] = None  # as last seen: it outlives destroy_process_group()
        self._world: Optional[int] = None  # the job's world size, as last seen with the rank
        self._forked_from = forked_from
        # what the process runs, made at its first line (multiprocessing names it by then)
        self._command: Optional[str] = None
        self._narrowed = False  # to what the test's run reads (once, at the first arming)

    def arm(self) -> None:
        try:
            from ...observe import dynamo_state

            problem = dynamo_state.torch_problem()
            if problem is not None:
                self._write("problem", message=problem)
                return
            from ...observe.capture import DYNAMO_LOGS

            self._read_what_the_run_reads()
            DYNAMO_LOGS.attach(self)
        except Exception as error:
            self._write("problem", message="pytest-nocompile could not watch this process: "
                                           f"{type(error).__name__}: {error}")

    def arm_early(self) -> None:
        """torch arrived (dynamo not yet): the sources that need no dynamo report from now on,
        where the test's run reads one of their kinds (syncs)."""
        try:
            from ...vocabulary.kinds import KINDS

            wanted = self._read_what_the_run_reads()
            if any(not kind.needs_dynamo and not wanted.isdisjoint(kind.signals)
                   for kind in KINDS):
                from ...observe.capture import DYNAMO_LOGS

                DYNAMO_LOGS.attach_early(self)
        except Exception as error:
            self._write("problem", message="pytest-nocompile could not watch this process: "
                                           f"{type(error).__name__}: {error}")

    def _read_what_the_run_reads(self) -> frozenset[str]:
        """The signals this process reports: every kind's but those of the kinds told to children
        that the test's run does not read, as its process said (their sources never arm here:
        syncs' would turn torch's sync debug mode on). Narrowed once."""
        from ...observe import wanted_signals

        if not self._narrowed:
            self._narrowed = True
            from ...vocabulary.kinds import KINDS, told_to_children

            unread = frozenset(signal for kind in KINDS.derived(told_to_children)
                               if os.environ.get(kind.children_told_by) != "1"
                               for signal in kind.health_signals)
            if unread:
                wanted_signals.narrow(wanted_signals.wanted_signals() - unread)
        return wanted_signals.wanted_signals()

    def _write(self, event: str, **fields: Any) -> None:
        """Write one line; never raises (a sink's error would reach dynamo, and
        end the child's compile)."""
        try:
            message = fields.get("message")
            if message is not None:
                fields["message"] = str(message)[:MAX_MESSAGE]
            state = sys.modules.get(_OBSERVE + ".dynamo_state")
            try:
                rank, world = ((state.process_rank(), state.process_world_size())
                               if state is not None else (None, None))
            except Exception:  # RANK=² and such: no rank, and no error of ours in the child
                rank, world = None, None
            if rank is None:
                rank, world = self._rank, self._world
            self._rank, self._world = rank, world
            if self._command is None:
                from .command_line import this_process

                self._command = this_process(self._forked_from)
            self.writer.write({"t": time.time(), "rank": rank, "world": world, "cmd": self._command,
                               "event": event, **fields})
        except Exception as error:  # a line lost: the test hears of it
            self.writer.unreported(type(error).__name__)

    def add(self, event: Event) -> None:
        """The sink's (:class:`~pytest_nocompile.observe.sink.Sink`): one line per event, with the
        text torch logged (the test's process reads it again)."""
        # loaded by the capture that made the event
        from ...vocabulary.events import CompileEvent, RecompileEvent, RecompileLimitHit
        from ...vocabulary.graph_break_events import GraphBreakEvent

        if isinstance(event, RecompileEvent):
            self._write("recompile", message=event.message, compile_id=event.compile_id,
                        user_code=_where(event.user_code), thread=event.thread,
                        **_module(event.module))
        elif isinstance(event, CompileEvent):
            self._write("compile", compile_id=event.compile_id, user_code=_where(event.user_code),
                        thread=event.thread, compiling=_where(event.compiling),
                        **_module(event.module))
        elif isinstance(event, RecompileLimitHit):
            self._write("limit", message=event.message, compile_id=event.compile_id)
        elif isinstance(event, GraphBreakEvent):
            self._write("graph_break", message=event.message, **_module(event.module))
        else:
            self._write("health", what=event.what, amount=event.amount, message=event.reason,
                        compile_id=event.compile_id, user_code=_where(event.user_code),
                        thread=event.thread, compiling=_where(event.compiling),
                        **_module(event.module))


def _module(module: Optional[CompiledModule]) -> dict[str, Any]:
    """A line's ``module`` field, where dynamo compiled a module's method (older readers skip a
    field they do not know)."""
    return {} if module is None else {"module": module.to_dict()}


def _where(user_code: Optional[CodeLocation]) -> Optional[list[Any]]:
    try:
        return (None if user_code is None
                else [user_code.filename, user_code.line, user_code.function, user_code.code])
    except Exception:
        return None
