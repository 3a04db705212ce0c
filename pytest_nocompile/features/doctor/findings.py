"""What the doctor found: one row per witness of a signal, its state, and the table it prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

READ = "read"  # seen, and its text understood
SEEN = "seen"  # seen: a witness with no text to read
UNREAD = "seen, text not read"  # counted, but the parser does not know the text's form
DARK = "dark"  # not seen: what a gate reads through it reads 0 on this torch
NOT_ON_THIS_TORCH = "not on this torch"  # a torch older than the first that gives it
NOT_HERE = "not here"  # this machine cannot give it (no CUDA, no hardware counter)
_HEADERS = ("signal", "witness", "state")


@dataclass(frozen=True)
class Finding:
    """One witness of one signal, as this torch showed it to the plugin.

    ``state`` is one of :data:`READ`, :data:`SEEN`, :data:`UNREAD`, :data:`DARK`, or says that the
    witness cannot show here (:data:`NOT_ON_THIS_TORCH`, :data:`NOT_HERE`). ``detail`` is the raw
    text that was not read, why a witness cannot show here, or what went wrong.
    """

    signal: str
    witness: str
    state: str
    detail: str = ""

    @property
    def dark(self) -> bool:
        return self.state == DARK


def seen_if(signal: str, witness: str, seen: bool, detail: str = "") -> Finding:
    """A witness with no text of its own: seen or dark."""
    return Finding(signal, witness, SEEN if seen else DARK, "" if seen else detail)


def read_if(signal: str, witness: str, seen: bool, read: bool, raw: str = "",
            why_dark: str = "") -> Finding:
    """A witness with a text to read: read, seen but not read (showing the raw text), or dark
    (saying why, where the plugin knows)."""
    if not seen:
        return Finding(signal, witness, DARK, why_dark)
    if read:
        return Finding(signal, witness, READ)
    return Finding(signal, witness, UNREAD, raw.strip().splitlines()[0] if raw.strip() else "")


def table(findings: Sequence[Finding]) -> list[str]:
    """The rows under a header, columns padded to their widest cell, each detail on a line of its
    own below its row."""
    rows = [_HEADERS, *((finding.signal, finding.witness, finding.state) for finding in findings)]
    widths = [max(len(row[column]) for row in rows) for column in range(2)]
    lines = []
    details = ["", *(finding.detail for finding in findings)]
    for row, detail in zip(rows, details):
        lines.append(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}".rstrip())
        if detail:
            lines.append(f"{'':<{widths[0]}}    {detail}")
    return lines


def verdict(findings: Sequence[Finding], torch_version: str) -> str:
    """The last line: whether every witness this torch has showed itself."""
    dark = [finding for finding in findings if finding.dark]
    if not dark:
        unread = sum(finding.state == UNREAD for finding in findings)
        more = f"; {unread} of their texts not read" if unread else ""
        return f"every signal torch {torch_version} has was seen{more}"
    names = ", ".join(dict.fromkeys(finding.signal for finding in dark))
    witnesses = "witness" if len(dark) == 1 else "witnesses"
    return (f"{len(dark)} {witnesses} dark on torch {torch_version} ({names}): a gate that counts "
            "through one sees less than happened")


def exit_code(findings: Sequence[Finding]) -> int:
    """1 where a witness is dark, else 0."""
    return 1 if any(finding.dark for finding in findings) else 0
