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
unusable (:meth:`EventDirectory.read`). Either way the test hears of it.

The reading side trusts nothing: another copy of the plugin (another
version) may write here, or anything else may sit in the folder. Only
regular files are opened, without following links and without blocking;
lines over :data:`MAX_LINE` bytes, lines that are not JSON objects, and a
last line cut off without its newline are skipped, and each skip is said.

Stdlib only: a child's start-up hook imports this module.
"""

from __future__ import annotations

import os

# typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test starts)
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Optional

ENV_VAR = "PYTEST_NOCOMPILE_EVENTS"
# "1" beside ENV_VAR where the test's run reads syncs: only then does a child turn
# torch's sync debug mode on.
READS_SYNCS_VAR = "PYTEST_NOCOMPILE_SYNCS"
SUFFIX = ".jsonl"
UNREPORTED = ".unreported"  # <token>.<ERRNO>.unreported: that process could not write its lines
MAX_MESSAGE = 20_000  # characters of a logged message a child writes (and a test shows)
# bytes: a line of this version is far shorter (its message is capped); a longer one is skipped
MAX_LINE = 1 << 20
_CHUNK = 1 << 16
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


class FileLines:
    """What one process's file held that was new since the last read: its
    entries, and what was skipped."""

    __slots__ = ("path", "token", "entries", "skipped", "started_in")

    def __init__(self, path: str, token: str) -> None:
        self.path = path
        self.token = token  # the file's name without its suffix: the writer's token
        # the test's phase that started the process, where its folder says
        self.started_in: Optional[str] = None
        self.entries: list[tuple[int, dict[str, Any]]] = []  # (line number, entry)
        self.skipped: list[tuple[int, str]] = []  # (line number, or 0 for the whole file; why)


class Reading:
    """One read of a test's directory: each file's new lines, processes that could not report,
    and the folder's state."""

    __slots__ = ("files", "unreported", "problem")

    def __init__(self) -> None:
        self.files: list[FileLines] = []
        self.unreported: list[tuple[str, str]] = []  # (token, errno name) from markers, each once
        self.problem: Optional[str] = None  # why the test's processes could not report there at all


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

    def remove(self) -> None:
        """Remove the directory, if it exists."""
        if self.exists():
            from .run_folders import remove_test_folder

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
