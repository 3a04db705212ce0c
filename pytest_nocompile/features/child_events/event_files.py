"""How a test reads what its child processes wrote: one append-only file per process
(:mod:`..child_startup.event_writer` writes them), each line read once.

The reading side trusts nothing: another copy of the plugin (another
version) may write here, or anything else may sit in the folder. Only
regular files are opened, without following links and without blocking;
lines over :data:`MAX_LINE` bytes, lines that are not JSON objects, and a
last line cut off without its newline are skipped, and each skip is said.

Stdlib only, and never raising: it runs inside a test's phases.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional

from ..child_startup.event_writer import SUFFIX, UNREPORTED
from .child_lines import FileLines, Reading

if TYPE_CHECKING:  # typing as usual: unlike the writer, no child process imports the reader
    import pytest

    from ...record.record import RecompileRecord

# bytes: a line of this version is far shorter (its message is capped); a longer one is skipped
MAX_LINE = 1 << 20
_CHUNK = 1 << 16


class _FileState:
    __slots__ = ("offset", "line", "overlong", "done", "identity")

    def __init__(self) -> None:
        self.offset = 0  # where the first line not yet read starts
        self.line = 0  # lines read so far
        self.overlong = 0  # bytes of a line over MAX_LINE being skipped (0: none)
        self.done = False  # a file not to read again (not a regular file, or a marker already seen)
        # (device, inode): a file made anew under the same name is read from its start
        self.identity = (0, 0)


class EventDirectory:
    """A test's end of the transport: the lines its child processes wrote, each read once."""

    __slots__ = ("path", "_files", "_exists")

    def __init__(self, path: str) -> None:
        self.path = path
        self._files: dict[str, _FileState] = {}  # by file name: how far it was read
        self._exists = False  # once made, it stays until removed

    def exists(self) -> bool:
        if not self._exists:
            # no exception when it does not: the usual case
            self._exists = os.access(self.path, os.F_OK)
        return self._exists

    def read_new(self) -> list[dict[str, Any]]:
        """The entries of the complete lines written since the last read, file by file (what
        :meth:`read` skips, left out)."""
        return [entry for lines in self.read().files for _, entry in lines.entries]

    def read(self, final: bool = False, into: Optional[Reading] = None,
             check_missing: bool = True) -> Reading:
        """What is new since the last read; ``final``: the test ended, so a last line
        without its newline is cut off.

        ``into``: add to this reading (several folders of one test);
        ``check_missing``: when the folder is not there yet (no process wrote),
        look whether one could have made it. Never raises and never blocks: a
        folder gone (the test removed it) is no more reports; anything
        unexpected is skipped and said.
        """
        reading = Reading() if into is None else into
        if not self.exists():
            if check_missing:
                reading.problem = unusable(os.path.dirname(self.path), self.path) or reading.problem
            return reading
        try:
            folder = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return reading  # removed since: no more reports
        except OSError as error:  # a file or a link in its place, or no permission
            reading.problem = f"could not report to {self.path}: {_why(error)}"
            return reading
        try:
            if not os.access(self.path, os.W_OK | os.X_OK):
                reading.problem = f"could not report to {self.path}: it is not writable"
            for name in sorted(os.listdir(folder)):
                if name.endswith(SUFFIX):
                    lines = self._read_file(folder, name, final)
                    if lines is not None and (lines.entries or lines.skipped):
                        reading.files.append(lines)
                elif name.endswith(UNREPORTED) and name not in self._files:
                    self._files[name] = _FileState()
                    token, _, reason = name[: -len(UNREPORTED)].rpartition(".")
                    reading.unreported.append((token, reason))
        except OSError as error:
            reading.problem = f"could not read {self.path}: {_why(error)}"
        finally:
            os.close(folder)
        return reading

    def _read_file(self, folder: int, name: str, final: bool) -> Optional[FileLines]:
        state = self._files.get(name)
        if state is None:
            state = self._files[name] = _FileState()
        if state.done:
            return None
        import stat

        lines = FileLines(os.path.join(self.path, name), name[: -len(SUFFIX)])
        try:
            mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
            # Never blocking, never following a link: a FIFO or a link put in its place since
            # the stat is refused too.
            fd = os.open(name,
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                         dir_fd=folder) \
                if stat.S_ISREG(mode) else -1
        except FileNotFoundError:
            return None  # removed since
        except OSError as error:
            state.done = True
            lines.skipped.append((0, f"not read: {_why(error)}"))
            return lines
        try:
            if fd >= 0:
                status = os.fstat(fd)
                mode = status.st_mode
                # Made anew (the folder was removed, and a process made it again):
                # another inode, or, inodes being reused, shorter than what was read of
                # it (a file here only grows).
                if ((status.st_dev, status.st_ino) != state.identity
                        or status.st_size < state.offset):
                    state.offset, state.line, state.overlong = 0, 0, 0
                    state.identity = (status.st_dev, status.st_ino)
            if not stat.S_ISREG(mode):
                state.done = True
                lines.skipped.append((0, f"{_kind(mode)}, not a regular file: not read"))
                return lines
            _read_lines(fd, state, lines, final)
        except OSError as error:
            lines.skipped.append((0, f"could not be read: {_why(error)}"))
        finally:
            if fd >= 0:
                os.close(fd)
        return lines

    # A record's reports (record.ProcessReports): a test's processes that report here.
    def read_into(self, record: RecompileRecord, final: bool) -> None:
        reading = self.read(final)
        if reading.files or reading.unreported or reading.problem:  # else nothing to load it for
            from .child_intake import take

            take(record, reading, self.path)

    def warnings(self, skipped: dict[str, list[str]],
                 problems: list[str]) -> list[pytest.PytestWarning]:
        from .child_lines import report_warnings

        return report_warnings(skipped, problems)

    def enter(self, phase: str) -> None:
        """One folder for every phase (a fresh process's, as the warm start runs): nothing to do."""

    def close(self, record: RecompileRecord) -> None:
        record.read_children(final=True)

    def remove(self) -> None:
        """Remove the directory, if it exists."""
        if self.exists():
            from .tree_removal import remove_test_folder

            remove_test_folder(self.path)
            self._exists = False


