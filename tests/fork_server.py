"""The fork server behind the ``run`` fixture: one interpreter that has imported torch, forked once
per inner pytest run.

This file is a program, started by ``forked_runs.ForkServer`` as
``python tests/fork_server.py REQUEST_FD RESPONSE_FD``; the tests never import
it. Each inner run used to start a fresh interpreter that spent most of its
CPU importing torch and the modules ``torch.compile`` imports. Here that import
happens once; each run is a ``fork`` that then turns itself into the process
``python -mpytest ARGS`` would have been (directory, environment, ``sys.argv``,
``sys.orig_argv``, ``sys.path``, a fresh ``__main__``, stdin at end of file,
stdout and stderr into pytester's files) and runs pytest the way ``-m`` does.
The run ends as that process would: a normal interpreter exit, with atexit
handlers, flushing and pytest's exit code.

What the server imports, and what it must not:

- torch, and the heavy modules that importing ``torch._dynamo`` brings in
  (:data:`PRELOAD`), but never ``torch._dynamo`` itself: the plugin takes
  another path when dynamo is already imported (it attaches at test set-up
  instead of when dynamo arrives, in the test that first compiles), and the
  inner runs must keep testing the path a user's run takes.
- never the plugin (``pytest_nocompile``): tests check what loading it does.
- no torch operation: torch's thread pools must not exist at fork time (a
  child of a process with a live OpenMP pool cannot use its own).

What it imported is then frozen out of the garbage collector (``gc.freeze``):
those objects live as long as any run does, and every full collection in a
run would otherwise walk them all. pytest collects twice at the end of each
run; with torch imported, that was about half the CPU of a run whose test
does nothing, and each compile's full collections added more.

The server refuses to serve (each run then falls back to a real subprocess)
when any of that does not hold, or when the imports warned: a warning raised
while the server imported torch would not be raised in the inner run, where
``-W error`` might have turned it into an error.

Protocol, one JSON object a line: the server says ``{"ready": {"modules": NAMES,
"user_site": BOOL}}`` (the top-level names it has imported, and whether a user
site-packages is on) or ``{"refused": REASON}``; then for each
request ``{"argv", "env", "cwd", "umask", "stdout", "stderr"}`` it answers
``{"pid": PID}`` at once and ``{"status": WAIT_STATUS}`` when the run ended. A
``{"kill": true}`` line in between kills the run (pytester's timeout). The end
of the request pipe ends the server, killing a run still going.
"""

from __future__ import annotations

import builtins
import gc
import importlib
import importlib.machinery
import json
import os
import runpy
import select
import signal
import site
import sys
import threading
import types
import warnings
from typing import Any

# Imported before forking: torch (about 1.1 CPU-s), then the heaviest parts of what importing
# torch._dynamo imports that import no torch._dynamo module (that import falls from about 1.1 to
# 0.45 CPU-s; torch 2.13 CPU). Each is a whole package or module importable on its own; some of
# dynamo's other dependencies (torch._inductor, aot_autograd's runtime wrappers) import dynamo or
# break its circular imports when imported first. Checked below: no torch._dynamo after these.
PRELOAD = (
    "torch", "sympy", "numpy.random", "torch.fx.experimental.symbolic_shapes",
    "torch._subclasses.fake_tensor", "torch.distributed", "torch.distributed.tensor",
    "torch.distributed.fsdp", "torch.onnx", "torch._higher_order_ops.triton_kernel_wrap",
)
DYNAMO = "torch._dynamo"
PLUGIN = "pytest_nocompile"


def preload() -> str | None:
    """Import :data:`PRELOAD`; why the server must not fork (None when it may)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in PRELOAD:
            importlib.import_module(name)
    if caught:
        return (f"importing {', '.join(PRELOAD)} warned: {caught[0].category.__name__}: "
                f"{caught[0].message}")
    if DYNAMO in sys.modules:
        return f"importing {', '.join(PRELOAD)} imported {DYNAMO}"
    if any(name == PLUGIN or name.startswith(PLUGIN + ".") for name in sys.modules):
        return f"the server imported {PLUGIN}"
    # A Python thread would be missing from each child. (numpy's OpenBLAS starts a native thread at
    # import; it shuts its pool down around fork and starts it again in the child, as for any forked
    # numpy user.)
    if threading.active_count() != 1:
        return (f"the server has {threading.active_count()} Python threads after importing: a "
                "forked child would lack them")
    return None


class Channel:
    """JSON lines over two pipe fds, unbuffered on the read side so that ``select`` sees every line
    not yet read."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._pending = b""

    def has_line(self) -> bool:
        return b"\n" in self._pending

    def read(self) -> dict[str, Any] | None:
        """The next message, or None at the end of the pipe."""
        while b"\n" not in self._pending:
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def write(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.write_fd, data):]

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.write_fd)


