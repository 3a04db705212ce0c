"""How child processes report to the test that started them: one append-only file per process.

A watched test's process sets :data:`ENV_VAR` to a directory for the test's
duration; every Python process started meanwhile inherits it (at any depth of
nesting). A child that compiles writes one JSON line per event to
``<directory>/<token>.jsonl``, its token being its pid and a random id made
in the process (anew in a fork, and after an ``exec``, which keeps the pid
but runs start-up again): two processes never share a file or a key. Each
line goes with one ``write`` on a file opened for appending, through the path
each time (a descriptor kept open could be closed and reused by the child's
own code), so each line is whole and on disk as soon as it is logged: a child
that ends with ``os._exit``, or is killed, loses nothing it logged.

Each line holds ``t`` (``time.time()`` when logged: the test's process
places it in setup, call or teardown by that), ``pid``, ``proc`` (the
token), ``rank``, ``event`` (``compile``, ``recompile``, ``limit``,
``graph_break`` or ``problem``) and the event's fields. Every count is a
count of such lines: there is no line at exit to wait for.

A child that cannot write (a full disk, a folder made unwritable) leaves an
empty ``<token>.<ERRNO>.unreported`` marker if it can: a name costs no data
block. Where even that fails, the test's process finds the folder itself
unusable (:meth:`..child_events.event_files.EventDirectory.read`). Either
way the test hears of it.

Stdlib only: a child's start-up hook imports this module.
"""

from __future__ import annotations

import os

# typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test starts)
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

ENV_VAR = "PYTEST_NOCOMPILE_EVENTS"
SUFFIX = ".jsonl"
UNREPORTED = ".unreported"  # <token>.<ERRNO>.unreported: that process could not write its lines
MAX_MESSAGE = 20_000  # characters of a logged message a child writes (and a test shows)
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


class EventWriter:
    """A process's end of the transport: appends one JSON line per event to its own file.

    Creates the file on the first event (a child that never compiles leaves no
    trace). Never raises: a child's output and exit code are not ours to change.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._identity = (-1, "")  # (pid, token), replaced as one: a thread never sees half of it
        # a write failed (or the directory is gone: the test ended): nothing more is written
        self.broken = False

    def token(self) -> str:
        """This process's key: its pid and a random id, made anew in a fork (even one that
        ran no at-fork handler)."""
        pid = os.getpid()
        made_in, token = self._identity
        if made_in != pid:
            token = f"{pid}-{os.urandom(4).hex()}"
            self._identity = (pid, token)
        return token

    def write(self, entry: dict[str, Any]) -> None:
        if self.broken:
            return
        import json

        token = self.token()
        entry["pid"] = int(token.partition("-")[0])
        entry["proc"] = token
        try:
            data = (json.dumps(entry, default=str) + "\n").encode("utf-8", "replace")
            self._append(os.path.join(self.directory, token + SUFFIX), data)
        except OSError as error:
            self.broken = True
            import errno

            # ENOENT: the run's directory is gone: its test ended, no one reads any more
            if error.errno != errno.ENOENT:
                self.unreported(errno.errorcode.get(error.errno or 0, "EIO"))
        except Exception as error:
            # an entry json cannot write: that line is lost (and said), the next may go
            self.unreported(type(error).__name__)

    def _append(self, path: str, data: bytes) -> None:
        try:
            fd = os.open(path, _APPEND, 0o600)
        except FileNotFoundError:
            # The test's folder, then its phase's: not makedirs, as the run's folder
            # gone means the test ended.
            for folder in (os.path.dirname(self.directory), self.directory):
                try:
                    os.mkdir(folder)
                except FileExistsError:
                    pass
            fd = os.open(path, _APPEND, 0o600)
        try:
            while data:  # a regular file takes it in one write; loop only for the odd short one
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)

    def unreported(self, reason: str) -> None:
        """Leave a marker the test's process looks for: an empty file (no data block
        needed), whose name says why."""
        try:
            os.close(os.open(os.path.join(self.directory, f"{self.token()}.{reason}{UNREPORTED}"),
                             _APPEND, 0o600))
        except OSError:
            # the folder itself is unusable: the test's process sees that (EventDirectory.read)
            pass

