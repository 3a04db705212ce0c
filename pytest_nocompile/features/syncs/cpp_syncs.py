"""Syncs torch warns of outside Python's warning machinery: counted from the lines c10 writes to
stderr, never printed.

torch's sync debug mode warns with c10's ``TORCH_WARN``. Where Python called the operation, torch's
warning handler makes that a Python warning (:mod:`.sync_warnings` counts it, with the user's line).
Where it did not (DDP's reducer and communication hooks, c10d's C++ entry points, torch's C++
threads), c10's logger writes it to the process's stderr::

    [rank0]:[W1127 14:41:40.996158070 CUDAFunctions.cpp:162] Warning: called a synchronizing CUDA operation (function warn_or_error_on_sync)

While the sync source is armed in a process that has initialised CUDA (no sync can come before),
fd 2 goes through the stderr relay (:mod:`..sync_relay.stderr_relay`): each such line of this process's is one
``sync`` event, listed as :data:`~.kind.CPP_SYNC_PLACE` (it has no line of the user's), and
is shown only where the user set the mode to "warn" themselves. A line that names another rank than
this process's is a child's that has no relay of its own: not counted here, and not shown either.

Where such lines cannot be seen (``TORCH_CPP_LOG_LEVEL`` above WARNING makes c10 drop them; a
relay that cannot start or stops answering), the count is a lower bound: the sinks attached then
hear one :data:`~.kind.SYNCS_UNSEEN_SIGNAL` event saying why (as the source arms, a sink
that arms it is attached already).

:func:`settle` waits until the relay has passed on what fd 2 got so far: a count read after it
has every such sync made before.
"""  # noqa: E501

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Optional

from .kind import CPP_SYNC_PLACE, SYNC_SIGNAL, SYNCS_UNSEEN_SIGNAL

if TYPE_CHECKING:
    from ..sync_relay.stderr_relay import StderrRelay

# the relay's module, loaded only where a relay was started
_RELAY = __package__.rpartition(".")[0] + ".sync_relay.stderr_relay"
# c10's TORCH_CPP_LOG_LEVEL values above WARNING
_QUIET_LEVELS = frozenset({"ERROR", "FATAL", "2", "3"})


class CppSyncs:
    """The sync source's part for syncs in torch's C++ code: the relay on while armed, its lines
    made events."""

    def __init__(self, emit: Callable[..., None]) -> None:
        self._emit = emit  # DynamoLogs.emit_health
        self._armed = False
        self._show = False  # sync lines passed on: the user's own "warn" mode
        # why such syncs are not seen while armed (the count a lower bound)
        self._unseen: Optional[str] = None
        # torch.cuda, while a call back of ours waits in its queue for CUDA's initialisation
        self._queued_in: Any = None
        self._rank: Optional[int] = None  # this process's, as last seen

    def arm(self, show: bool) -> None:
        self._armed, self._unseen, self._show = True, None, show
        quiet = os.environ.get("TORCH_CPP_LOG_LEVEL", "").strip().upper()
        if quiet in _QUIET_LEVELS:
            self._broken(f"TORCH_CPP_LOG_LEVEL={quiet} turns torch's C++ warnings off")
        elif os.name != "posix":
            self._broken("the stderr relay they are read through needs a POSIX system")
        else:
            self._start_with_cuda()

    def disarm(self) -> None:
        self._armed = False
        self._withdraw()
        _relay().stop()

    def show(self, on: bool) -> None:
        self._show = on
        _relay().show(on)

    def _start_with_cuda(self) -> None:
        """The relay on now where CUDA is initialised, else as CUDA initialises (a process that
        never uses it pays nothing)."""
        cuda: Any = getattr(sys.modules.get("torch"), "cuda", None)
        if cuda is None:
            return
        try:
            if getattr(cuda, "_is_in_bad_fork", lambda: False)():
                return  # a fork of a process that used CUDA: no CUDA here, so no sync
            initialised = cuda.is_initialized()
            lazy_call = getattr(cuda, "_lazy_call", None)
        except Exception:
            initialised, lazy_call = True, None
        if initialised or lazy_call is None:
            self._start()
        else:
            # run by torch.cuda._lazy_init, in the thread that initialises CUDA
            lazy_call(self._start_if_armed)
            self._queued_in = cuda

    def _withdraw(self) -> None:
        """Our call back out of torch's queue again (run or not): torch's state as the test found
        it."""
        cuda, self._queued_in = self._queued_in, None
        queued, lock = (getattr(cuda, "_queued_calls", None),
                        getattr(cuda, "_initialization_lock", None))
        # Under the lock _lazy_init runs the queue under; never waiting long (a fork may have copied
        # it held).
        if isinstance(queued, list) and lock is not None and lock.acquire(timeout=5):
            try:
                queued[:] = [entry for entry in queued
                             if not (isinstance(entry, tuple) and entry[0] == self._start_if_armed)]
            finally:
                lock.release()

    def _start_if_armed(self) -> None:
        try:
            if self._armed:
                self._start()
        except Exception:  # never an error of CUDA's initialisation
            pass

    def _start(self) -> None:
        relay = _relay()
        why = relay.start(self._heard, self._broken)
        if why is not None:
            self._broken(why)
        elif self._show:
            relay.show(True)

    def _broken(self, why: str) -> None:
        """The relay cannot be used (any more): the count is a lower bound from now on, said to
        every sink at once."""
        if self._armed and self._unseen is None:
            self._unseen = (f"syncs in torch's C++ code (DDP's reducer, communication hooks) "
                            f"are not seen here: {why}")
            self._emit(SYNCS_UNSEEN_SIGNAL, 1, self._unseen, of_this_moment=False)

    def _heard(self, rank: Optional[int]) -> None:
        """A sync line the relay took out of fd 2 (in the relay's thread): this process's, unless it
        names another rank."""
        if rank is not None and rank != self._own_rank():
            return
        self._emit(SYNC_SIGNAL, 1, CPP_SYNC_PLACE, of_this_moment=False)

    def _own_rank(self) -> Optional[int]:
        from ...observe.dynamo_state import process_rank

        try:
            rank = process_rank()
        except Exception:
            rank = None
        if rank is not None:
            self._rank = rank  # kept: c10 still writes it after destroy_process_group()
        return self._rank


def settle() -> None:
    """Every sync of torch's C++ code made so far reported, where the relay is on (else nothing to
    wait for)."""
    relay = sys.modules.get(_RELAY)
    if relay is not None:  # else no relay was ever started here
        relay.RELAY.flush()


def _relay() -> StderrRelay:
    # here: a run that reads no syncs on CUDA never loads it (nor socket, subprocess)
    from ..sync_relay.stderr_relay import RELAY

    return RELAY
