"""How a child process names itself in its reports: what it runs, in a few words.

Runs in the child, at its first report (torch is imported by then, so the
imports here cost nothing worth counting). A ``multiprocessing`` child's
command line is the same ``python -c 'from multiprocessing.spawn import …'``
for every one, and a fork's is its parent's: those are named by what says
more, their ``multiprocessing`` name or the pid they were forked from.
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

LONGEST = 60  # characters: the name goes inside every failure headline of that process
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+./,:@%")


def this_process(forked_from: Optional[int]) -> str:
    """This process's name: its ``multiprocessing`` name, else "fork of pid N" (a fork without
    exec), else its command line."""
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is not None:
        name = multiprocessing.current_process().name
        if name != "MainProcess":
            # a user's Process(name=...) may be anything
            return _cut(f"multiprocessing {' '.join(str(name).split())}")
    if forked_from is not None:
        return f"fork of pid {forked_from}"
    return shortened(sys.orig_argv)


def shortened(argv: Sequence[str]) -> str:
    """A command line as a shell would read it, the program by its file name, cut at
    :data:`LONGEST` characters."""
    if not argv:
        return "?"
    # -c code on one line
    words = [os.path.basename(argv[0]), *(_quoted(" ".join(arg.split())) for arg in argv[1:])]
    return _cut(" ".join(words))


def _cut(text: str) -> str:
    return text if len(text) <= LONGEST else text[: LONGEST - 1] + "…"


def _quoted(word: str) -> str:
    if word and set(word) <= _PLAIN:
        return word
    return "'" + word.replace("'", "'\\''") + "'"
