"""Helpers for pytest-nocompile's own tests: recorded messages and exact output lines."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path
from typing import Protocol, Sequence

import pytest

from pytest_nocompile.judge.budget import RecompileBudget
from pytest_nocompile.judge.result import TestResult
from pytest_nocompile.judge.verdict import judge
from pytest_nocompile.output.report import format_budget_failure
from pytest_nocompile.record.record import RecompileRecord

DATA = Path(__file__).parent / "data"
# The outer run's: an inner run sets its own per test (here, not in conftest.py: a test module's
# `from conftest import` can find tests/acceptance/conftest.py first in a whole-suite run).
OUTER_RUN_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
                       "PYTEST_XDIST_TESTRUNUID", "PYTEST_NOCOMPILE_EVENTS")
DOCS = Path(__file__).parent.parent / "docs"


class RunPytest(Protocol):
    """The ``run`` fixture: pytest with only this plugin, in a subprocess, on the files written to
    ``pytester``."""

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


def _torch_version() -> tuple[int, int]:
    """The installed torch's (major, minor), read from its metadata: importing torch here would slow
    every test module."""
    try:
        text = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return (0, 0)
    major, minor = re.match(r"(\d+)\.(\d+)", text).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


TORCH = _torch_version()
# What dynamo's messages carry, by torch version (tests/data/torch-X.Y-* recordings):
HAS_COMPILE_IDS = TORCH >= (2, 5)  # each guard failure starts with its compile id, "0/0: "
# a "# code  # file:line" comment after the guard: the plugin's "guarded at:" line
HAS_GUARD_SOURCE = TORCH >= (2, 9)
# get_compilation_metrics() entries carry recompile_reason
HAS_RECOMPILE_REASON_METRIC = TORCH >= (2, 7)
# From 2.7 a graph break's reason is "Failed to trace builtin operator" with an "Explanation:"
# naming `print`; 2.6 (and 2.4/2.5, from the logged exception) give
# "Unsupported: builtin: print [...] False" and no explanation.
HAS_GRAPH_BREAK_EXPLANATION = TORCH >= (2, 7)
PRINT_BREAK_REASON = ("Failed to trace builtin operator" if HAS_GRAPH_BREAK_EXPLANATION
                      else "Unsupported: builtin: print *")
# the config dynamo names when a frame hits it
LIMIT_CONFIG = "recompile_limit" if TORCH >= (2, 7) else "cache_size_limit"


def metrics_count_cache_misses() -> bool:
    """Whether torch's compilation-metrics entries count each compile's cache misses (2.10's do
    not, 2.13's do): read from its source, as importing dynamo inside a pytester test would be
    undone at its end (pytester restores ``sys.modules``), and a second import of dynamo fails."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False
    source = Path(spec.origin).parent / "_dynamo" / "utils.py"
    return source.is_file() and "inductor_fx_local_cache_miss_count:" in source.read_text()


# A future torch that renamed both cache counters: each compile still counts its misses in its
# compilation-metrics entry (where torch's entries count them), which is the second witness.
COUNTERS_RENAMED = """
import torch._functorch._aot_autograd.autograd_cache as autograd_cache
import torch._inductor.codecache as codecache
from torch._dynamo.utils import counters

class Renamed:
    # counters[group] as torch's code reads it, each name renamed
    def __init__(self, group):
        self.group = group

    def __getitem__(self, name):
        return counters[self.group][name.replace("cache_", "cache_lookup_")]

    def __setitem__(self, name, value):
        counters[self.group][name.replace("cache_", "cache_lookup_")] = value

class RenamedCounters(dict):
    def __missing__(self, group):
        return Renamed(group)

for module in (codecache, autograd_cache):
    module.counters = RenamedCounters()
"""

# A guard written the torch >= 2.7 way names locals bare: "n == 2", "self.factor == 2",
# "tensor 'x' ...", "expected type of 'x' ...", "___check_obj_id(self.training, ...)". Up to 2.6
# they read L['n'], L['self'].factor, 'L['x']', ___check_obj_id(L['self'].training, ...). Only these
# spellings of the same local are accepted: the name itself must still be there.
_GUARD_TOKEN = re.compile(r"(?<![\w.'\[])(?P<leading>[A-Za-z_]\w*)(?=\.|\[| ==)|"
                          r"(?:(?<=tensor )|(?<=type of ))'(?P<quoted>[A-Za-z_]\w*)'|(?P<star>\*)")
_GUARD_AT = re.compile(
    r"^(?P<prefix>.*?(?:guard failed: |recompiled: ))(?:(?P<compile_id>\d+/\d+): )?(?P<guard>.*)$")


def _local(name: str) -> str:
    return rf"(?:L\['{name}'\]|{name})"


def guard_regex(guard: str) -> str:
    """A regex for a guard as torch >= 2.7 words it ('*' a wildcard) that also accepts
    torch <= 2.6's ``L['name']`` spelling."""
    parts: list[str] = []
    end = 0
    for token in _GUARD_TOKEN.finditer(guard):
        parts.append(re.escape(guard[end : token.start()]))
        if token["star"]:
            parts.append(".*")
        elif token["leading"]:
            parts.append(_local(token["leading"]))
        else:
            parts.append(f"'{_local(token['quoted'])}'")
        end = token.end()
    parts.append(re.escape(guard[end:]))
    return "".join(parts)


def guard_matches(actual: str, expected: str) -> bool:
    """Whether a guard text the plugin reported is ``expected`` (torch >= 2.7 wording) in this
    torch's spelling."""
    return re.fullmatch(guard_regex(expected), actual) is not None


def _fnmatch_regex(text: str) -> str:
    return ".*".join(map(re.escape, text.split("*")))


def line_regex(line: str) -> str:
    """A regex for one expected output line ('*' a wildcard), written as torch 2.13 prints it.

    In a "guard failed: 0/0: GUARD" or "f recompiled: 0/0: GUARD" line the guard may use torch
    <= 2.6's ``L['name']`` spelling, and before torch 2.5 (no compile ids) the "0/0: " is absent.
    """
    match = _GUARD_AT.match(line)
    if match is None:
        return _fnmatch_regex(line) + r"\Z"
    compile_id = (f"{re.escape(match['compile_id'])}: "
                  if match["compile_id"] and HAS_COMPILE_IDS else "")
    return _fnmatch_regex(match["prefix"]) + compile_id + guard_regex(match["guard"]) + r"\Z"


def expected_lines(lines: list[str]) -> list[str]:
    """Regexes for ``lines`` as this torch prints them.

    "guarded at:" lines are left out before torch 2.9 (no guard source to read), "explanation:"
    lines before torch 2.7 (graph breaks carry none).
    """
    return [line_regex(line) for line in lines
            if (HAS_GUARD_SOURCE or "guarded at: " not in line)
               and (HAS_GRAPH_BREAK_EXPLANATION or "explanation: " not in line)]


def expect_lines(result: pytest.RunResult, lines: list[str]) -> None:
    """Assert the output holds these lines, consecutively ('*' is a wildcard; guards as torch 2.13
    words them, see :func:`line_regex`)."""
    result.stdout.re_match_lines(expected_lines(lines), consecutive=True)


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


# The start of user test files with one explicit graph break (line 5).
BREAK_ONCE = """
import pytest, torch

def broken(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2
"""

# RECOMPILE_ONCE in a user's test under max_recompiles(0): what a simulated future torch runs.
RECOMPILE_ONCE_TEST = RECOMPILE_ONCE + """
@pytest.mark.max_recompiles(0)
def test_x():
    recompile_once()
"""


def docs_snippet(page: str, file_name: str) -> str:
    """The python block of ``docs/<page>`` whose first line is ``# <file_name>``: an example run as
    users would run it."""
    text = (DOCS / page).read_text()
    (block,) = [block for block in re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
                if block.startswith(f"# {file_name}\n")]
    return block


def with_health_counts(counts: dict[str, int], prefix: str = "", as_text: bool = False,
                       baseline: bool = False) -> dict[str, object]:
    """``counts`` of the first three kinds, followed by a 0 for each compile-health kind of
    ``KINDS`` where one shows.

    A result's or a record's counts carry every counted kind; a baseline the kinds it gates
    (``baseline=True``); junit properties (``prefix="nocompile_"``, ``as_text=True``: values as
    text) a compile-health kind only where the test budgets it or has some, so none of them here.
    """
    from pytest_nocompile.vocabulary.kinds import COUNTED_KINDS

    health = [kind for kind in COUNTED_KINDS
              if kind.events == "health" and (kind.gated_by_baseline or not baseline)]
    zeros = {} if prefix else {kind.key: 0 for kind in health}
    return {prefix + key: str(value) if as_text else value
            for key, value in {**counts, **zeros}.items()}


class BudgetedRecord(RecompileRecord):
    """A test's record with its budget beside it, as the watcher holds the two: what the unit tests
    judge."""

    def __init__(self, budget: RecompileBudget | None = None) -> None:
        super().__init__()
        self.budget = budget or RecompileBudget()


def judge_record(record: BudgetedRecord, over: tuple[str, ...] | None = None) -> TestResult:
    """The verdict on a record, from one snapshot of it, as the watcher asks for it."""
    return judge(record.snapshot(), record.budget, over)


def failure_of(record: BudgetedRecord, over: Sequence[str], stance: str | None = None) -> str:
    """The failure text of a record over its budget, from one snapshot of it."""
    return format_budget_failure(record.snapshot(), record.budget, over, stance)
