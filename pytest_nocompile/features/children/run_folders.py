"""The run's folder for its children's reports: where it is, what proves it ours, and
when a later run removes it.

Every run that watches child processes keeps their reports in one folder::

    <tempdir>/pytest-nocompile-of-<user>/run-<pid>-<random>/

``<tempdir>`` is :func:`tempfile.gettempdir` (``TMPDIR``). The per-user
parent is made mode 0700 and used only when it is a real directory (not a
symbolic link) owned by this user, as pytest does for ``pytest-of-<user>``;
otherwise the run's folder is a private ``pytest-nocompile-run-*`` directory
of ``<tempdir>`` that only the run itself removes.

Liveness is a lock, never a pid: a run holds an exclusive ``flock`` on the
``lock`` file of its folder for its whole life, and the kernel releases it
when the process ends, however it ends and in whatever pid namespace or
container it ran (a pid says nothing outside its own). The :data:`MARKER`
file is written once the lock is held, so it proves both that the plugin
made the folder and that the folder had a live owner.

A run ends by removing its folder. A run killed (SIGTERM, SIGKILL, a
crashed xdist worker) leaves it; the next run in the same ``<tempdir>`` that
watches a test removes it, and any other folder of the parent that carries
the marker, is owned by this user and whose lock nobody holds. That clean-up
is bounded (:data:`CLEAN_UP_SECONDS`, :data:`CLEAN_UP_ENTRIES`), follows no
symbolic link (:mod:`..child_events.tree_removal`), and never raises: what it could not remove
waits for a later run. Nothing outside the per-user parent is ever removed.

Stdlib only, and never raising: it runs inside a test's setup.
"""

from __future__ import annotations

import os
import stat
import time
from typing import TYPE_CHECKING, Optional

from .owner import user_id

if TYPE_CHECKING:
    from ..child_events.tree_removal import Budget

# The removal code (..child_events.tree_removal) loads only where something is to be removed: a
# dead run's folder, or reports a process wrote; a run whose tests started no process leaves only
# its marker and lock.

PARENT_PREFIX = "pytest-nocompile-of-"  # then the user's name
# then the pid (for people reading the folder, never trusted) and mkdtemp's random part
RUN_PREFIX = "run-"
PRIVATE_PREFIX = "pytest-nocompile-run-"  # a run's folder when the per-user parent cannot be used
MARKER = "pytest-nocompile-run"  # written once the lock is held: the plugin made this folder
LOCK = "lock"  # flock'ed for the run's life

CLEAN_UP_SECONDS = 0.5  # a run's removal of dead runs' folders stops after this long...
CLEAN_UP_ENTRIES = 20_000  # ...or after removing this many files and folders
CANDIDATES = 1_000  # folders of the parent looked at, at most, per run
# names of the folders this process's runs hold (nested runs in one process skip them)
_HELD: set[str] = set()


def user_name() -> str:
    """This user's name as a file name (pytest's rule), or ``uid<N>`` where none is known (a
    container's arbitrary uid).

    The name ``getpass.getuser()`` gives, read as it reads it (the variables, then the
    password database), without importing getpass, which loads the terminal's module too
    (a run's start pays for it).
    """
    name = next((value for key in ("LOGNAME", "USER", "LNAME", "USERNAME")
                 if (value := os.environ.get(key))), None)
    if name is None:
        try:
            import pwd

            name = pwd.getpwuid(os.getuid())[0]
        except Exception:
            name = f"uid{user_id()}"
    return "".join(char if char.isalnum() or char in "-_." else "_" for char in name) or "unknown"


def user_parent(temp: str) -> Optional[str]:
    """The per-user parent of run folders in ``temp``, made if missing; None if
    it is not safely ours."""
    if user_id() < 0:
        return None
    path = os.path.join(temp, PARENT_PREFIX + user_name())
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # a symbolic link, a file, or not ours to read
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != user_id():
            return None
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    except OSError:
        return None
    finally:
        os.close(fd)
    return path


class RunFolder:
    """This run's folder, locked for the run's life (see the module's docstring)."""

    def __init__(self, path: str, lock_fd: Optional[int]) -> None:
        self.path = path
        self._lock_fd = lock_fd

    @classmethod
    def make(cls, temp: str) -> RunFolder:
        """Make this run's folder in ``temp``'s per-user parent, after removing
        dead runs' folders there."""
        import tempfile

        parent = user_parent(temp)
        if parent is not None:
            remove_dead_runs(parent)
            for _ in range(2):  # another run's end may remove the parent, empty, in between
                try:
                    path = tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=parent)
                except FileNotFoundError:
                    parent = user_parent(temp)
                    if parent is None:
                        break
                    continue
                _HELD.add(os.path.basename(path))
                return cls(path, _lock_and_mark(path))
        return cls(tempfile.mkdtemp(prefix=PRIVATE_PREFIX, dir=temp), None)

    def remove(self) -> bool:
        """Remove the folder (bounded), then its parent if empty; True if the folder
        is gone. Never raises."""
        if self._lock_fd is None:
            from ..child_events.tree_removal import Budget, remove_tree

            removed = remove_tree(self.path, Budget(5.0, 1_000_000))
        else:
            removed = _remove_marked_folder(self.path, 5.0, 1_000_000)
            try:
                os.close(self._lock_fd)  # releases the lock: a leftover is a later run's to remove
            except OSError:
                pass
            self._lock_fd = None
            _HELD.discard(os.path.basename(self.path))
            if removed:
                try:
                    # the per-user parent, only if empty: the last run leaves no trace
                    os.rmdir(os.path.dirname(self.path))
                except OSError:
                    pass
        return removed