def serve(channel: Channel) -> dict[str, Any] | None:
    """Fork for each request until the request pipe ends; returns the request in a forked child,
    None in the server."""
    while (request := channel.read()) is not None:
        sys.stdout.flush()
        sys.stderr.flush()  # nothing buffered may be written twice, by the server and by the child
        pid = os.fork()
        if pid == 0:
            channel.close()
            return request
        channel.write({"pid": pid})
        channel.write({"status": wait_for(pid, channel)})
    return None


def wait_for(pid: int, channel: Channel) -> int:
    """Wait for the run ``pid``; a kill message kills it. Returns its wait status."""
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            readable = ([pidfd] if channel.has_line()
                        else select.select([pidfd, channel.read_fd], [], [])[0])
            if pidfd in readable:
                return os.waitpid(pid, 0)[1]
            message = channel.read()
            if message is None or message.get("kill"):
                # Through the pidfd: it names this child even if its pid were reused.
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                if message is None:  # the tests' process is gone: so is this server
                    os.waitpid(pid, 0)
                    raise SystemExit(0)
    finally:
        os.close(pidfd)


def become_python_m_pytest(request: dict[str, Any]) -> None:
    """Turn this forked child into ``python -mpytest ARGS`` started as pytester starts it, then run
    pytest.

    Returns only by raising: SystemExit with pytest's exit code, or the error a
    real interpreter would print before exiting with 1.
    """
    argv: list[str] = request["argv"]  # [sys.executable, "-mpytest", *args]
    os.chdir(request["cwd"])
    # a subprocess inherits the tests' process's, which a test may have changed
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    # stdin: a pipe whose writing end is closed, as pytester's CLOSE_STDIN leaves it.
    stdin_read, stdin_write = os.pipe()
    os.close(stdin_write)
    os.dup2(stdin_read, 0)
    os.close(stdin_read)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY)
        os.dup2(opened, fd)
        os.close(opened)
    sys.path[:] = python_m_path(os.getcwd(), os.environ.get("PYTHONPATH", ""), sys.path[1:])
    # the new path entries, and files the test wrote since the server started
    importlib.invalidate_caches()
    sys.orig_argv[:] = argv
    # what -m leaves in sys.argv[0] until runpy replaces it with the module's file
    sys.argv[:] = ["-m", *argv[2:]]
    # The interpreter's own __main__ as it is before -m runs a module; this file's module must not
    # be it.
    main = types.ModuleType("__main__")
    main.__dict__.update({"__builtins__": builtins, "__annotations__": {},
                          "__loader__": importlib.machinery.BuiltinImporter})
    sys.modules["__main__"] = main
    # what python -m does; pytest's __main__ raises SystemExit
    runpy._run_module_as_main("pytest")  # type: ignore[attr-defined]


def python_m_path(cwd: str, pythonpath: str, base: list[str]) -> list[str]:
    """``sys.path`` as ``python -m`` starts it in ``cwd`` with ``PYTHONPATH``, ``base`` being this
    interpreter's own.

    -m puts the directory first; site makes the PYTHONPATH entries absolute and
    drops repeats among them and the installation's entries, which follow.
    """
    path = [cwd]
    seen: set[str] = set()
    for entry in [*(pythonpath.split(os.pathsep) if pythonpath else []), *base]:
        absolute = os.path.abspath(entry)
        if os.path.normcase(absolute) not in seen:
            seen.add(os.path.normcase(absolute))
            path.append(absolute)
    return path


def main() -> dict[str, Any] | None:
    channel = Channel(int(sys.argv[1]), int(sys.argv[2]))
    problem = preload()
    if problem is not None:
        channel.write({"refused": problem})
        return None
    gc.freeze()  # see the module's docstring: a run's collections walk only what the run made
    modules = sorted({name.partition(".")[0] for name in sys.modules})
    # Where the user site-packages is on, HOME at start-up decides sys.path.
    channel.write({"ready": {"modules": modules, "user_site": bool(site.ENABLE_USER_SITE)}})
    return serve(channel)


if __name__ == "__main__":
    forked_request = main()
    if forked_request is not None:
        # At module level, so that pytest's SystemExit and any error end this child as they end an
        # interpreter.
        become_python_m_pytest(forked_request)
