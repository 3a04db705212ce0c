"""What one read of a test's report folders holds: each process's file's new lines, and what could
not be read. Made by :mod:`.event_files`, taken in by :mod:`.child_intake`. Stdlib only."""

from __future__ import annotations

from typing import Any, Optional


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
