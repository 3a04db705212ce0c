"""How child processes report to the test that started them: one append-only file per process.

A watched test's process sets :data:`ENV_VAR` to a directory for the test's
duration; every Python process started meanwhile inherits it (at any depth of
nesting). A child that compiles writes one JSON line per event to
``<directory>/<pid>.jsonl``, with one ``write`` on a file opened for appending,
so each line is whole and on disk as soon as it is logged: a child that
crashes or is killed afterwards loses nothing it logged. The directory exists
only once a child has written to it; the test's process reads what is new
after each phase and removes the directory when the test ends.

Each line holds ``t`` (``time.time()`` when logged: the test's process
places it in setup, call or teardown by that), ``pid``, ``rank``, ``event``
(``recompile``, ``limit``, ``graph_break``, ``totals`` or ``problem``),
the event's fields, and ``totals``: the process's running count of each
budget kind (by kind key) after the event.

Stdlib only: a child's start-up hook imports this module.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test starts)

if TYPE_CHECKING:
    from typing import Any

ENV_VAR = "PYTEST_NOCOMPILE_EVENTS"
SUFFIX = ".jsonl"


class EventWriter:
    """A process's end of the transport: appends one JSON line per event to its own file.

    Opens the file on the first event (a child that never compiles leaves no
    trace), and again in a forked child, which writes a file of its own.
    Never raises: a child's output and exit code are not ours to change.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._pid = -1
        self.broken = False  # the directory is gone (the test ended): nothing more is written

    def write(self, entry: dict[str, Any]) -> None:
        if self.broken:
            return
        import json

        data = (json.dumps(entry, default=str) + "\n").encode()
        try:
            fd = self._open()
            while data:  # a regular file takes it in one write; loop only for the odd short one
                data = data[os.write(fd, data):]
        except OSError:
            self.broken = True

    def _open(self) -> int:
        pid = os.getpid()
        if self._fd is None or self._pid != pid:  # first event, or first in a forked child
            try:
                os.mkdir(self.directory)  # not makedirs: a test's run directory gone means the test ended
            except FileExistsError:
                pass
            self._fd = os.open(os.path.join(self.directory, f"{pid}{SUFFIX}"),
                               os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._pid = pid
        return self._fd


class EventDirectory:
    """A test's end of the transport: the lines its child processes wrote, each read once."""

    __slots__ = ("path", "_offsets", "_exists")

    def __init__(self, path: str) -> None:
        self.path = path
        self._offsets: dict[str, int] = {}  # file name -> bytes already read
        self._exists = False  # once made, it stays until removed

    def exists(self) -> bool:
        if not self._exists:
            self._exists = os.access(self.path, os.F_OK)  # no exception when it does not: the usual case
        return self._exists

    def read_new(self) -> list[dict[str, Any]]:
        """The complete lines written since the last read, file by file; a half-written last line waits."""
        if not self.exists():
            return []
        import json

        entries: list[dict[str, Any]] = []
        for name in sorted(os.listdir(self.path)):
            if not name.endswith(SUFFIX):
                continue
            offset = self._offsets.get(name, 0)
            try:
                with open(os.path.join(self.path, name), "rb") as source:
                    source.seek(offset)
                    data = source.read()
            except OSError:
                continue
            complete = data[: data.rfind(b"\n") + 1]
            self._offsets[name] = offset + len(complete)
            for line in complete.splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # not ours to judge: a line we cannot read is skipped, the rest still count
                if isinstance(entry, dict):
                    entries.append(entry)
        return entries

    def remove(self, just_read: bool = False) -> None:
        """Remove the directory (``just_read``: :meth:`read_new` just looked, so a directory not there then is not looked for again)."""
        if self._exists if just_read else self.exists():
            from .run_folders import Budget, remove_tree

            # Bounded, not following links, never raising: what is left goes with the run's folder.
            remove_tree(self.path, Budget(0.5, 100_000))
            self._exists = False