def unusable(parent: str, path: str) -> Optional[str]:
    """None when processes could make their folder ``path`` in ``parent``; else why not."""
    if os.access(parent, os.W_OK | os.X_OK):
        return None
    if not os.path.isdir(parent):
        return f"could not report to {path}: {parent} is gone"
    return f"could not report to {path}: {parent} is not writable"


def _read_lines(fd: int, state: _FileState, lines: FileLines, final: bool) -> None:
    """Read the complete lines after ``state.offset``, at most :data:`MAX_LINE` bytes of
    any one held at a time."""
    position = state.offset
    pending = b""  # the start of a line whose newline has not come yet
    while True:
        chunk = os.pread(fd, _CHUNK, position)
        if not chunk:
            break
        position += len(chunk)
        if state.overlong:  # inside a line over the limit: dropped up to its newline
            end = chunk.find(b"\n")
            if end < 0:
                state.overlong += len(chunk)
                state.offset = position
                continue
            state.line += 1
            lines.skipped.append(
                (state.line, f"{state.overlong + end} bytes, over the {MAX_LINE}-byte limit"))
            state.overlong = 0
            chunk = chunk[end + 1:]
        *complete, pending = (pending + chunk).split(b"\n")
        for text in complete:
            state.line += 1
            _parse(text, state.line, lines)
        state.offset = position - len(pending)
        if len(pending) > MAX_LINE:
            state.overlong, pending = len(pending), b""
            state.offset = position
    if final and (pending or state.overlong):
        state.line += 1
        lines.skipped.append(
            (state.line, "cut off, no newline at its end (its process stopped while writing it?)"))
        state.offset, state.overlong = position, 0


def _parse(text: bytes, number: int, lines: FileLines) -> None:
    if len(text) > MAX_LINE:
        lines.skipped.append((number, f"{len(text)} bytes, over the {MAX_LINE}-byte limit"))
        return
    import json

    try:
        entry = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        lines.skipped.append((number, "nested too deeply"))
        return
    except ValueError:  # not JSON, not UTF-8, NaN or Infinity, an int of too many digits
        lines.skipped.append((number, "not JSON"))
        return
    if isinstance(entry, dict):
        lines.entries.append((number, entry))
    else:
        lines.skipped.append((number, "not a JSON object"))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a process writes")


def _why(error: OSError) -> str:
    import errno

    name = errno.errorcode.get(error.errno or 0)
    return f"{name}: {error.strerror}" if name else str(error)


def _kind(mode: int) -> str:
    import stat

    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "an unknown kind of file"
