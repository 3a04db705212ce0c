"""The fork path of the ``run`` fixture: inner pytest runs forked from a server that has imported
torch once.

An inner run as a real subprocess spends about 2.5 of its 3 CPU seconds
starting Python and importing torch and what ``torch.compile`` imports.
:class:`ForkServer` starts ``tests/fork_server.py`` once per outer process (one
per xdist worker); it imports torch and dynamo's heavy dependencies, never
``torch._dynamo`` nor the plugin (see its docstring), and forks a child per run.

Only ``Pytester.popen`` is replaced (:func:`forking`), so pytester itself still
writes and reads the ``stdout`` and ``stderr`` files, times the run, converts the
exit code and builds the ``RunResult``, and its timeout kills the forked run as it
kills a subprocess. A run falls back to a real subprocess (:func:`why_not_forked`
says why) when it could behave differently in a forked child: the environment
differs from the server's in a variable that is read when Python, torch or the
plugin's start-up hook start; a path entry the run adds holds a module the server
has imported (a fake ``torch``) or a ``sitecustomize``; or the command is not
pytester's ``python -mpytest``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Mapping, Optional, Sequence

import pytest

SUBPROCESS_SWITCH = "NOCOMPILE_TESTS_SUBPROCESS"  # set to 1: every inner run is a real subprocess
SERVER_PROGRAM = Path(__file__).with_name("fork_server.py")

# Read by pytest or the terminal once the inner run is going, never at start-up nor by the server's
# imports: they may differ from the server's. (PYTEST_* too, except the plugin's own, below.)
RUN_TIME_VARIABLES = frozenset({"PY_COLORS", "COLUMNS", "LINES"})
# Read only to find the user site-packages at start-up (pytester sets it per test); inert where that
# is off.
HOME_VARIABLES = frozenset({"HOME", "USERPROFILE"})
# The plugin's start-up hook reads PYTEST_NOCOMPILE_EVENTS as Python starts.
PLUGIN_START_UP_PREFIX = "PYTEST_NOCOMPILE_"
# Any of these beside a run's path entries would be imported at start-up, or instead of the server's
# module.
START_UP_MODULES = frozenset({"sitecustomize", "usercustomize"})


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: ``environ`` without PYTHONPATH (each run's child builds its own
    ``sys.path``)."""
    return {name: value for name, value in environ.items() if name != "PYTHONPATH"}


def start_up_difference(environ: Mapping[str, str], other: Mapping[str, str],
                        user_site: bool) -> Optional[str]:
    """The first variable read at start-up whose value differs between the two environments, or
    None."""
    for name in sorted(set(environ) | set(other)):
        if environ.get(name) != other.get(name) and read_at_start_up(name, user_site):
            return name
    return None


def read_at_start_up(name: str, user_site: bool) -> bool:
    """Whether a forked run could see the server's value of ``name`` where a subprocess would see
    its own."""
    if name == "PYTHONPATH":
        return False  # the forked child builds sys.path from it as Python does
    if name.startswith("PYTEST_"):
        return name.startswith(PLUGIN_START_UP_PREFIX)
    if name in HOME_VARIABLES:
        return user_site
    return name not in RUN_TIME_VARIABLES


