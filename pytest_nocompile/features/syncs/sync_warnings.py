"""A source of health events: device-to-host syncs, one event per synchronizing CUDA operation, from
torch's sync debug mode.

In its "warn" mode (``torch.cuda.set_sync_debug_mode``), torch warns at each
synchronizing CUDA operation (``.item()``, ``nonzero``, a copy to the host):
c10's ``TORCH_WARN("called a synchronizing CUDA operation")``, which reaches
Python as a ``UserWarning`` reading ``called a synchronizing CUDA operation
(Triggered internally at ...)``, attributed to the Python line that called
the operation. While armed, this source

- sets the mode to "warn" where the user's is "default" (through torch's
  ``torch._C`` setter: ``torch.cuda.set_sync_debug_mode`` initialises CUDA,
  which a process that forks later must not have done), and puts the user's
  mode back when disarmed;
- puts one filter first in ``warnings.filters`` that lets every such warning
  through (``always``), ahead of the user's and pytest's filters, so that
  ``-W error`` cannot turn a counted sync into an error and ``once`` cannot
  hide a repeat, and wraps ``warnings._showwarnmsg`` (which Python's C
  warning code calls for each warning shown) to take each sync: it is
  counted, and shown only where the user asked torch to warn;
- stands in for ``torch.cuda.set_sync_debug_mode`` and ``get_sync_debug_mode``:
  a mode the user sets meanwhile is the user's (what the test sees, and what
  is left when disarmed), while syncs are still counted; "error" is applied
  as asked (torch then raises at each sync, which nothing counts).

A sync made while dynamo compiles a frame (inductor's own work: its
compile, autotuning) is reported as ``compile_sync``: a compile's, paid once,
shown beside the count and not counted in it. The user's line is found from the stack at the
warning, as for every health event (:meth:`~...observe.capture.DynamoLogs.emit_health`). This
source needs no dynamo: a test that never compiles is watched for syncs too
(:meth:`~...observe.capture.DynamoLogs.attach_early`). Without CUDA nothing can sync:
:func:`syncs_not_observed` says why, and the test's run says it once.

Where no Python called the operation (DDP's reducer, a communication hook),
torch's warning never reaches Python: c10 writes it to stderr. Those
:mod:`.cpp_syncs` counts, while armed, from what the stderr relay takes out
of fd 2: they reach the sinks a little later, so :meth:`SyncWarnings.settle`
waits for them before a count is read.
"""

from __future__ import annotations

import re
import sys
import warnings
from typing import Any, Callable, Collection, Optional

from ...observe.dynamo_state import torch_import_warnings_silenced
from .cpp_syncs import CppSyncs, settle
from .kind import COMPILE_SYNC_SIGNAL, SYNC_SIGNAL, SYNCS_UNSEEN_SIGNAL

# c10/cuda/CUDAFunctions.cpp, warn_or_error_on_sync()
SYNC_WARNING = "called a synchronizing CUDA operation"
DEFAULT, WARN, ERROR = 0, 1, 2  # torch's sync debug modes
# a warnings.filters entry
_FILTER = ("always", re.compile(re.escape(SYNC_WARNING)), UserWarning, None, 0)


def is_sync_warning(message: object, category: object) -> bool:
    """Whether a warning is torch's for a synchronizing CUDA operation."""
    return (isinstance(category, type) and issubclass(category, UserWarning)
            and str(message).startswith(SYNC_WARNING))


