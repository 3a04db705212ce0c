"""A watched test's child processes, seen from the test's process: where they report, and for how long.

Each watched test gets a directory of its own under the run's temporary
directory, named in :data:`~.event_files.ENV_VAR` from the test's setup to
its end; the processes it starts inherit the variable and report there
(:mod:`.startup`). Afterwards the variable is as the test found it and the
directory is gone; the run's directory goes when the run ends. A process
started outside any watched test never has the variable, so nothing it does
counts against a later test.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

from .event_files import ENV_VAR, EventDirectory

RUN_PREFIX = "pytest-nocompile-"  # then the pid of the process that runs the tests


class ChildReports:
    """Per run, in each process that runs tests: a directory per watched test, and the variable pointing at it."""

    def __init__(self) -> None:
        self._run_directory: Optional[str] = None  # made with the first watched test
        self._tests = 0
        # The variable as every test finds it: set only when pytest itself runs in a watched test's
        # process. Read once: a lookup of an absent variable raises and catches a KeyError, every test.
        self._found = os.environ.get(ENV_VAR)

    def begin(self) -> EventDirectory:
        """A test starts: its processes report to a directory of its own (made by the first that writes)."""
        if self._run_directory is None:
            import tempfile

            from .startup import install_fork_handler

            _remove_directories_of_dead_runs(tempfile.gettempdir())
            self._run_directory = tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-")
            install_fork_handler()  # a fork of this process during a test reports on its own
        self._tests += 1
        reports = EventDirectory(f"{self._run_directory}/{self._tests}")
        os.environ[ENV_VAR] = reports.path
        if "multiprocessing.forkserver" in sys.modules:
            _restart_fork_server()
        return reports

    def end(self, reports: EventDirectory, just_read: bool = False) -> None:
        """The test ended: the variable back as the test found it, and its directory removed (see EventDirectory.remove)."""
        if self._found is None:
            try:
                del os.environ[ENV_VAR]
            except KeyError:  # the test removed it itself
                pass
        else:
            os.environ[ENV_VAR] = self._found
        reports.remove(just_read)

    def close(self) -> None:
        """The run ended: remove its directory, with whatever a straggling process wrote late."""
        if self._run_directory is not None:
            import shutil

            shutil.rmtree(self._run_directory, ignore_errors=True)
            self._run_directory = None


def _remove_directories_of_dead_runs(folder: str) -> None:
    """Remove the run directories of processes that are gone: a run killed mid-way (a crashed xdist worker) left them."""
    import shutil

    try:
        entries = [entry.name for entry in os.scandir(folder) if entry.name.startswith(RUN_PREFIX)]
    except OSError:
        return
    for name in entries:
        pid = name[len(RUN_PREFIX):].partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def _restart_fork_server() -> None:
    """Stop multiprocessing's fork server if one runs: it restarts on its next use, with the test's environment.

    Its children are forked from it and inherit its environment, not the
    environment of the process that asked for them: a server started before
    this test would send them to no test, or to an earlier one.
    """
    forkserver = sys.modules.get("multiprocessing.forkserver")
    server = getattr(forkserver, "_forkserver", None)
    if server is not None and getattr(server, "_forkserver_pid", None) is not None:
        try:
            server._stop()  # what multiprocessing's own tests call; present from Python 3.8
        except Exception:
            pass
