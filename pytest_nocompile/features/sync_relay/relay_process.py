"""The stderr relay's own program: a process that passes another process's stderr on, but for
torch's C++ sync warnings.

:mod:`.stderr_relay` runs it as ``python -I -S relay_process.py CONTROL_FD TOKEN UPSTREAM`` (stdlib
only, importing nothing of the plugin, seen by no start-up hook).
Its stdin is the read end of a pipe that is the watched process's fd 2 while a test reads syncs;
it writes everything it reads to its *target* (the process's stderr as found, handed over the
control socket), unchanged and in order, except:

- each line c10's logger writes for a synchronizing CUDA operation that torch's sync debug mode
  warns of outside Python's warning machinery (:data:`SYNC_LINE`): told to the process over the
  control socket (``sync 0``, or ``sync -`` for a line without a rank), and passed on only in "show"
  mode (the user set the mode to warn themselves);
- the process's own commands, ``\\0nocompile-relay-TOKEN:flush N`` (answered ``flushed N`` once
  everything before it is passed on) and ``...:show 1``, which come through the pipe so that they
  keep its order;
- a line a relay downstream (a child process's) passes on, behind ``\\0nocompile-pass-TOKEN\\0``:
  its child showed it, this relay passes it on as it is and counts nothing.

It reads until every write end of the pipe is closed, then exits: a process that dies with output in
the pipe (a crash, ``os._exit``) loses none of it. So it ignores SIGINT, SIGTERM and SIGHUP, and
runs in a session of its own. A partial line is passed on at once, except from where it could start
a sync line or a command: that part waits for the rest of its line, at most :data:`HOLD_SECONDS`.
"""

from __future__ import annotations

import os
import re
import sys

# typing.TYPE_CHECKING without importing typing: the relay starts as fast as it can
TYPE_CHECKING = False

if TYPE_CHECKING:
    import socket

# what the relay tells the process, a line each
READY, FLUSHED, TARGET, SYNC = b"ready", b"flushed", b"target", b"sync"
HOLD_SECONDS = 0.05
# bytes: a sync line or a command is far shorter; a longer partial line is none
_LONGEST_HELD = 1024
# a message's field that has no value: a line without a rank, a target that is no relay
_NONE = b"-"
# c10's logger, as its base warning handler writes a TORCH_WARN: "[W<date> <time> <file>:<line>]
# Warning: <msg> (function <f>)", behind "[rank<N>]:" once the process has a global rank
# (torch.distributed).
SYNC_LINE = (rb"(?:\[rank(?P<rank>\d+)\]:)?\[W[^\]\n]*\] Warning: "
             rb"called a synchronizing CUDA operation"
             rb" \(function [^)\n]*\)\r?\n")


def command_mark(token: str) -> bytes:
    return b"\0nocompile-relay-" + token.encode() + b":"


def pass_mark(token: str) -> bytes:
    return b"\0nocompile-pass-" + token.encode() + b"\0"


