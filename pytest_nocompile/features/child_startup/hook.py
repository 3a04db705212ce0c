"""The start-up hook's entries, and what a process the hook cannot reach calls instead.

Two files installed beside the package start a process's reporting, and on any
one Python exactly one of them runs (PEP 829):

- ``pytest-nocompile.start`` names :func:`start`; Python 3.15 and later call
  it at start-up, and ignore the import line of the ``.pth`` of the same name;
- ``pytest-nocompile.pth`` calls :func:`start_from_pth` on older Pythons
  (3.18 and later ignore its import line).

Both return at once, importing nothing, unless :data:`~.event_writer.ENV_VAR`
is set; then :mod:`.startup` reports this process to the watched test that
started it, once per process however often it is asked.

Stdlib only, like :mod:`.startup`: it runs in every Python of the environment.
"""

from __future__ import annotations

import os

# typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test starts)
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional, Union

ENV_VAR = "PYTEST_NOCOMPILE_EVENTS"  # event_writer.ENV_VAR, without importing it in every process
TRACE_VARIABLE = "TORCH_TRACE"  # features.traces.structured_trace.TRACE_VARIABLE, likewise
PTH_FILE = "pytest-nocompile.pth"
START_FILE = "pytest-nocompile.start"

# which of the two files started this process's hook; ``--nocompile-check-hook`` reads it
ran: list[str] = []
_fork_handler_installed = False


def start() -> None:
    """The entry point in ``pytest-nocompile.start`` (Python 3.15+)."""
    if os.environ.get(ENV_VAR):
        _start_reporting(START_FILE)


def start_from_pth() -> None:
    """What ``pytest-nocompile.pth`` calls (Pythons before 3.15; its own line
    checks the variable first)."""
    if os.environ.get(ENV_VAR):
        _start_reporting(PTH_FILE)


def _start_reporting(hook_file: str) -> None:
    try:
        if hook_file not in ran:
            ran.append(hook_file)
        install_fork_handler()  # its forks report on their own
        from . import startup

        # once per process: a second call (the other file, a second site-packages path) does nothing
        startup.start()
    except Exception:  # never the process's problem
        pass


def install_fork_handler() -> None:
    """Make every fork of this process report on its own while the variable
    is set (once per process).

    Here, not in :mod:`.startup`: a run installs it at its first watched test, and loads the
    reporting code only in a fork that has something to report.
    """
    global _fork_handler_installed
    if not _fork_handler_installed:
        os.register_at_fork(after_in_child=_after_fork)
        _fork_handler_installed = True


def _after_fork() -> None:
    directory = os.environ.get(ENV_VAR)
    if not directory:
        return  # not inside a watched test (nor started by one): nothing to report
    try:
        from . import startup

        startup.report_after_fork(directory)
    except Exception:  # never the child's problem
        pass


def watch_this_process(directory: Optional[Union[str, os.PathLike[str]]] = None) -> bool:
    """Report this process's compiles, recompiles and graph breaks to the
    watched test that started it.

    The start-up hook does this by itself in every Python process a watched
    test starts. Call this where the hook cannot run: in a process started
    with ``python -S``, in an embedded or frozen Python, from your own
    ``sitecustomize``, as coverage.py's ``process_startup()`` is called.
    Call it before the process compiles: what it compiled before is not seen.

    ``directory`` is where to report, by default the value of
    ``PYTEST_NOCOMPILE_EVENTS`` in this process's environment. Pass it
    explicitly when the environment lost the variable (hand the child the
    value its parent had); it is then set in this process's environment too,
    so the processes this one starts report as well.

    Returns whether this process reports: False outside a watched test (no
    variable and no ``directory``), where it does nothing. Calling it again,
    or in a process the hook already reports from, changes nothing.
    """
    if directory:
        os.environ[ENV_VAR] = os.fspath(directory)
    elif not os.environ.get(ENV_VAR):
        return False
    _start_reporting("watch_this_process()")
    return True


def child_env(env: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """``env`` (default: empty) plus ``PYTEST_NOCOMPILE_EVENTS`` (and, where set,
    ``PYTEST_NOCOMPILE_SYNCS`` and ``PYTEST_NOCOMPILE_STDERR_RELAY``, which say whether
    the run reads syncs and what this process's stderr passes through) when this
    process runs in a watched test.

    For a child started with an environment of its own, which would not be
    watched without the variable::

        subprocess.run([sys.executable, "train.py"], env=child_env({"PATH": "/usr/bin"}))
        with mock.patch.dict(os.environ, child_env(), clear=True): ...

    Where the test is traced (``--nocompile-trace-dir``, or your own
    ``TORCH_TRACE``), ``TORCH_TRACE`` is added too, so that the child's
    structured trace goes where the test's processes write theirs; a
    ``TORCH_TRACE`` of ``env``'s own is left as it is.

    Outside a watched test it returns a copy of ``env`` and nothing more.
    """
    result = dict(env) if env is not None else {}
    directory = os.environ.get(ENV_VAR)
    if directory:
        result[ENV_VAR] = directory
        trace = os.environ.get(TRACE_VARIABLE)
        if trace:
            result.setdefault(TRACE_VARIABLE, trace)
        for name in _kinds_variables():
            value = os.environ.get(name)
            if value is not None:
                result[name] = value
    return result


def _kinds_variables() -> list[str]:
    """The variables a child reads for the kinds it reads only where told, and their sources' own
    (syncs': ``PYTEST_NOCOMPILE_SYNCS``, ``PYTEST_NOCOMPILE_STDERR_RELAY``)."""
    from ...vocabulary.kinds import KINDS  # here: only child_env asks, in a watched test

    return [name for kind in KINDS
            for name in (kind.children_told_by, *kind.children_read_variables) if name]
