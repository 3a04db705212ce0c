"""What runs in a process a watched test started: its recompiles, limit hits and graph breaks go to the test.

The ``pytest-nocompile.pth`` start-up hook, installed with the package, calls
:func:`start` in every Python process of the environment whose environment
has :data:`~.event_files.ENV_VAR` set (and does nothing else, importing
nothing, when it is not). The variable is set by a watched test's process for
the test's duration, so this runs in the processes that test starts, at any
depth: ``multiprocessing`` (spawn, forkserver), ``torch.multiprocessing.spawn``,
``subprocess`` running Python, ``torchrun`` and its workers.

Capture arms only when the process's own code imports dynamo (a process that
never compiles imports nothing more and writes nothing). It never prints and
never changes the process's output or exit code; a user's own
``TORCH_LOGS=recompiles`` still prints, as in the test's process.

A forked child skips start-up hooks and inherits its parent's state, capture
included: :func:`_after_fork` stops what it inherited and reports from the
child, to a file of its own.
"""

from __future__ import annotations

import os
import sys
import time

from . import arrival
from .event_files import ENV_VAR, EventWriter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test starts)

if TYPE_CHECKING:
    from typing import Any, Optional

    from ..events import CodeLocation
    from ..record import RecompileRecord

_reporter: Optional[_Reporter] = None  # this process's, once it reports
_fork_handler_installed = False


def start() -> None:
    """The start-up hook's entry: report to the directory the environment names, if any."""
    directory = os.environ.get(ENV_VAR)
    # Once per process: site-packages reached by two paths (lib and lib64) runs a .pth twice.
    if directory and (_reporter is None or _reporter.pid != os.getpid()):
        try:
            report_to(directory)
        except Exception:  # never the child's problem
            pass


def report_to(directory: str) -> None:
    """Report this process's events to ``directory``, from when dynamo arrives (or now, if it has)."""
    global _reporter
    install_fork_handler()
    reporter = _reporter = _Reporter(directory)
    if arrival.dynamo_imported():
        reporter.arm()
    else:
        arrival.when_dynamo_arrives(reporter.arm)


def install_fork_handler() -> None:
    """Make every fork of this process report on its own while the variable is set (once per process)."""
    global _fork_handler_installed
    if not _fork_handler_installed:
        os.register_at_fork(after_in_child=_after_fork)
        _fork_handler_installed = True


def _after_fork() -> None:
    directory = os.environ.get(ENV_VAR)
    if not directory:
        return  # not inside a watched test (nor started by one): nothing to report
    try:
        capture = sys.modules.get(__package__ + ".capture")
        if capture is not None:
            capture.stop_every_capture()  # the parent's capture would feed records the parent never sees
        arrival.forget_callbacks()
        report_to(directory)
    except Exception:
        pass


def _report_totals_at_exit() -> None:
    if _reporter is not None:
        _reporter.report_totals()


def _register_multiprocessing_exit(_: object = None) -> None:
    """multiprocessing's forked workers end in ``os._exit``, past atexit: report from its own exit step too."""
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        return
    util.Finalize(None, _report_totals_at_exit, exitpriority=0)
    # A worker clears the finalizers it inherited when it starts; these run after that, in each one.
    util.register_after_fork(_register_multiprocessing_exit, _register_multiprocessing_exit)


class _Reporter:
    """Captures this process's events and writes each, with the process's running tallies, as it happens."""

    def __init__(self, directory: str) -> None:
        self.pid = os.getpid()
        self.writer = EventWriter(directory)
        self.record: Optional[RecompileRecord] = None
        self._base: list[int] = []  # the tallies this process inherited (a fork child): not its own
        self._written: Optional[dict[str, int]] = None
        self._rank: Optional[int] = None  # as last seen: it outlives destroy_process_group()

    def arm(self) -> None:
        try:
            self._arm()
        except Exception as error:
            self._write("problem", message=f"pytest-nocompile could not watch this process: {type(error).__name__}: {error}")

    def _arm(self) -> None:
        from . import capture

        problem = capture.torch_problem()
        if problem is not None:
            self._write("problem", message=problem)
            return
        from ..budget import KINDS, RecompileBudget
        from ..record import RecompileRecord

        record = RecompileRecord(RecompileBudget(), capture.graphs_compiled)
        self._base = [record.tally(kind) for kind in KINDS]
        self.record = record
        self._rank = capture.process_rank()
        capture.RecompileCapture().start(self._on_recompile, self._on_limit, self._on_graph_break)
        import atexit

        atexit.register(_report_totals_at_exit)
        _register_multiprocessing_exit()

    def _totals(self) -> dict[str, int]:
        from ..budget import KINDS  # imported by _arm already: a lookup

        record = self.record
        assert record is not None
        return {kind.key: record.tally(kind) - base for kind, base in zip(KINDS, self._base)}

    def _write(self, event: str, **fields: Any) -> None:
        capture = sys.modules.get(__package__ + ".capture")
        rank = capture.process_rank() if capture is not None else None
        if rank is None:
            rank = self._rank
        self._rank = rank
        entry: dict[str, Any] = {"t": time.time(), "pid": os.getpid(), "rank": rank, "event": event, **fields}
        if self.record is not None:
            entry["totals"] = self._written = self._totals()
        self.writer.write(entry)

    def _on_recompile(self, message: str, compile_id: Optional[str], user_code: Optional[CodeLocation], thread: Optional[str]) -> None:
        assert self.record is not None
        self.record.add_recompile(message, compile_id, user_code, thread)
        where = None if user_code is None else [user_code.filename, user_code.line, user_code.function, user_code.code]
        self._write("recompile", message=message, compile_id=compile_id, user_code=where, thread=thread)

    def _on_limit(self, message: str) -> None:
        assert self.record is not None
        self.record.add_limit_warning(message)
        self._write("limit", message=message)

    def _on_graph_break(self, message: str) -> None:
        assert self.record is not None
        self.record.add_graph_break(message)
        self._write("graph_break", message=message)

    def report_totals(self) -> None:
        """The tallies now, if they changed since the last line: compiles that no event reported."""
        if self.record is None:
            return
        try:
            totals = self._totals()
            if totals != self._written and any(totals.values()):
                self._write("totals")
        except Exception:
            pass