class SyncWarnings:
    """The source: while armed, torch warns at each sync, and each warning becomes a health event
    instead of a line of output."""

    signals = frozenset((SYNC_SIGNAL, COMPILE_SYNC_SIGNAL, SYNCS_UNSEEN_SIGNAL))
    needs_dynamo = False  # armed for a watched test whether or not dynamo is imported

    def __init__(self, emit: Callable[[str, float, Optional[str]], None],
                 wanted: Optional[Callable[[], Collection[str]]] = None) -> None:
        self._emit = emit
        # torch._C's (get, set) while armed
        self._modes: Optional[tuple[Callable[[], int], Callable[[int], None]]] = None
        # the mode the user set (before arming, or since, through torch.cuda)
        self._user_mode = DEFAULT
        self._show: Any = None  # warnings._showwarnmsg as found, while armed
        self._patched: list[tuple[Any, str, Any, Any]] = []  # (module, name, torch's, ours)
        self._cpp = CppSyncs(emit)  # the syncs torch warns of outside Python, from stderr

    def arm(self) -> None:
        if self._modes is not None:
            return
        torch: Any = sys.modules.get("torch")
        modes = _sync_modes(torch) if torch is not None and syncs_not_observed() is None else None
        if modes is None:
            # nothing can sync here, or torch is not imported yet (then nothing synced either)
            return
        get_mode, set_mode = modes
        self._user_mode = user_mode = get_mode()
        if user_mode == ERROR:
            return  # torch raises at the first sync, as the user asked: nothing to count
        if user_mode == DEFAULT:
            set_mode(WARN)
        self._modes = modes
        # a list, typed as a Sequence
        filters: list[Any] = warnings.filters  # type: ignore[assignment]
        filters.insert(0, _FILTER)
        _filters_changed()
        self._show = warnings._showwarnmsg  # type: ignore[attr-defined]
        self._patch(warnings, "_showwarnmsg", self._show_or_count)
        self._patch(torch.cuda, "set_sync_debug_mode", self._users_set_mode)
        self._patch(torch.cuda, "get_sync_debug_mode", self._users_get_mode)
        self._cpp.arm(show=user_mode == WARN)

    def disarm(self) -> None:
        modes, self._modes = self._modes, None
        if modes is None:
            return
        for module, name, original, ours in reversed(self._patched):
            # else someone patched it after us: theirs to undo
            if getattr(module, name, None) is ours:
                setattr(module, name, original)
        self._patched = []
        filters: list[Any] = warnings.filters  # type: ignore[assignment]
        for index, entry in enumerate(filters):
            if entry is _FILTER:
                del filters[index]
                _filters_changed()
                break
        get_mode, set_mode = modes
        if get_mode() != self._user_mode:
            set_mode(self._user_mode)
        self._cpp.disarm()  # after the mode is back: a C++ thread warns no more

    def settle(self) -> None:
        """Every sync torch's C++ code warned of so far has reached the sinks (read from stderr, a
        little after it happened): the capture asks before a count is read."""
        settle()

    def _patch(self, module: Any, name: str, ours: Any) -> None:
        original = getattr(module, name, None)
        if original is not None:
            setattr(module, name, ours)
            self._patched.append((module, name, original, ours))

    def _show_or_count(self, message: Any) -> None:
        """``warnings._showwarnmsg``: a sync is counted (and shown only where the user asked torch
        to warn); the rest go on."""
        try:
            sync = self._modes is not None and is_sync_warning(message.message, message.category)
        except Exception:
            sync = False
        if sync:
            from ...observe.user_code import compiling_code

            # A sync of dynamo's or inductor's own work while a frame compiles is paid once, not at
            # every step: shown, not counted.
            self._emit(COMPILE_SYNC_SIGNAL if compiling_code(sys._getframe(1))[0] is not None
                       else SYNC_SIGNAL, 1, None)
            if self._user_mode != WARN:
                return
        self._show(message)

    def _original(self, name: str) -> Any:
        return next(original for _, patched, original, _ in self._patched if patched == name)

    def _users_set_mode(self, debug_mode: Any) -> None:
        """``torch.cuda.set_sync_debug_mode`` while armed: the user's mode, remembered;
        syncs still warn unless it is "error"."""
        # torch's checks of the argument, and its CUDA initialisation
        self._original("set_sync_debug_mode")(debug_mode)
        if self._modes is None:
            return
        get_mode, set_mode = self._modes
        self._user_mode = get_mode()
        if self._user_mode == DEFAULT:
            set_mode(WARN)
        self._cpp.show(self._user_mode == WARN)

    def _users_get_mode(self) -> int:
        mode: int = self._original("get_sync_debug_mode")()  # its CUDA initialisation
        return self._user_mode if self._modes is not None else mode


def _sync_modes(torch: Any) -> Optional[tuple[Callable[[], int], Callable[[int], None]]]:
    """torch's own getter and setter of the sync debug mode (a build without CUDA has none)."""
    getter = getattr(torch._C, "_cuda_get_sync_debug_mode", None)
    setter = getattr(torch._C, "_cuda_set_sync_debug_mode", None)
    if getter is None or setter is None:
        return None

    def set_quietly(mode: int) -> None:
        # The setter warns once per process that the mode "is a prototype feature"
        # (TORCH_WARN_ONCE): the plugin's setting is no news to the user, and under -W error that
        # warning would raise.
        with torch_import_warnings_silenced():
            setter(mode)

    return getter, set_quietly


# the answer, once torch has given it: a GPU does not come or go
_NOT_OBSERVED: list[Optional[str]] = []


def syncs_not_observed() -> Optional[str]:
    """Why syncs cannot be observed in this process (``torch.cuda.is_available() is False``);
    None when they can, or torch is not imported (then nothing synced: not kept, it may be imported
    later)."""
    if _NOT_OBSERVED:
        return _NOT_OBSERVED[0]
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if _sync_modes(torch) is None:
        why: Optional[str] = f"torch {torch.__version__} is built without CUDA"
    else:
        try:
            why = None if torch.cuda.is_available() else "torch.cuda.is_available() is False"
        except Exception as error:  # a broken driver says so here
            why = f"torch.cuda.is_available() raised {type(error).__name__}"
    _NOT_OBSERVED.append(why)
    return why


def why_syncs_not_observed() -> Optional[str]:
    """:func:`syncs_not_observed`, as the syncs kind says it (``syncs were not observed: ...``)."""
    why = syncs_not_observed()
    return None if why is None else f"syncs were not observed: {why}"


def _filters_changed() -> None:
    """Tell Python's C warning code that ``warnings.filters`` changed (it caches which filter
    applies)."""
    changed = (getattr(warnings, "_filters_mutated", None)
               or getattr(warnings, "_filters_mutated_lock_held", None))
    if changed is not None:
        changed()
