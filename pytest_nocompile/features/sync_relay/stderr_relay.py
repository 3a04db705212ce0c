"""This process's stderr, passed through a relay process while a test reads syncs: torch's C++ sync
warnings are counted, not printed.

:data:`RELAY` is this process's one relay. :meth:`StderrRelay.start` makes fd 2 the write end of a
pipe whose reader is a process of its own (:mod:`.relay_process`, started the first time, kept for
the process's life), which passes every byte on to the stderr found, but for the lines c10's logger
writes at a sync outside Python's warning machinery: those it tells this process of, one ``sync``
message each, which a thread here hands to the callback given.
:meth:`StderrRelay.stop` passes on what is in the pipe and puts fd 2 back as found.

Why a process, not a thread: a process that crashes (an abort in a C++ thread, ``os._exit``) would
lose what a thread of its own still held; the relay reads the pipe to its end whatever happens here.
It never waits on this process, and this process waits on it only with a time limit
(:data:`ANSWER_SECONDS`): one that stops answering is given up, fd 2 put back, and :attr:`broken`
says why.

What may move fd 2 meanwhile is stepped around: pytest's capture (:mod:`.pytest_stderr`), and a
fork, whose child puts fd 2 back at its first call here and never talks to its parent's relay.
A child process started while fd 2 is the pipe inherits it; :data:`RELAY_VAR` tells the child's own
relay so, and the lines its user asked to see are passed through this one uncounted.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from . import relay_process
from .relay_process import FLUSHED, READY, SYNC, TARGET, command_mark

if TYPE_CHECKING:
    import socket
    import subprocess

ANSWER_SECONDS = 30.0  # the most a start, a flush or a new target waits for the relay
# "<st_dev>:<st_ino>:<token>" of the pipe that is fd 2 while a relay is on: a child whose stderr is
# that pipe passes on the sync lines its user asked to see behind the token, so that this relay
# neither counts nor hides them.
RELAY_VAR = "PYTEST_NOCOMPILE_STDERR_RELAY"
# the relay is no watched child
_OWN_VARIABLES = ("PYTEST_NOCOMPILE_EVENTS", "PYTEST_NOCOMPILE_SYNCS", RELAY_VAR)


class StderrRelay:
    """fd 2 through a relay process while on; one per process (:data:`RELAY`)."""

    def __init__(self) -> None:
        self._reset()
        self._flushes_at_exit = False  # registered once: a fork inherits it

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()  # fd 2's swaps
        self._answers = threading.Condition()
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._control: Optional[socket.socket] = None
        self._write_end = -1  # the pipe's write end, kept to put on fd 2 again
        self._identity = ""  # RELAY_VAR's value for this relay's pipe
        self._token = ""
        self._saved = -1  # fd 2 as found, while on
        self._found_variable: Optional[str] = None  # RELAY_VAR as found, while on
        self.on = False  # fd 2 is the pipe
        # why the relay cannot be used in this process, once it cannot
        self.broken: Optional[str] = None
        self._ready = False
        self._dead = False
        self._asked = self._flushed = self._targets_sent = self._targets_taken = 0
        self._on_sync: Optional[Callable[[Optional[int]], None]] = None
        self._on_broken: Optional[Callable[[str], None]] = None

    # -- what the sync source calls ---------------------------------------------

    def start(self, on_sync: Callable[[Optional[int]], None],
              on_broken: Callable[[str], None]) -> Optional[str]:
        """Put fd 2 through the relay (started the first time); None, or why it cannot be.

        ``on_sync(rank)`` runs in a thread of the relay's for each sync line (``rank``: the line's,
        None without); ``on_broken(why)`` if the relay stops working while on.
        """
        self._after_fork()
        with self._lock:
            if self.on:
                return None
            if self.broken is None and self._process is None:
                self.broken = self._launch()
            if self.broken is not None:
                return self.broken
            self._on_sync, self._on_broken = on_sync, on_broken
            self._found_variable = os.environ.get(RELAY_VAR)
            if not self._step_in():
                return self.broken
            os.environ[RELAY_VAR] = self._identity
            self._flush_at_exit()
        from . import pytest_stderr

        pytest_stderr.step_around(self)
        return None

    def stop(self) -> None:
        """Pass on what is in the pipe, and put fd 2 back as found."""
        self._after_fork()
        from . import pytest_stderr

        pytest_stderr.stop_stepping_around()
        with self._lock:
            if self.on:
                self._step_out()
                if self._found_variable is None:
                    os.environ.pop(RELAY_VAR, None)
                else:
                    os.environ[RELAY_VAR] = self._found_variable
            self._on_sync = self._on_broken = None

    def flush(self) -> None:
        """Wait until everything written to fd 2 so far is passed on, and each sync line in it
        reported."""
        self._after_fork()
        with self._lock:
            if self.on:
                self._flush()

    def show(self, on: bool) -> None:
        """Pass sync lines on (the user's own "warn" mode) or not, from this point of the stream
        on."""
        self._after_fork()
        with self._lock:
            if self.on:
                self._command(f"show {int(on)}")

    @contextmanager
    def aside(self) -> Iterator[None]:
        """fd 2 as found for the block (everything before it passed on);
        afterwards the relay takes fd 2 as it is then."""
        self._after_fork()
        with self._lock:
            stepped = self.on and self._step_out()
        try:
            yield
        finally:
            if stepped:
                with self._lock:
                    if self.broken is None:
                        self._step_in()

    def _flush_at_exit(self) -> None:
        """A process that ends while on reports its last syncs first: as Python shuts its threads
        down, which a multiprocessing child does too before its ``os._exit`` (past ``atexit``);
        else at ``atexit``."""
        if self._flushes_at_exit:
            return
        self._flushes_at_exit = True
        # what concurrent.futures uses, from Python 3.9
        at_shutdown = getattr(threading, "_register_atexit", None)
        if at_shutdown is not None:
            try:
                at_shutdown(self.flush)
            except RuntimeError:  # shutting down already: nothing later to flush for
                pass
        else:
            import atexit

            atexit.register(self.flush)

    # -- fd 2 -------------------------------------------------------------------

    def _step_in(self) -> bool:
        try:
            saved = os.dup(2)  # not inheritable, as every fd Python makes
        except OSError:
            self._give_up("stderr (fd 2) is closed")
            return False
        if not self._send_target(saved):
            os.close(saved)
            return False
        os.dup2(self._write_end, 2)  # inheritable, as fd 2 was
        self._saved, self.on = saved, True
        return True

    def _step_out(self) -> bool:
        self._flush()
        if self.on:  # else the relay ended meanwhile and fd 2 is back already
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved, self.on = -1, False
        return True

    def _give_up(self, why: str) -> None:
        """The relay does not answer or has ended: fd 2 back as found, never the pipe again in this
        process.

        A relay that is only slow is left to pass on what the pipe holds, and to end with the pipe:
        nothing is lost.
        """
        if self.broken is None:
            self.broken = why
        if self.on:
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved, self.on = -1, False
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1
        if self._control is not None:
            try:
                # SHUT_RDWR: the relay tells nobody any more; our listener ends
                self._control.shutdown(2)
            except OSError:
                pass
        callback = self._on_broken
        if callback is not None:
            callback(why)

    # -- talking to the relay ---------------------------------------------------

    def _launch(self) -> Optional[str]:
        """Start the relay process and wait for it to say it is ready; None, or why it could not."""
        try:
            os.fstat(2)
        except OSError:
            return "stderr (fd 2) is closed"
        import secrets
        import socket
        import subprocess

        read_end, write_end = os.pipe()
        mine, theirs = socket.socketpair()
        self._token = secrets.token_hex(8)
        env = {name: value for name, value in os.environ.items() if name not in _OWN_VARIABLES}
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", relay_process.__file__, str(theirs.fileno()),
                 self._token, "-"],
                stdin=read_end, stdout=2, stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                env=env, start_new_session=True)
        except OSError as error:
            os.close(write_end)
            mine.close()
            return f"the stderr relay could not start ({type(error).__name__}: {error})"
        finally:
            os.close(read_end)
            theirs.close()
        self._control, self._write_end = mine, write_end
        # a fork puts fd 2 back at once, whether or not it is watched
        os.register_at_fork(after_in_child=self._after_fork)
        stat = os.fstat(write_end)
        self._identity = f"{stat.st_dev}:{stat.st_ino}:{self._token}"
        threading.Thread(target=self._listen, args=(mine,), name="pytest-nocompile stderr relay",
                         daemon=True).start()
        return None if self._wait(lambda: self._ready) else "the stderr relay did not start"

    def _send_target(self, fd: int) -> bool:
        """Hand the relay ``fd`` as where to pass everything on, and wait for it to take it."""
        import socket

        upstream = _upstream_token(fd, self._found_variable) or "-"
        self._targets_sent += 1
        wanted = self._targets_sent
        try:
            assert self._control is not None
            socket.send_fds(self._control, [f"target {upstream}\n".encode()], [fd])
        except OSError:
            self._give_up("the stderr relay ended")
            return False
        return self._wait(lambda: self._targets_taken >= wanted)

    def _flush(self) -> None:
        self._asked += 1
        wanted = self._asked
        if self._command(f"flush {wanted}"):
            self._wait(lambda: self._flushed >= wanted)

    def _command(self, command: str) -> bool:
        """In the stream, so that the relay runs it after everything written before it."""
        try:
            os.write(self._write_end, command_mark(self._token) + command.encode() + b"\n")
            return True
        except OSError:
            self._give_up("the stderr relay ended")
            return False

    def _wait(self, done: Callable[[], bool]) -> bool:
        with self._answers:
            answered = (self._answers.wait_for(lambda: done() or self._dead, ANSWER_SECONDS)
                        and not self._dead)
        if not answered:
            self._give_up("the stderr relay ended" if self._dead
                          else "the stderr relay did not answer")
        return answered

    def _listen(self, control: socket.socket) -> None:
        """The relay's messages, in a thread of their own until it ends."""
        pending = b""
        while True:
            try:
                data = control.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            for line in lines:
                self._heard(line)
        if self._pid != os.getpid():
            return
        with self._answers:
            self._dead = True
            self._answers.notify_all()
        with self._lock:
            if self.broken is None and self._control is control:
                self._give_up("the stderr relay ended")

    def _heard(self, line: bytes) -> None:
        word, _, argument = line.partition(b" ")
        if word == SYNC:
            callback = self._on_sync
            if callback is not None:
                callback(int(argument) if argument.isdigit() else None)
            return
        with self._answers:
            if word == READY:
                self._ready = True
            elif word == FLUSHED and argument.isdigit():
                self._flushed = max(self._flushed, int(argument))
            elif word == TARGET:
                self._targets_taken += 1
            self._answers.notify_all()

    def _after_fork(self) -> None:
        """In a forked child: fd 2 back as the parent found it, and the parent's relay left alone
        (never told anything)."""
        if self._pid == os.getpid():
            return
        on, saved, write_end, control = self.on, self._saved, self._write_end, self._control
        if on:
            os.dup2(saved, 2)
        for fd in (saved, write_end):
            if fd >= 0:
                os.close(fd)
        if control is not None:
            # the parent's socket, closed here without a word (no shutdown)
            os.close(control.detach())
        found = self._found_variable
        self._reset()
        if on:
            if found is None:
                os.environ.pop(RELAY_VAR, None)
            else:
                os.environ[RELAY_VAR] = found


def _upstream_token(fd: int, variable: Optional[str]) -> Optional[str]:
    """The token of the relay whose pipe ``fd`` is (``variable``: RELAY_VAR as found), or None."""
    if not variable:
        return None
    device, _, rest = variable.partition(":")
    inode, _, token = rest.partition(":")
    try:
        stat = os.fstat(fd)
    except OSError:
        return None
    return token if token and f"{stat.st_dev}" == device and f"{stat.st_ino}" == inode else None


RELAY = StderrRelay()
