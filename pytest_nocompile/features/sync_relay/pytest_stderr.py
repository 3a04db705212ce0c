"""pytest's capture of fd 2, stepped around while the stderr relay is on: pytest never sees the
relay's pipe.

pytest's fd capture (``--capture=fd``, its default, and the ``capfd`` fixture) moves fd 2 between
its own files at every phase of a test, around ``capsys.disabled()``, live logs and the debugger: an
``FDCapture`` saves fd 2 with ``os.dup`` as it is made, and puts its file, or what it saved, on fd 2
with ``os.dup2``. While the relay is on (:mod:`.stderr_relay`), each of these steps runs with fd 2
as pytest left it (:meth:`~.stderr_relay.StderrRelay.aside`: what was written before is passed on to
the file it was meant for), and the relay takes the new fd 2 as where to pass on to afterwards.
Before pytest reads its file (``snap``: the end of a phase, ``capfd.readouterr()``), everything
written so far is passed on. Only captures of fd 2 are stepped around;
with no fd capture there is nothing to do.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, ContextManager, Protocol


class StderrRelay(Protocol):
    """What this module uses of :class:`.stderr_relay.StderrRelay`."""

    @property
    def on(self) -> bool: ...

    def aside(self) -> ContextManager[None]: ...

    def flush(self) -> None: ...

# FDCapture's methods that dup or dup2 its target fd
_MOVES_FD = ("__init__", "start", "done", "suspend", "resume")
_READS = ("snap",)
# each method is patched on the class that defines it
_CLASSES = ("FDCaptureBase", "FDCaptureBinary", "FDCapture")
_patched: list[tuple[type, str, Any, Any]] = []  # (class, name, pytest's, ours)


def step_around(relay: StderrRelay) -> None:
    """While ``relay`` is on: patch pytest's fd captures, if pytest's capture module is loaded
    (once)."""
    capture = sys.modules.get("_pytest.capture")
    if capture is None or _patched:
        return
    for class_name in _CLASSES:
        cls = getattr(capture, class_name, None)
        if not isinstance(cls, type):
            continue
        for name in (*_MOVES_FD, *_READS):
            original = vars(cls).get(name)
            if original is not None:
                ours = (_aside(original, relay) if name in _MOVES_FD
                        else _flushed_first(original, relay))
                setattr(cls, name, ours)
                _patched.append((cls, name, original, ours))


def stop_stepping_around() -> None:
    """The relay is off: pytest's classes as they were (where nobody patched them after us)."""
    while _patched:
        cls, name, original, ours = _patched.pop()
        if vars(cls).get(name) is ours:
            setattr(cls, name, original)


def _targets_stderr(capture: Any, args: tuple[Any, ...]) -> bool:
    target = getattr(capture, "targetfd", None)
    if target is None and args:  # __init__(self, targetfd)
        target = args[0]
    return target == 2


def _aside(method: Callable[..., Any], relay: StderrRelay) -> Callable[..., Any]:
    @functools.wraps(method)
    def with_fd2_as_found(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not (relay.on and _targets_stderr(self, args)):
            return method(self, *args, **kwargs)
        with relay.aside():
            return method(self, *args, **kwargs)

    return with_fd2_as_found


def _flushed_first(method: Callable[..., Any], relay: StderrRelay) -> Callable[..., Any]:
    @functools.wraps(method)
    def after_passing_on(self: Any, *args: Any, **kwargs: Any) -> Any:
        if relay.on and _targets_stderr(self, args):
            relay.flush()
        return method(self, *args, **kwargs)

    return after_passing_on