class Relay:
    """The relay's state: what it holds back, its target, and what it has still to tell the
    process."""

    def __init__(self, control: socket.socket, token: str, upstream: str) -> None:
        self.control: socket.socket | None = control
        # its stdout (the process's stderr as it started the relay) until the process hands over
        # another
        self.target = 1
        # the target is a relay upstream
        self.upstream_pass = b"" if upstream == "-" else pass_mark(upstream)
        self.show = False
        # read, not yet passed on: a partial line that may be a sync line or a command
        self.pending = bytearray()
        # for the process, sent as the socket takes it: the relay never waits on it
        self.outbox = bytearray()
        self.inbox = bytearray()
        self.fds: list[int] = []  # received with a message not read whole yet
        self.mark = command_mark(token)
        self.special = re.compile(re.escape(self.mark) + rb"(?P<command>[^\n]*)\n|"
                                  + re.escape(pass_mark(token))
                                  + rb"(?P<passed>[^\n]*\n)|(?P<sync>" + SYNC_LINE + rb")")
        self.starts = (self.mark, pass_mark(token), b"[rank", b"[W")

    def feed(self, data: bytes, final: bool = False) -> None:
        """Pass on what can be passed on now; hold back a tail that may become a sync line or a
        command."""
        self.pending += data
        end = len(self.pending) if final else self.pending.rfind(b"\n") + 1
        at = 0
        for found in self.special.finditer(self.pending, 0, end):
            self.write(self.pending[at:found.start()])
            self.special_line(found)
            at = found.end()
        held = end if final else self._hold_from(max(at, end))
        self.write(self.pending[at:held])
        del self.pending[:held]

    def _hold_from(self, start: int) -> int:
        """Where the tail after ``start`` (no newline in it) may start a sync line or a command:
        held from there."""
        tail = self.pending
        for index in range(max(start, len(tail) - _LONGEST_HELD), len(tail)):
            if tail[index] in b"[\0" and any(_prefix_of(tail, index, start_of)
                                             for start_of in self.starts):
                return index
        return len(tail)

    def special_line(self, found: re.Match[bytes]) -> None:
        if found["command"] is not None:
            self.run(bytes(found["command"]))
        elif found["passed"] is not None:
            self.write(self.upstream_pass + found["passed"])
        else:
            self.tell(SYNC + b" " + (found["rank"] or _NONE))
            if self.show:
                self.write(self.upstream_pass + found["sync"])

    def run(self, command: bytes) -> None:
        word, _, argument = command.partition(b" ")
        if word == b"flush":
            self.tell(FLUSHED + b" " + argument)
        elif word == b"show":
            self.show = argument == b"1"

    def write(self, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while view and self.target >= 0:
            try:
                view = view[os.write(self.target, view):]
            except InterruptedError:
                continue
            # the target is gone (a closed pipe): what was meant for it goes nowhere, as it would
            # have
            except OSError:
                return

    def tell(self, message: bytes) -> None:
        if self.control is not None:
            self.outbox += message + b"\n"

    def send(self) -> None:
        if self.control is None:
            return
        try:
            sent = self.control.send(self.outbox)
        except BlockingIOError:
            return
        except OSError:  # the process is gone: nobody to tell
            self.control, self.outbox = None, bytearray()
            return
        del self.outbox[:sent]

    def receive(self) -> None:
        """The process's messages: a new target (with its fd), or the end of the socket (the process
        is gone)."""
        import socket

        assert self.control is not None
        try:
            data, fds, _, _ = socket.recv_fds(self.control, 4096, 4)
        except BlockingIOError:
            return
        except OSError:
            data, fds = b"", []
        if not data:
            # keep relaying until the pipe ends, telling no one
            self.control, self.outbox = None, bytearray()
            return
        self.inbox += data
        self.fds += fds
        while b"\n" in self.inbox:
            line, _, rest = bytes(self.inbox).partition(b"\n")
            self.inbox = bytearray(rest)
            word, _, upstream = line.partition(b" ")
            if word == TARGET and self.fds:
                os.close(self.target)
                self.target = self.fds.pop(0)
                self.upstream_pass = (b"" if upstream in (b"", _NONE)
                                      else pass_mark(upstream.decode()))
                self.tell(TARGET)


def _prefix_of(data: bytearray, index: int, start: bytes) -> bool:
    """Whether ``data[index:]`` starts with ``start``, or is the beginning of it."""
    part = data[index:index + len(start)]
    return start.startswith(part) if len(part) < len(start) else part == start


def main(control_fd: int, token: str, upstream: str) -> None:
    import select
    import signal
    import socket

    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    relay = Relay(socket.socket(fileno=control_fd), token, upstream)
    assert relay.control is not None
    relay.control.setblocking(False)
    relay.tell(READY)
    # Whatever a read must answer (data, the end, an error: as good as the end);
    # poll, not select: the socket's fd may be past FD_SETSIZE.
    ready = select.POLLIN | select.POLLHUP | select.POLLERR | select.POLLNVAL
    while True:
        control = relay.control
        poller = select.poll()
        poller.register(0, select.POLLIN)
        if control is not None:
            poller.register(control.fileno(),
                            select.POLLIN | (select.POLLOUT if relay.outbox else 0))
        try:
            events = dict(poller.poll(HOLD_SECONDS * 1000 if relay.pending else None))
        except InterruptedError:
            continue
        if control is not None and events.get(control.fileno(), 0) & ready:
            relay.receive()
        if events.get(0, 0) & ready:
            try:
                data = os.read(0, 65536)
            except InterruptedError:
                continue
            except OSError:  # as good as the end of the pipe
                data = b""
            if not data:
                relay.feed(b"", final=True)
                break
            relay.feed(data)
        # nothing came to finish the held tail: it was no sync line
        elif not events and relay.pending:
            relay.feed(b"", final=True)
        if relay.outbox:
            relay.send()
    # the pipe ended: what is left to tell, if the process still listens
    if relay.control is not None and relay.outbox:
        relay.control.setblocking(True)
        relay.control.settimeout(1)
        try:
            relay.control.sendall(relay.outbox)
        except OSError:
            pass


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
