"""Helpers for pytest-nocompile's own tests: recorded messages and exact output lines."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import pytest

DATA = Path(__file__).parent / "data"


class RunPytest(Protocol):
    """The ``run`` fixture: pytest with only this plugin, in a subprocess, on the files written to ``pytester``."""

    def __call__(self, *args: str) -> pytest.RunResult: ...


def recorded_messages(name: str) -> list[str]:
    """Messages from a file in tests/data: blocks separated by '=====' lines, '#' header lines."""
    blocks: list[list[str]] = []
    for line in (DATA / name).read_text().splitlines():
        if line == "=====":
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
    return ["\n".join(block) for block in blocks]


def literal(line: str) -> str:
    """An fnmatch pattern that matches ``line`` exactly, but for '*' wildcards kept as such."""
    return line.replace("[", "[[]").replace("?", "[?]")


def expect_lines(result: pytest.RunResult, lines: list[str]) -> None:
    """Assert the output holds these lines, consecutively ('*' is a wildcard)."""
    result.stdout.fnmatch_lines([literal(line) for line in lines], consecutive=True)


# The start of several user test files below: a function and a helper that
# recompiles it once (a Python int argument changes from 2 to 3, line 9).
RECOMPILE_ONCE = """
import pytest, torch

def scale(x, n):
    return x * n

def recompile_once():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)
"""