def _lock_and_mark(path: str) -> Optional[int]:
    """Hold the folder's lock, then mark it; the lock's descriptor, or None where locks do not
    work (no marker then)."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        fd = os.open(os.path.join(path, LOCK),
                     os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(os.open(os.path.join(path, MARKER), os.O_WRONLY | os.O_CREAT | os.O_EXCL
                         | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError:  # without a lock no marker: no other run may ever take the folder for dead
        os.close(fd)
        return None
    return fd


def remove_dead_runs(parent: str, budget: Optional[Budget] = None) -> None:
    """Remove the folders of ``parent`` that a dead run of this user left (marker, owner,
    lock free). Never raises."""
    try:
        import fcntl
    except ImportError:
        return
    try:
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        with os.scandir(parent_fd) as entries:
            names = [entry.name for _, entry in zip(range(CANDIDATES), entries)
                     if entry.name.startswith(RUN_PREFIX) and entry.name not in _HELD]
        for name in names:
            if budget is not None and (time.monotonic() >= budget.deadline or budget.entries <= 0):
                return
            budget = _remove_if_dead(fcntl, parent_fd, name, budget)
    except Exception:  # never a test's problem: what is left waits for a later run
        pass
    finally:
        os.close(parent_fd)


def _remove_if_dead(fcntl: object, parent_fd: int, name: str,
                    budget: Optional[Budget]) -> Optional[Budget]:
    """Remove the folder if a dead run of this user left it; the budget spent so far (made at the
    first dead one: a scan that finds only live runs loads no removal code)."""
    try:
        folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=parent_fd)
    except OSError:  # a symbolic link, a file, unreadable, or gone
        return budget
    lock = None
    try:
        # none (OSError): not a run's folder, left as it is
        marker = os.stat(MARKER, dir_fd=folder, follow_symlinks=False)
        if (os.fstat(folder).st_uid != user_id() or not stat.S_ISREG(marker.st_mode)
                or marker.st_uid != user_id()):
            return budget
        try:
            lock = os.open(LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                           dir_fd=folder)
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # type: ignore[attr-defined]
        except OSError:
            # held: a live run's (or locks do not work here: then it is not ours to judge)
            return budget
        if budget is None:
            from ..child_events.tree_removal import Budget

            budget = Budget(CLEAN_UP_SECONDS, CLEAN_UP_ENTRIES)
        _remove_marked(parent_fd, name, folder, budget)  # dead: ours until removed
    except OSError:
        pass
    finally:
        if lock is not None:
            os.close(lock)
        os.close(folder)
    return budget


def _remove_marked_folder(path: str, seconds: float, entries: int) -> bool:
    """Remove a run's folder by path (this run's own, at its end), within ``seconds`` and
    ``entries``; True if it is gone."""
    head, name = os.path.split(path)
    try:
        parent = os.open(head, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=parent)
        try:
            budget: Optional[Budget] = None
            # a process of its tests wrote: the removal code loads to empty it
            if not set(os.listdir(folder)) <= {MARKER, LOCK}:
                from ..child_events.tree_removal import Budget

                budget = Budget(seconds, entries)
            return _remove_marked(parent, name, folder, budget)
        finally:
            os.close(folder)
    except FileNotFoundError:
        return True
    except Exception:
        return False
    finally:
        os.close(parent)


def _remove_marked(parent: int, name: str, folder: int, budget: Optional[Budget]) -> bool:
    """Remove a marked run folder whose lock this process holds (``budget``: for its contents; None:
    it has none but its marker and lock).

    The marker and the lock go last, so a removal cut short (budget spent,
    an entry it may not remove) leaves a folder a later run still recognises
    and resumes.
    """
    if budget is not None:
        from ..child_events.tree_removal import remove_contents

        if not remove_contents(folder, budget, keep=(MARKER, LOCK)):
            return False
    for last in (MARKER, LOCK):
        try:
            os.unlink(last, dir_fd=folder)
        except FileNotFoundError:
            pass
    os.rmdir(name, dir_fd=parent)
    return True
