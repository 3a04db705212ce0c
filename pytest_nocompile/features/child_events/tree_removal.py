"""Removing a folder tree within a budget of time and entries, following no
symbolic link and never raising.

What :mod:`..children.run_folders` removes (a run's folder, a test's reports) can be
deep, large, or partly not ours; the removal here stops when its
:class:`Budget` is spent, leaves what it may not remove, holds at most
:data:`_OPEN_DEPTH` folders open at once, and never recurses in Python.

Stdlib only: it runs inside a test's setup and teardown.
"""

from __future__ import annotations

import os
import stat
import time
from typing import Iterator, Optional

from ..children.owner import user_id

_OPEN_DEPTH = 32  # folders held open at once while removing a tree; deeper ones are moved up first


class Budget:
    """How much removing may still cost: a deadline and a count of entries."""

    __slots__ = ("deadline", "entries")

    def __init__(self, seconds: float, entries: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.entries = entries

    def spend(self) -> bool:
        """Pay for one entry; False once spent."""
        self.entries -= 1
        return self.entries >= 0 and time.monotonic() < self.deadline


def remove_tree(path: str, budget: Budget) -> bool:
    """Remove ``path`` and everything below it without following links; True if
    it is gone. Never raises.

    Iterative, so no depth gives a RecursionError; stops when ``budget`` is
    spent, leaving the rest; an entry it may not remove is left too.
    """
    head, name = os.path.split(path)
    try:
        parent = os.open(head or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return not os.path.lexists(path)
    try:
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return True
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name, dir_fd=parent)
            return True
        folder = _open_folder(parent, name)
        if folder is None:
            return False
        try:
            emptied = remove_contents(folder, budget)
        finally:
            os.close(folder)
        if emptied:
            os.rmdir(name, dir_fd=parent)
        return emptied
    except Exception:
        return False
    finally:
        os.close(parent)


def _open_folder(parent: int, name: str) -> Optional[int]:
    """A folder's descriptor (never through a link), making it readable first if this user owns
    it and may not read it."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent)
    except PermissionError:
        pass
    except OSError:
        return None
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != user_id():
            return None
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, flags, dir_fd=parent)
    except (OSError, NotImplementedError):
        return None


def remove_contents(root: int, budget: Budget, keep: tuple[str, ...] = ()) -> bool:
    """Empty the folder open as ``root`` (but the top-level names in ``keep``);
    True if nothing else is left.

    Depth first, holding at most :data:`_OPEN_DEPTH` folders open: a folder
    deeper than that is moved up to ``root`` (a rename, within the same file
    system) and emptied from there, in a later pass over ``root``.
    """
    moved = 0
    while True:  # each pass spends budget on every entry it meets: bounded
        complete = True
        stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = []
        try:
            stack.append((root, "", os.scandir(root)))
            while stack:
                folder, name, listing = stack[-1]
                entry = next(listing, None)
                if entry is None:
                    listing.close()  # type: ignore[attr-defined]
                    stack.pop()
                    if stack:
                        os.close(folder)
                        try:
                            os.rmdir(name, dir_fd=stack[-1][0])
                        except OSError:
                            complete = False
                    continue
                if len(stack) == 1 and entry.name in keep:
                    continue
                if not budget.spend():
                    return False
                try:
                    is_folder = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_folder = False
                if not is_folder:
                    try:
                        os.unlink(entry.name, dir_fd=folder)
                    except FileNotFoundError:
                        pass
                    except OSError:
                        complete = False  # not ours to remove: left
                elif len(stack) > _OPEN_DEPTH:
                    moved += 1
                    try:
                        os.rename(entry.name, f".moved-up-{os.getpid()}-{moved}", src_dir_fd=folder,
                                  dst_dir_fd=root)
                    except OSError:
                        complete = False
                else:
                    child = _open_folder(folder, entry.name)
                    if child is None:
                        complete = False
                        continue
                    try:
                        stack.append((child, entry.name, os.scandir(child)))
                    except OSError:
                        os.close(child)
                        complete = False
        except OSError:
            complete = False
        finally:
            for folder, _name, listing in stack:
                listing.close()  # type: ignore[attr-defined]
                if folder != root:
                    os.close(folder)
        if not complete:
            return False
        try:
            with os.scandir(root) as listing:
                if not any(entry.name not in keep for entry in listing):
                    return True
        except OSError:
            pass  # another pass looks again


def remove_test_folder(path: str) -> None:
    """Remove a test's (or one phase's) reports as the test ends: bounded, what is left goes
    with the run's folder."""
    remove_tree(path, Budget(0.5, 100_000))