class ForkServer:
    """One ``fork_server.py`` process, started on first use, forking one child per inner run; one
    run at a time.

    Its environment is that of the tests' process at the start of a test
    (:meth:`follow`), so that a run whose test changed no variable forks.
    """

    def __init__(self, log: Path) -> None:
        self.log = log
        self.environment: dict[str, str] = {}
        self.refusal: Optional[str] = None  # why it cannot fork, once known
        self.modules: frozenset[str] = frozenset()  # top-level names the server imported
        self.user_site = True  # until the server says otherwise, HOME counts
        self.starts = 0
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._requests = -1
        self._responses: Optional[IO[bytes]] = None

    def follow(self, environ: Mapping[str, str]) -> None:
        """Serve the runs of a test that started with ``environ``: a server started with another one
        ends.

        The tests' process changes its own environment for good at times
        (inductor sets ``TORCHINDUCTOR_CACHE_DIR`` on its first compile), and a
        subprocess would inherit the change.
        """
        wanted = server_environment(environ)
        if start_up_difference(wanted, self.environment, self.user_site) is None:
            return
        self.close()
        self.environment = wanted
        self.refusal = None  # what refused before may not refuse now

    def available(self) -> bool:
        """Start the server if not yet started; whether it forks (else :attr:`refusal` says why)."""
        if self._process is None and self.refusal is None:
            self._start()
        return self.refusal is None

    def _start(self) -> None:
        if not hasattr(os, "pidfd_open"):
            self.refusal = "no os.pidfd_open here (Linux 5.3 and Python 3.9 needed)"
            return
        self.starts += 1
        request_read, self._requests = os.pipe()
        response_read, response_write = os.pipe()
        with self.log.open("ab") as log:
            # The server's stdio as an inner run's will be: stdout and stderr regular files (each
            # child points them at its own), stdin not a terminal. No descriptor of this process
            # leaks into it.
            self._process = subprocess.Popen(
                [sys.executable, str(SERVER_PROGRAM), str(request_read), str(response_write)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.environment,
                pass_fds=(request_read, response_write), cwd=SERVER_PROGRAM.parent,
            )
        os.close(request_read)
        os.close(response_write)
        self._responses = os.fdopen(response_read, "rb")
        hello = self._read()
        if hello is None or "refused" in hello:
            self.refusal = hello["refused"] if hello else f"the server exited; see {self.log}"
            self.close()
            return
        self.modules = frozenset(hello["ready"]["modules"])
        self.user_site = hello["ready"]["user_site"]

    def _read(self, timeout: Optional[float] = None) -> Optional[dict[str, Any]]:
        """The next message; None at the end of the pipe. Raises TimeoutError after ``timeout``
        seconds."""
        assert self._responses is not None
        if timeout is not None and not select.select([self._responses], [], [], timeout)[0]:
            raise TimeoutError
        line = self._responses.readline()
        message: Optional[dict[str, Any]] = json.loads(line) if line else None
        return message

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._requests, (json.dumps(message) + "\n").encode())

    def why_not_forked(self, cmdargs: Sequence[str], env: Mapping[str, str],
                       cwd: str) -> Optional[str]:
        """Why this run must be a real subprocess, or None when a forked child behaves as that
        subprocess would."""
        if list(cmdargs[:2]) != [sys.executable, "-mpytest"]:
            return f"not pytester's python -mpytest: {cmdargs[:2]}"
        if not self.available():
            return f"no fork server: {self.refusal}"
        name = start_up_difference(env, self.environment, self.user_site)
        if name is not None:
            return (f"{name} differs from the fork server's ({self.environment.get(name)!r}), "
                    "and is read at start-up")
        pythonpath = env.get("PYTHONPATH", "")
        for entry in [cwd, *(pythonpath.split(os.pathsep) if pythonpath else [])]:
            shadow = self._shadowing(os.path.join(cwd, entry))
            if shadow is not None:
                return (f"{shadow} would be imported at start-up or instead of the fork "
                        "server's module")
        return None

    def _shadowing(self, entry: str) -> Optional[str]:
        """A file or folder in path entry ``entry`` named like a module the server imported, or a
        start-up module."""
        try:
            names = os.listdir(entry)
        except OSError:
            return None
        for name in names:
            # torch, torch.py, torch.cpython-311-x86_64-linux-gnu.so
            module = name.partition(".")[0]
            if module in self.modules or module in START_UP_MODULES:
                return os.path.join(entry, name)
        return None

    def popen(self, cmdargs: Sequence[str], env: Mapping[str, str], cwd: str, stdout: Path,
              stderr: Path) -> ForkedProcess:
        """Fork ``python -mpytest ARGS`` as a child of the server, writing into the files ``stdout``
        and ``stderr``."""
        umask = os.umask(0)  # read by setting it: put back at once
        os.umask(umask)
        self._send({"argv": list(cmdargs), "env": dict(env), "cwd": cwd, "umask": umask,
                    "stdout": str(stdout), "stderr": str(stderr)})
        started = self._read()
        if started is None:
            raise RuntimeError(f"the fork server exited; see {self.log}")
        return ForkedProcess(self, list(cmdargs), started["pid"])

    def close(self) -> None:
        """End the server (the end of its request pipe ends it) and wait for it."""
        if self._process is None:
            return
        os.close(self._requests)
        self._process.wait()
        if self._responses is not None:
            self._responses.close()
        self._process = self._responses = None


class ForkedProcess:
    """The part of ``subprocess.Popen`` that ``Pytester.run`` uses, for a run forked by the
    server."""

    stdin = None  # the child's stdin is already at its end, as pytester's closed pipe leaves it

    def __init__(self, server: ForkServer, args: list[str], pid: int) -> None:
        self.server = server
        self.args = args
        self.pid = pid
        self.returncode: Optional[int] = None

    def wait(self, timeout: Optional[float] = None) -> int:
        if self.returncode is None:
            try:
                ended = self.server._read(timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            if ended is None:
                raise RuntimeError(f"the fork server exited; see {self.server.log}")
            # a signal's number negated, as Popen gives it
            self.returncode = os.waitstatus_to_exitcode(ended["status"])
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self.server._send({"kill": True})


class ForkingPopen:
    """A stand-in for ``pytester.popen``: forks where the run would behave as a subprocess, else
    starts the subprocess."""

    def __init__(self, pytester: pytest.Pytester, server: ForkServer) -> None:
        self.pytester = pytester
        self.server = server

    def __call__(self, cmdargs: Sequence[str], stdout: Any = subprocess.PIPE,
                 stderr: Any = subprocess.PIPE, stdin: Any = pytest.Pytester.CLOSE_STDIN,
                 **kw: Any) -> Any:
        # The environment Pytester.popen gives its subprocess: the working directory first in
        # PYTHONPATH.
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
        reason = ("not run by pytester.run"
                  if kw or stdin is not pytest.Pytester.CLOSE_STDIN or not hasattr(stdout, "name")
                  else self.server.why_not_forked(cmdargs, env, os.getcwd()))
        if reason is not None:
            print(f"    as a subprocess: {reason}")
            return pytest.Pytester.popen(self.pytester, cmdargs, stdout=stdout,
                                         stderr=stderr, stdin=stdin, **kw)
        print("    forked from the fork server")
        return self.server.popen(cmdargs, env, os.getcwd(), Path(stdout.name), Path(stderr.name))


@contextmanager
def forking(pytester: pytest.Pytester, server: ForkServer) -> Iterator[None]:
    """While open, ``pytester``'s subprocess runs are forked from ``server`` where they can be."""
    # a callable with popen's parameters
    pytester.popen = ForkingPopen(pytester, server)  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        del pytester.popen
