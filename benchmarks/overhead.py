"""How much does pytest-nocompile add to a test run?

Generates test suites into a temporary folder and runs each one with and
without the plugin, alternating the two sides, for several rounds; reports the
median wall time of each side, their ratio and the overhead per test. Where
valgrind is installed it also counts the instructions each side executes:
wall times on a shared machine cannot resolve 2 %, instruction counts repeat.

Suites (issue 5):

a        1,000 trivial tests that never compile and never import torch, run
         with ``--max-recompiles=0``, so every one has a budget. Target: <= 2 %
         wall time.
a-unused the same tests with the plugin loaded and nothing asked of it (no
         budget, no marker, no report): what an installed, unused plugin costs.
a+dynamo the same, but every test module imports torch._dynamo, as it is
         in any run where something compiled: every test is watched and none
         compiles. Same target.
a+torch  1,000 tests in modules that import torch (not dynamo), each
         ``assert torch.ones(1).item() == 1``: the plugin must not import
         dynamo for them (about 1 s), and idles until dynamo arrives. Same
         target.
b        200 tests, each compiling its own small function (backend="eager")
         under ``max_recompiles(0)``. The without side resets dynamo before
         each test as the plugin does, so the difference is the plugin's own
         work. Target: <= 1 ms per test.
c        b with ``--nocompile-no-isolate``; the without side does no reset.
         Same target.
evict    200 tests in modules that import torch._dynamo, none compiling, each
         overwriting a 64 MiB buffer: what a compile does to the processor's
         caches, without the compile. Every test is watched, as in a+dynamo,
         so its own work against a+dynamo's is what cold caches cost the
         plugin's hooks, and against c's, what recording a compile adds.
         Target: <= 1 ms per test.
empty    no test at all, with suite a's options: the fixed start-up part.

The side without the plugin loads an inert stand-in with ``-p`` (it registers
the two markers; for b it also resets dynamo), because pytest 9 answers any
``-p NAME`` by scanning the installed distributions' entry points: both sides
pay that scan, so neither table charges it to the plugin.

The instructions part counts suites a and a-unused under valgrind's callgrind
(about 50 times slower than a plain run), with the garbage collector on and
off, and takes each one's one-off part from the empty suite run the same way.
It counts copies of the suites at three locations, because the counts move
with the suites' paths (see ``instruction_rows``), and gives the median and
range.

The start-up part checks whether loading the plugin imports torch
(``python -X importtime``), times importing it after pytest, and times
``pytest --co -q`` on an empty folder without the plugin, with it by module
(as the suites load it) and with it by entry-point name.

The children part (issue 13) measures the child-process start-up hook,
``pytest-nocompile.pth``, which every Python process of the environment
runs: with PYTEST_NOCOMPILE_EVENTS unset (every process outside a watched
test) and set to a folder that does not exist (a process a watched test
started, before anything compiled). It times what site does with the hook's
file in-process; compares ``python -c pass`` in two copies of the
environment that differ only in that file, in wall time (200 alternating
starts each) and, with valgrind, in instructions; and lists the modules the
hook adds and whether it wrote anything (see ``children_tables``).

Every pytest runs as a subprocess with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 and
explicit ``-p`` options, so other installed plugins take no part, and an
empty pytest.ini above the suites keeps any project's ini file out. Run from
anywhere::

    python benchmarks/overhead.py                  # about 13 minutes on 2 cores
    python benchmarks/overhead.py --quick          # a smoke run, about 3 minutes
    python benchmarks/overhead.py --suites a,a+dynamo --rounds 9
    python benchmarks/overhead.py --part instructions   # only the counts, about 6 minutes
    python benchmarks/overhead.py --part children  # the child-process start-up hook, under a minute
    python benchmarks/overhead.py --plugin-args=--nocompile-no-subprocess  # more options for the
                                                                           # with-plugin side
    python benchmarks/overhead.py --profile        # adds a cProfile of suite a

To compare two versions of the plugin, put a copy of the other version's
``pytest_nocompile`` folder first on PYTHONPATH (``git archive REV
pytest_nocompile | tar -x -C DIR``); the first line of the output names the
folder the runs import it from. ``--plugin-args`` adds options to every
suite's with-plugin side, for what one version has and the other has not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

# Every side loads exactly one plugin with -p: pytest 9 answers any `-p NAME`
# (a module path too, autoload off or not) by scanning every installed
# distribution's entry points for NAME. That scan is pytest's, as much a cost
# of the command line as of this plugin, so the side without the plugin loads
# an inert stand-in the same way and pays it too.
WITH_PLUGIN = ("-p", "pytest_nocompile.plugin")
WITHOUT_PLUGIN = ("-p", "no:nocompile")
BY_ENTRY_POINT = ("-p", "nocompile")
# No cache writes, so a run does not change what the next run finds on disk.
PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
TESTS_PER_FILE = 100
STAND_IN_MARKERS = "nocompile_markers_stand_in"
INERT = WITHOUT_PLUGIN + ("-p", STAND_IN_MARKERS)  # the side without the plugin, for most suites
STAND_IN_RESET = "nocompile_reset_stand_in"
HOOK_TIMER = "nocompile_hook_timer"
EXIT_NO_TESTS = 5  # pytest's exit code when it collected nothing


# -- the generated suites ------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a suite must meet: a wall-time overhead in % or a cost per test in ms."""

    max_overhead_percent: Optional[float] = None
    max_ms_per_test: Optional[float] = None

    def describe(self) -> str:
        if self.max_overhead_percent is not None:
            return f"<= {self.max_overhead_percent:g} %"
        if self.max_ms_per_test is not None:
            return f"<= {self.max_ms_per_test:g} ms/test"
        return "-"

    def met(self, overhead_percent: float, ms_per_test: float) -> Optional[bool]:
        """Whether an overhead meets this target; None when the suite has none."""
        if self.max_overhead_percent is not None:
            return overhead_percent <= self.max_overhead_percent
        if self.max_ms_per_test is not None:
            return ms_per_test <= self.max_ms_per_test
        return None


@dataclass(frozen=True)
class Suite:
    """A folder of generated tests and the pytest options of each side."""

    name: str
    folder: Path
    tests: int
    without: tuple[str, ...]
    with_plugin: tuple[str, ...]
    target: Target


def trivial_test(index: int) -> str:
    return f"def test_{index}():\n    assert {index} + 1\n"


def torch_test(index: int) -> str:
    return f"def test_{index}():\n    assert torch.ones(1).item() == 1\n"


# Every byte written: 32 times a core's own L2 cache on both machines here (2 MiB), so
# each test starts its hooks from cold per-core caches; their shared L3 (260 and 300 MiB)
# can hold it, as it holds much of what a small compile touches.
EVICTING_BUFFER_BYTES = 64 << 20
EVICTING_HEADER = (
    f"import torch._dynamo  # noqa: F401\n\nBUFFER = bytearray({EVICTING_BUFFER_BYTES})\n\n\n")


def evicting_test(index: int) -> str:
    return f"def test_{index}():\n    BUFFER[:] = bytes(len(BUFFER))\n"


def compiling_test(index: int) -> str:
    # A lambda per test: each test compiles a code object of its own, so with
    # or without a reset it is a first compile, never a recompile.
    return (
        "@pytest.mark.max_recompiles(0)\n"
        f"def test_{index}():\n"
        f"    torch.compile(lambda x: x + {index}, backend=\"eager\")(torch.ones(2))\n"
    )


# Issue 20's shape: tests that share one compiled model made at module level. Without the
# plugin only the first test traces it; with isolation (the default) every test does.
SHARED_MODEL_HEADER = (
    "import torch\n"
    "from torch import nn\n\n"
    "torch.manual_seed(0)\n"
    "LAYER = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, "
    "batch_first=True)\n"
    "MODEL = torch.compile(nn.TransformerEncoder(LAYER, num_layers=8, enable_nested_tensor=False), "
    "backend=\"aot_eager\")\n"
    "X = torch.randn(2, 16, 64)\n\n\n"
)
SHARED_MODEL_TESTS = 6


def shared_model_test(index: int) -> str:
    return f"def test_{index}():\n    assert MODEL(X).shape == X.shape\n"


def write_tests(folder: Path, count: int, header: str, make_test: Callable[[int], str]) -> None:
    """Write ``count`` tests, TESTS_PER_FILE to a module, as a project would split them."""
    folder.mkdir(parents=True)
    for start in range(0, count, TESTS_PER_FILE):
        body = "\n\n".join(make_test(index)
                           for index in range(start, min(start + TESTS_PER_FILE, count)))
        (folder / f"test_{start // TESTS_PER_FILE:03d}.py").write_text(header + body)


def write_stand_ins(folder: Path) -> None:
    """Write the two plugins the without side loads in place of pytest-nocompile.

    Both register the markers, so the without side pays no
    PytestUnknownMarkWarning per test that the with side does not pay either.
    The reset one also resets dynamo before each test, in the same hook the
    plugin uses (a hook, not an autouse fixture: a fixture would add pytest's
    fixture machinery, which the plugin does not use, to the without side).
    """
    folder.mkdir(parents=True)
    markers = (
        "def pytest_configure(config):\n"
        "    for name in ('max_recompiles', 'max_graph_breaks'):\n"
        "        config.addinivalue_line('markers', name + '(N): stand-in for pytest-nocompile')\n"
    )
    reset = (
        f"from {STAND_IN_MARKERS} import pytest_configure  # noqa: F401\n\n\n"
        "def pytest_runtest_setup(item):\n"
        "    import torch._dynamo\n\n"
        "    torch._dynamo.reset()\n"
    )
    (folder / f"{STAND_IN_MARKERS}.py").write_text(markers)
    (folder / f"{STAND_IN_RESET}.py").write_text(reset)
    (folder / f"{HOOK_TIMER}.py").write_text(HOOK_TIMER_SOURCE)


# Loaded before the plugin (-p HOOK_TIMER -p pytest_nocompile.plugin): wraps each
# per-test hook of the plugin and its dynamo reset in a timer, and writes the
# totals at exit. Time inside the hooks, not in the test phases they wrap, is
# the plugin's own work; wall-time differences on a shared machine cannot
# resolve it where a test compiles for 40 ms.
HOOK_TIMER_SOURCE = '''
import functools, inspect, json, os, time

from pytest_nocompile import plugin

# where dynamo's reset lives (observe/dynamo_state.py since the one-lifecycle layout; capture.py
# before)
try:
    from pytest_nocompile.observe import dynamo_state as reset_home
except ImportError:
    from pytest_nocompile import capture as reset_home

import pytest

# Per test: seconds inside the plugin's hooks and in its dynamo reset, and how
# many plain and wrapper hook calls the timer itself added its cost to.
spent = {"hooks": [], "reset": [], "plain_calls": [], "wrapper_calls": []}


# outermost: a test starts here, before the plugin's own wrapper
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    for series in spent.values():
        series.append(0)
    return (yield)


# How many timed hooks are running: a hook that calls another timed one (a subclass's
# wrapper delegating to its base class's) is timed once, by the outer one.
nesting = [0]


def timed_plain(function, key="hooks"):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        if key == "hooks" and nesting[0]:
            return function(*args, **kwargs)
        start = time.perf_counter()
        nesting[0] += key == "hooks"
        try:
            return function(*args, **kwargs)
        finally:
            nesting[0] -= key == "hooks"
            spent[key][-1] += time.perf_counter() - start
            if key == "hooks":
                spent["plain_calls"][-1] += 1
    return timed


def step(generator, action, *argument):
    if nesting[0]:
        return getattr(generator, action)(*argument)
    start = time.perf_counter()
    nesting[0] += 1
    try:
        return getattr(generator, action)(*argument)
    finally:
        nesting[0] -= 1
        spent["hooks"][-1] += time.perf_counter() - start


def timed_wrapper(function):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        # A nested call's bookkeeping stays in the outer call's time, uncorrected: a slight
        # overestimate.
        spent["wrapper_calls"][-1] += not nesting[0]
        inner = function(*args, **kwargs)
        step(inner, "__next__")
        try:
            result = yield
        except BaseException as error:
            try:
                step(inner, "throw", error)
            except StopIteration as stop:
                return stop.value
            raise RuntimeError("hook wrapper went on after the throw")
        try:
            step(inner, "send", result)
        except StopIteration as stop:
            return stop.value
        raise RuntimeError("hook wrapper yielded twice")
    return timed


def with_subclasses(classes):
    for owner in classes:
        yield owner
        yield from with_subclasses(owner.__subclasses__())


# Every per-test hook of the plugin (the idle tests' until torch is imported, the
# watcher's and the report hook's once a test can be watched), from the seam the
# plugin keeps for this, and its subclasses' own (the idle tests' that watch
# child processes).
for owner in dict.fromkeys(with_subclasses(plugin.PER_TEST_HOOK_CLASSES)):
    for name, hook in list(vars(owner).items()):
        if name.startswith("pytest_runtest_"):
            setattr(owner, name,
                    (timed_wrapper if inspect.isgeneratorfunction(hook) else timed_plain)(hook))
reset_home.reset_dynamo = timed_plain(reset_home.reset_dynamo, "reset")


def timer_cost():
    """What timing one plain and one wrapper hook call adds, timed on empty hooks; least of 5."""
    def plain():
        pass

    def wrapper():
        return (yield)

    def run(hook, calls=20000):
        start = time.perf_counter()
        for _ in range(calls):
            steps = hook()
            if inspect.isgenerator(steps):
                next(steps)
                try:
                    steps.send(None)
                except StopIteration:
                    pass
        return (time.perf_counter() - start) / calls

    for series in spent.values():
        series.append(0)
    timed_plain_hook, timed_wrapper_hook = timed_plain(plain), timed_wrapper(wrapper)
    cost = {kind: min(run(timed) - run(bare) for _ in range(5))
            for kind, timed, bare in (("plain", timed_plain_hook, plain),
                                      ("wrapper", timed_wrapper_hook, wrapper))}
    for series in spent.values():
        series.pop()
    return cost


def pytest_unconfigure(config):
    with open(os.environ["NOCOMPILE_HOOK_TIMES"], "w") as out:
        json.dump({**spent, "timer_cost": timer_cost()}, out)
'''


def make_suites(root: Path, trivial_count: int, compiling_count: int) -> list[Suite]:
    """Generate every suite under ``root`` and say how to run each side."""
    ratio_target = Target(max_overhead_percent=2.0)
    per_test_target = Target(max_ms_per_test=1.0)
    budget = ("--max-recompiles=0",)
    # An ini file of our own, found before any ini file further up (a project's, when --keep is
    # inside one).
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    write_tests(root / "a", trivial_count, "", trivial_test)
    write_tests(root / "a_dynamo", trivial_count, "import torch._dynamo  # noqa: F401\n\n\n",
                trivial_test)
    write_tests(root / "a_torch", trivial_count, "import torch\n\n\n", torch_test)
    write_tests(root / "b", compiling_count, "import pytest\nimport torch\n\n\n", compiling_test)
    write_tests(root / "shared", SHARED_MODEL_TESTS, SHARED_MODEL_HEADER, shared_model_test)
    write_tests(root / "evict", compiling_count, EVICTING_HEADER, evicting_test)
    (root / "empty").mkdir()
    return [
        Suite("empty", root / "empty", 0, INERT, WITH_PLUGIN + budget, Target()),
        Suite("a", root / "a", trivial_count, INERT, WITH_PLUGIN + budget, ratio_target),
        Suite("a-unused", root / "a", trivial_count, INERT, WITH_PLUGIN, Target()),
        Suite("a+dynamo", root / "a_dynamo", trivial_count, INERT, WITH_PLUGIN + budget,
              ratio_target),
        Suite("a+torch", root / "a_torch", trivial_count, INERT, WITH_PLUGIN + budget,
              ratio_target),
        Suite("b", root / "b", compiling_count, WITHOUT_PLUGIN + ("-p", STAND_IN_RESET),
              WITH_PLUGIN, per_test_target),
        Suite("c", root / "b", compiling_count, INERT, WITH_PLUGIN + ("--nocompile-no-isolate",),
              per_test_target),
        # a+dynamo's tests with c's effect on the processor's caches and no compile (issue 18).
        Suite("evict", root / "evict", compiling_count, INERT, WITH_PLUGIN + budget,
              per_test_target),
        # The README's CI recipe (a budget for every test) on tests sharing a compiled model; issue
        # 20's target.
        Suite("shared", root / "shared", SHARED_MODEL_TESTS, INERT, WITH_PLUGIN + budget,
              Target(max_overhead_percent=10.0)),
        Suite("shared-no-isolate", root / "shared", SHARED_MODEL_TESTS, INERT,
              WITH_PLUGIN + budget + ("--nocompile-no-isolate",), Target()),
    ]


# -- running pytest --------------------------------------------------------------


def pytest_env(plugin_dir: Path) -> dict[str, str]:
    """The environment of every pytest subprocess: no autoloaded plugins, stand-ins importable."""
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(plugin_dir), env.get("PYTHONPATH"))))
    env.pop("PYTEST_ADDOPTS", None)  # the user's options would apply to one side's meaning only
    # Installed packages run from cached bytecode; with this set (as on some CI
    # images) every run would compile the plugin's and the suites' source again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_checked(args: Sequence[str], folder: Path, env: dict[str, str],
                prefix: Sequence[str] = PYTEST) -> subprocess.CompletedProcess[str]:
    """Run pytest in ``folder`` (its rootdir, and the one collected). A failing run aborts the
    benchmark."""
    # The ini file is the empty one above the suites.
    command = [*prefix, *args, "--rootdir", str(folder), str(folder)]
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if result.returncode not in (0, EXIT_NO_TESTS):
        sys.exit(f"benchmark aborted: {' '.join(command)} exited {result.returncode}\n"
                 f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result


def run_pytest(args: Sequence[str], folder: Path, env: dict[str, str],
               prefix: Sequence[str] = PYTEST) -> float:
    """Run pytest in ``folder``; return its wall time in seconds."""
    start = time.perf_counter()
    run_checked(args, folder, env, prefix)
    return time.perf_counter() - start


@dataclass
class Timings:
    """Wall times of one suite's two sides, one per round."""

    suite: Suite
    without: list[float]
    with_plugin: list[float]


def time_suites(suites: Sequence[Suite], rounds: int, env: dict[str, str]) -> list[Timings]:
    """Run every suite with and without the plugin, alternating, for ``rounds`` rounds.

    Which side goes first flips every round, and the suites are interleaved,
    so a slow spell of this shared machine lands on both sides alike.
    """
    timings = [Timings(suite, [], []) for suite in suites]
    # warm-up, untimed: writes the rewritten .pyc files and pulls torch into the page cache
    for suite in suites:
        run_pytest(("--co",) + suite.with_plugin, suite.folder, env)
    for round_index in range(rounds):
        for timing in timings:
            sides = [(timing.suite.without, timing.without),
                     (timing.suite.with_plugin, timing.with_plugin)]
            for args, times in sides if round_index % 2 == 0 else reversed(sides):
                times.append(run_pytest(args, timing.suite.folder, env))
            print(f"round {round_index + 1}/{rounds}  {timing.suite.name:8} "
                  f"without {timing.without[-1]:7.3f} s  with {timing.with_plugin[-1]:7.3f} s",
                  flush=True)
    return timings


# -- reporting ---------------------------------------------------------------------


def format_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    rows = [list(headers)] + [list(row) for row in rows]
    widths = [max(len(row[column]) for row in rows) for column in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        cells = [cell.ljust(width) if column == 0 else cell.rjust(width)
                 for column, (cell, width) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(rows[0]), rule] + [line(row) for row in rows[1:]])


def overhead(without: float, with_plugin: float, tests: int) -> tuple[float, float]:
    """(overhead in %, overhead in ms per test) of one pair of wall times."""
    per_test_ms = (with_plugin - without) / tests * 1000 if tests else float("nan")
    return (with_plugin / without - 1) * 100, per_test_ms


def verdict(target: Target, medians: tuple[float, float],
            rounds: Sequence[tuple[float, float]]) -> str:
    """met / NOT met by the medians; "(within noise)" when single rounds fall on both sides of the
    target."""
    met = target.met(*medians)
    if met is None:
        return "-"
    noisy = len({target.met(*pair) for pair in rounds}) > 1
    return ("met" if met else "NOT met") + (" (within noise)" if noisy else "")


def suite_row(timing: Timings) -> list[str]:
    """One row of the suites table, from medians; the ratio range (per-round ratios) shows the
    noise."""
    tests = timing.suite.tests
    without, with_plugin = statistics.median(timing.without), statistics.median(timing.with_plugin)
    percent, per_test_ms = overhead(without, with_plugin, tests)
    rounds = [overhead(wo, w, tests) for wo, w in zip(timing.without, timing.with_plugin)]
    round_ratios = [w / wo for wo, w in zip(timing.without, timing.with_plugin)]
    return [
        timing.suite.name,
        str(tests),
        f"{without:.3f}",
        f"{with_plugin:.3f}",
        f"{with_plugin / without:.3f}",
        f"{min(round_ratios):.2f}-{max(round_ratios):.2f}",
        f"{percent:+.1f}",
        f"{per_test_ms:+.3f}" if tests else "-",
        timing.suite.target.describe(),
        verdict(timing.suite.target, (percent, per_test_ms), rounds),
    ]


def own_work_rows(suites: Sequence[Suite], env: dict[str, str], runs: int,
                  without: dict[str, float]) -> list[list[str]]:
    """Time inside the plugin's per-test hooks, from the hook timer: per test, and the one-off rest.

    Per test is the median over a run's tests, less what the timer itself
    adds (timed on empty hooks in the same process); the one-off part (the
    first watched test imports dynamo's logging modules) is the run's total
    minus that median times the number of tests. Both are the least of
    ``runs`` runs, the ones the machine disturbed least. Not counted: pluggy
    calling the hooks, and start-up.
    """
    rows = []
    for suite in suites:
        if not suite.tests:
            continue
        per_test, one_off, reset = [], [], []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as folder:
                times_file = Path(folder) / "hook-times.json"
                run_pytest(("-p", HOOK_TIMER) + suite.with_plugin, suite.folder,
                           dict(env, NOCOMPILE_HOOK_TIMES=str(times_file)))
                spent = json.loads(times_file.read_text())
            cost = spent["timer_cost"]
            own = [hooks - in_reset - plain * cost["plain"] - wrapper * cost["wrapper"]
                   for hooks, in_reset, plain, wrapper in zip(
                       spent["hooks"], spent["reset"], spent["plain_calls"],
                       spent["wrapper_calls"])]
            per_test.append(statistics.median(own))
            one_off.append(sum(own) - per_test[-1] * len(own))
            reset.append(statistics.median(spent["reset"]))
        own_total = min(per_test) * suite.tests + min(one_off)
        share = own_total / without[suite.name] * 100 if suite.name in without else None
        # Only a per-test target is judged here: a wall-time one also pays pluggy and start-up
        # (suites table).
        met = (suite.target.met(0.0, min(per_test) * 1000)
               if suite.target.max_ms_per_test is not None else None)
        rows.append([suite.name, str(suite.tests), f"{min(per_test) * 1e6:.1f}",
                     f"{min(reset) * 1e6:.1f}",
                     f"{min(one_off) * 1000:.1f}", "-" if share is None else f"{share:.2f}",
                     suite.target.describe(), "-" if met is None else "met" if met else "NOT met"])
    return rows


OWN_WORK_HEADERS = ("suite", "tests", "own work (us/test)", "dynamo reset (us/test)",
                    "one-off (ms)", "own work, % of without", "target", "verdict")


SUITE_HEADERS = ("suite", "tests", "without (s)", "with (s)", "ratio", "ratio range",
                 "overhead %", "ms/test", "target", "verdict")


def machine_description(env: dict[str, str], cwd: Path) -> str:
    """CPUs, platform, versions, and which copy of the plugin the runs import (PYTHONPATH can point
    at another)."""
    # Versions from package metadata, the plugin's folder from a subprocess started like the pytest
    # runs (same environment, same kind of working directory): the driver never imports torch.
    where = subprocess.run([sys.executable, "-c",
                            "import pytest_nocompile; print(pytest_nocompile.__file__)"],
                           cwd=cwd, env=env, capture_output=True, text=True).stdout.strip()
    return (f"machine: {os.cpu_count()} CPUs, {platform.platform()}; python "
            f"{platform.python_version()}, torch {version('torch')}, pytest {version('pytest')}, "
            f"pytest-nocompile {version('pytest-nocompile')} from {os.path.dirname(where)}")


# -- instructions: what a shared machine's wall times cannot resolve -----------------

# Python started with its cyclic garbage collector off, then pytest as `-m pytest` would.
WITHOUT_GC = ("-c",
              "import gc, runpy; gc.disable(); runpy.run_module('pytest', run_name='__main__', "
              "alter_sys=True)")
CALLGRIND_TOTAL = re.compile(r"Collected : (\d+)")


def count_instructions(args: Sequence[str], folder: Path, env: dict[str, str], gc_on: bool) -> int:
    """Instructions one pytest run executes, counted by valgrind's callgrind (all threads)."""
    python = (sys.executable, "-m", "pytest") if gc_on else (sys.executable, *WITHOUT_GC)
    prefix = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *python,
              *PYTEST[3:])
    # String hashes are salted per process: fixed, so dicts and sets do the same work each run.
    match = CALLGRIND_TOTAL.search(run_checked(args, folder, dict(env, PYTHONHASHSEED="0"),
                                               prefix).stderr)
    if match is None:
        sys.exit("benchmark aborted: no instruction count in valgrind's output")
    return int(match.group(1))


def instruction_rows(suites: Sequence[Suite], empty: Path, env: dict[str, str],
                     locations: int) -> list[list[str]]:
    """Each suite's instructions without and with the plugin; the one-off part from the empty suite.

    A count repeats to within a few instructions for the same program, inputs
    and paths, whatever else the machine is doing, where wall times here vary
    by 10 % and more. Instructions are not seconds: they leave out cache and
    memory effects, but they rank and size CPU-bound Python work well. With
    the garbage collector on (as users run), a small change in allocations
    moves its full collections, a few million instructions each; the rows
    without it split per-test and one-off work more cleanly.

    The counts also move with where the suite lies: a path's characters
    change string hashes, and so the probing of dicts and sets all through
    pytest, by up to about 0.3 % of a run of suite a. So every count is taken
    in copies of the suites at several locations (folders of different
    names), and each row gives the median and, for the overhead, the range;
    the verdict is the worst location's.
    """
    places = []
    for index in range(locations):
        # names of different lengths
        place = empty.parent.parent / f"located-{'x' * (3 * index + 1)}"
        place.mkdir()
        (place / "pytest.ini").write_text("[pytest]\n")
        for folder in {suite.folder for suite in suites} | {empty}:
            shutil.copytree(folder, place / folder.name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        places.append(place)
    sides = ("without", "with_plugin")  # Suite's fields: each side's options
    # One job per distinct command: suites that share a folder and options share a count.
    jobs = sorted({(place / folder.name, getattr(suite, side), gc_on) for place in places
                   for suite in suites
                   for folder in (suite.folder, empty) for side in sides
                   for gc_on in (True, False)})
    for folder, args, gc_on in jobs:  # untimed, once each: writes the rewritten .pyc files first
        if gc_on:
            run_checked(args, folder, env)

    def count(job: tuple[Path, tuple[str, ...], bool]) -> int:
        folder, args, gc_on = job
        return count_instructions(args, folder, env, gc_on)

    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        counts = dict(zip(jobs, pool.map(count, jobs)))
    rows = []
    for suite in suites:
        for gc_on in (True, False):
            # per location: without, with, overhead %, one-off, per test, a test without
            measured = []
            for place in places:
                without, with_plugin = (counts[(place / suite.folder.name, getattr(suite, side),
                                                gc_on)] for side in sides)
                bare_without, bare_with = (counts[(place / empty.name, getattr(suite, side), gc_on)]
                                           for side in sides)
                one_off = bare_with - bare_without
                measured.append((without, with_plugin, (with_plugin / without - 1) * 100, one_off,
                                 (with_plugin - without - one_off) / suite.tests,
                                 (without - bare_without) / suite.tests))
            without, with_plugin, percent, one_off, per_test, test_without = (
                statistics.median(column) for column in zip(*measured))
            percents = [row[2] for row in measured]
            met = (suite.target.met(max(percents), 0.0)
                   if suite.target.max_overhead_percent is not None else None)
            rows.append([suite.name, "on" if gc_on else "off", f"{without / 1e6:.1f}",
                         f"{with_plugin / 1e6:.1f}",
                         f"{percent:+.2f}", f"{min(percents):+.2f} .. {max(percents):+.2f}",
                         f"{one_off / 1e6:.1f}",
                         f"{per_test / 1e3:.1f}", f"{test_without / 1e3:.0f}",
                         suite.target.describe(),
                         "-" if met is None else "met" if met else "NOT met"])
    return rows


INSTRUCTION_HEADERS = ("suite", "gc", "without (M)", "with (M)", "overhead %", "range %",
                       "one-off (M)", "per test (k)", "a test without (k)", "target", "verdict")


# -- start-up: imports and an empty collection ---------------------------------------

IMPORT_LINE = re.compile(
    r"^import time:\s+(?P<self>\d+) \|\s+(?P<cumulative>\d+) \|(?P<indent> +)(?P<name>\S+)$")


@dataclass(frozen=True)
class Import:
    """One line of ``python -X importtime``: a module, its own and cumulative time (us), its
    depth."""

    name: str
    self_us: int
    cumulative_us: int
    depth: int


def import_times(code: Sequence[str], env: dict[str, str], cwd: Path) -> list[Import]:
    """The modules ``python -X importtime <code>`` imported, innermost first (importtime's
    order)."""
    result = subprocess.run([sys.executable, "-X", "importtime", *code], cwd=cwd, env=env,
                            capture_output=True, text=True)
    imports = []
    for line in result.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            imports.append(Import(match["name"], int(match["self"]), int(match["cumulative"]),
                                  (len(match["indent"]) - 1) // 2))
    return imports


def is_torch(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


IMPORT_TIMER = (
    "import sys, time, pytest\n"
    "start = time.perf_counter()\n"
    "import pytest_nocompile.plugin\n"
    "print((time.perf_counter() - start) * 1000)\n"
    "print(' '.join(sorted(name for name in sys.modules if name.split('.')[0] in ('torch', "
    "'pytest_nocompile'))))\n"
)


def import_rows(env: dict[str, str], cwd: Path, runs: int) -> list[list[str]]:
    """Does loading the plugin import torch, and what does importing it cost on top of pytest?"""
    import_ms, loaded = [], ""
    for _ in range(runs):
        # perf_counter in the subprocess, not -X importtime: that one roughly doubles what it times.
        lines = subprocess.run([sys.executable, "-c", IMPORT_TIMER], cwd=cwd, env=env,
                               capture_output=True, text=True, check=True).stdout.splitlines()
        import_ms.append(float(lines[0]))
        loaded = lines[1] if len(lines) > 1 else ""
    # The real question: does a pytest run that loads the plugin (and collects nothing) import
    # torch?
    in_pytest = import_times(("-m", "pytest", *PYTEST[3:], *WITH_PLUGIN, "--co", str(cwd)), env,
                             cwd)
    torch_seen = {entry.name for entry in in_pytest if is_torch(entry.name)}
    return [
        ["torch modules imported by `pytest -p pytest_nocompile.plugin --co`",
         ", ".join(sorted(torch_seen)) or "none"],
        ["`import pytest_nocompile.plugin` after `import pytest`, median ms",
         f"{statistics.median(import_ms):.1f}"],
        ["  modules it loads", loaded.replace(" ", ", ")],
    ]


def collect_rows(empty: Path, env: dict[str, str], runs: int) -> list[list[str]]:
    """`pytest --co -q` on an empty folder: no plugin, an inert one by module, this one by module
    and by name."""
    inert_name = f"-p {STAND_IN_MARKERS} (inert: pytest's entry-point scan for the name)"
    sides = {
        "-p no:nocompile": WITHOUT_PLUGIN,
        inert_name: INERT,
        "-p pytest_nocompile.plugin": WITH_PLUGIN,
        "-p nocompile (by entry-point name)": BY_ENTRY_POINT,
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    for index in range(runs):
        order = list(sides)[index % len(sides):] + list(sides)[:index % len(sides)]
        for name in order:
            times[name].append(run_pytest(("--co",) + sides[name], empty, env))
    reference = statistics.median(times[inert_name])
    rows = []
    for name, measured in times.items():
        median = statistics.median(measured)
        difference = ("" if sides[name] in (WITHOUT_PLUGIN, INERT)
                      else f", {(median - reference) * 1000:+.1f} ms against the inert plugin")
        rows.append([f"`pytest --co -q` on an empty folder, {name}, median s",
                     f"{median:.3f}{difference}"])
    return rows


# -- children: the start-up hook that every Python process of the environment runs ---------

HOOK_FILE = "pytest-nocompile.pth"
# pytest_nocompile.features.child_startup.event_writer.ENV_VAR, spelled out: the driver imports no
# plugin module (the version on PYTHONPATH may have none), and the hook reads the variable before
# importing any.
EVENTS_VAR = "PYTEST_NOCOMPILE_EVENTS"
MODULES = "import sys; print(' '.join(sorted(sys.modules)))"

# Run with the variable unset, in this environment: times what site does with the hook's
# file at every interpreter start (site.addpackage: open, read, exec each import line), and
# the exec of its line alone, in batches; with "set", sets the variable first and times the
# one call that imports what the hook needs (a fresh process each time).
HOOK_LINE_TIMER = (
    "import json, os, site, sys, time\n"
    "sitedir, name, mode = sys.argv[1:4]\n"
    "with open(os.path.join(sitedir, name)) as source:\n"
    "    line = next(line for line in source if line.startswith('import'))\n"
    "def run_line():\n"
    "    exec(line)  # as site.addpackage does\n"
    "def per_call(function, calls):\n"
    "    start = time.perf_counter()\n"
    "    for _ in range(calls):\n"
    "        function()\n"
    "    return (time.perf_counter() - start) / calls\n"
    "if mode == 'set':\n"
    "    os.environ[sys.argv[5]] = sys.argv[4]\n"
    "    before = set(sys.modules)\n"
    "    first = per_call(lambda: site.addpackage(sitedir, name, set()), 1)\n"
    "    print(json.dumps({'first': first, 'modules': sorted(set(sys.modules) - before)}))\n"
    "else:\n"
    "    print(json.dumps({'addpackage': [per_call(lambda: site.addpackage(sitedir, name, set()), "
    "2000) for _ in range(7)],\n"
    "                      'exec': [per_call(run_line, 20000) for _ in range(7)]}))\n"
)


def installed_hook() -> Optional[Path]:
    """The start-up hook's file in this interpreter's site-packages, if the package installed one
    there."""
    import site

    for directory in site.getsitepackages():
        path = Path(directory) / HOOK_FILE
        if path.is_file():
            return path
    return None


def environment_copy(place: Path, site_packages: Path, with_hook: bool) -> Path:
    """A virtual environment at ``place`` that sees this one's packages; returns its python.

    Its site-packages holds a link to each entry of ``site_packages``, the
    hook's file only if ``with_hook``: two copies differ in that one file, so
    what a start costs more in one than in the other is the hook's. (A venv
    made with ``--system-site-packages`` would not do: it adds a second
    site-packages, and its start-up differs by more than the hook.)
    """
    base = Path(os.path.realpath(sys.executable))
    target = place / site_packages.relative_to(sys.prefix)
    target.mkdir(parents=True)
    for entry in site_packages.iterdir():
        if with_hook or entry.name != HOOK_FILE:
            (target / entry.name).symlink_to(entry)
    (place / "pyvenv.cfg").write_text(f"home = {base.parent}\n"
                                      "include-system-site-packages = false\n"
                                      f"version = {platform.python_version()}\n")
    (place / "bin").mkdir()
    python = place / "bin" / "python"
    python.symlink_to(base)
    return python


def modules_after_start(python: Path, env: dict[str, str], cwd: Path) -> set[str]:
    """The modules in sys.modules when ``python -c`` starts running its code."""
    return set(subprocess.run([str(python), "-c", MODULES], cwd=cwd, env=env,
                              capture_output=True, text=True, check=True).stdout.split())


def time_starts(pythons: dict[str, Path], env: dict[str, str], cwd: Path,
                runs: int) -> dict[str, list[float]]:
    """Wall time of ``python -c pass`` for each python, ``runs`` times, alternating which goes
    first."""
    times: dict[str, list[float]] = {name: [] for name in pythons}
    names = list(pythons)
    for index in range(runs):
        for name in names if index % 2 == 0 else reversed(names):
            start = time.perf_counter()
            subprocess.run([str(pythons[name]), "-c", "pass"], cwd=cwd, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
    return times


def count_start(python: Path, env: dict[str, str], cwd: Path) -> int:
    """Instructions ``python -c pass`` executes, counted by callgrind, string hashes fixed."""
    result = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                             str(python), "-c", "pass"],
                            cwd=cwd, env=dict(env, PYTHONHASHSEED="0"),
                            capture_output=True, text=True)
    match = CALLGRIND_TOTAL.search(result.stderr)
    if result.returncode != 0 or match is None:
        sys.exit(f"benchmark aborted: callgrind of {python} -c pass exited {result.returncode}\n"
                 f"{result.stderr[-3000:]}")
    return int(match.group(1))


def children_tables(root: Path, env: dict[str, str], runs: int) -> str:
    """What the child-process start-up hook costs every Python process of the environment (issue
    13).

    The hook (``pytest-nocompile.pth``, which site executes at every start)
    looks the variable up and, only when it is set, imports the start-up
    module. Measured, with the variable unset and with it set to a folder
    that does not exist (as in a process a watched test started, before
    anything compiled):

    - in-process, with it unset: ``site.addpackage`` on the installed file
      (what site does with it at every start: open, read, exec its line) and
      the ``exec`` of its line alone, per call, median of 7 batches; with it
      set, the one call that imports what the hook needs, median over fresh
      processes;
    - ``python -c pass`` in two copies of this environment (see
      ``environment_copy``) that differ only in the hook's file: wall times
      of ``runs`` alternating starts of each, the difference of their
      medians and the median of the differences of back-to-back pairs; and,
      where valgrind is installed, instructions, at two locations (paths
      move counts a little);
    - the modules each copy has loaded when ``-c`` code starts, compared, and
      whether anything was written to the folder the variable names.
    """
    hook = installed_hook()
    if hook is None:
        return (f"children: no {HOOK_FILE} in this interpreter's site-packages; install the "
                "package (pip install -e .)")
    base_env = {name: value for name, value in env.items() if name != EVENTS_VAR}
    place = root / "children"
    missing = place / "events-not-there"  # the folder a watched test names; here it never exists
    set_env = dict(base_env, **{EVENTS_VAR: str(missing)})
    states = {"unset": base_env, "set": set_env}
    try:
        pythons = {(label, location): environment_copy(place / f"{label}-{location}", hook.parent,
                                                       label == "hook")
                   for label in ("hook", "none") for location in ("x", "xxxx")}
    except ValueError:
        return (f"children: {hook.parent} is not under sys.prefix ({sys.prefix}); cannot copy "
                "the environment")
    cwd = place
    # each copy is what it claims: its prefix, and the hook or not
    for (label, _), python in pythons.items():
        # the reporter's module: features/child_startup/ since the children became islands
        check = ("import sys; print(sys.prefix); print(any(name in sys.modules for name in ("
                 "'pytest_nocompile.processes.startup', "
                 "'pytest_nocompile.features.child_startup.startup')))")
        prefix, has_hook = subprocess.run([str(python), "-c", check], cwd=cwd, env=set_env,
                                          capture_output=True, text=True, check=True).stdout.split()
        if Path(prefix) != python.parent.parent or has_hook != str(label == "hook"):
            sys.exit(f"benchmark aborted: {python} has prefix {prefix} and hook {has_hook}: not "
                     "the copy it should be")

    # In-process.
    sitedir = str(hook.parent)
    unset = json.loads(subprocess.run([sys.executable, "-c", HOOK_LINE_TIMER, sitedir, hook.name,
                                       "unset"],
                                      cwd=cwd, env=base_env, capture_output=True, text=True,
                                      check=True).stdout)
    firsts, imported = [], []
    for _ in range(max(5, runs // 10)):
        measured = json.loads(subprocess.run([sys.executable, "-c", HOOK_LINE_TIMER, sitedir,
                                              hook.name, "set", str(missing), EVENTS_VAR],
                                             cwd=cwd, env=base_env, capture_output=True, text=True,
                                             check=True).stdout)
        firsts.append(measured["first"])
        imported = measured["modules"]
    in_process = [
        ["variable unset: site.addpackage on the hook's file, per start",
         f"{statistics.median(unset['addpackage']) * 1e6:.2f} us"],
        ["variable unset: exec of its line alone",
         f"{statistics.median(unset['exec']) * 1e6:.2f} us"],
        [f"variable set: site.addpackage, first call in a fresh process (median of {len(firsts)})",
         f"{statistics.median(firsts) * 1000:.2f} ms (range "
         f"{min(firsts) * 1000:.2f}-{max(firsts) * 1000:.2f})"],
        ["  modules that call imported", ", ".join(imported) or "none"],
    ]

    # Modules, and nothing written.
    modules = {(state, label): modules_after_start(pythons[(label, "x")], state_env, cwd)
               for state, state_env in states.items() for label in ("hook", "none")}
    added = {state: sorted(modules[(state, "hook")] - modules[(state, "none")]) for state in states}
    gone = {state: sorted(modules[(state, "none")] - modules[(state, "hook")]) for state in states}
    quiet = subprocess.run([str(pythons[("hook", "x")]), "-c", "pass"], cwd=cwd, env=set_env,
                           capture_output=True, text=True)
    timings = {state: time_starts({label: pythons[(label, "x")] for label in ("hook", "none")},
                                  state_env, cwd, runs)
               for state, state_env in states.items()}
    unset_imports = import_times(("-c", "pass"), base_env, cwd)
    with_set = import_times(("-c", "pass"), set_env, cwd)
    hook_imports = [entry for entry in with_set if entry.name in added["set"]]
    for state in states:
        in_process.append([f"variable {state}: modules loaded with the hook, not without it",
                           ", ".join(added[state]) or "none"])
        if gone[state]:
            in_process.append([f"variable {state}: modules loaded without the hook, not with it",
                               ", ".join(gone[state])])
    in_process += [
        ["variable unset: pytest_nocompile modules in `python -X importtime -c pass`",
         ", ".join(entry.name for entry in unset_imports
                   if entry.name.startswith("pytest_nocompile")) or "none"],
        ["variable set: those modules' own time in `python -X importtime -c pass` (it inflates "
         "what it times)",
         f"{sum(entry.self_us for entry in hook_imports) / 1000:.2f} ms: "
         + ", ".join(f"{entry.name} {entry.self_us / 1000:.2f}"
                     for entry in sorted(hook_imports, key=lambda entry: -entry.self_us))],
        ["variable set: torch or logging modules among them",
         ", ".join(name for name in added["set"] if is_torch(name)
                   or name.split(".")[0] == "logging") or "none"],
        ["variable set: `python -c pass` exit code, output",
         f"{quiet.returncode}, {len(quiet.stdout) + len(quiet.stderr)} characters"],
        ["variable set: the folder it names, afterwards",
         "exists: written to" if missing.exists() else "absent: nothing written"],
    ]

    wall_rows = []
    for state, measured in timings.items():
        with_hook, without = measured["hook"], measured["none"]
        pairs = [w - wo for w, wo in zip(with_hook, without)]
        quartiles = statistics.quantiles(pairs, n=4)
        wall_rows.append([
            state, str(runs), f"{statistics.median(with_hook) * 1000:.2f}",
            f"{statistics.median(without) * 1000:.2f}",
            f"{(statistics.median(with_hook) - statistics.median(without)) * 1000:+.2f}",
            f"{statistics.median(pairs) * 1000:+.2f} ({quartiles[0] * 1000:+.2f} .. "
            f"{quartiles[2] * 1000:+.2f})"])
    tables = [format_table(("hook", "value"), in_process),
              format_table(("variable", "runs", "with hook (ms)", "without (ms)",
                            "difference of medians (ms)",
                            "median pair difference (ms) (quartiles)"), wall_rows)]

    if shutil.which("valgrind"):
        jobs = [(state, label, location) for state in states for label in ("hook", "none")
                for location in ("x", "xxxx")]

        def count(job: tuple[str, str, str]) -> int:
            state, label, location = job
            return count_start(pythons[(label, location)], states[state], cwd)

        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
            counts = dict(zip(jobs, pool.map(count, jobs)))
        count_rows = []
        for state in states:
            for location in ("x", "xxxx"):
                hooked, bare = counts[(state, "hook", location)], counts[(state, "none", location)]
                count_rows.append([state, f"hook-{location}, none-{location}",
                                   f"{hooked / 1e6:.3f}", f"{bare / 1e6:.3f}",
                                   f"{(hooked - bare) / 1e3:+.1f}",
                                   f"{(hooked / bare - 1) * 100:+.2f}"])
        tables.append(format_table(("variable", "copies", "with hook (M)", "without (M)",
                                    "difference (k)", "difference %"),
                                   count_rows))
    else:
        tables.append("children: valgrind not found; no instruction counts")
    return (f"the start-up hook {hook}; copies of the environment with and without it in "
            f"{place}:\n\n"
            + "\n\n".join(tables))


# -- profile -------------------------------------------------------------------------


def profile_suite(suite: Suite, env: dict[str, str], out: Path, top: int) -> None:
    """Run a suite's with-plugin side once in-process under cProfile; print where the plugin's time
    goes."""
    profile_file = out / f"{suite.name}.prof"
    prefix = (sys.executable, "-m", "cProfile", "-o", str(profile_file), "-m", "pytest",
              *PYTEST[3:])
    elapsed = run_pytest(suite.with_plugin, suite.folder, env, prefix=prefix)
    print(f"\ncProfile of suite {suite.name} with the plugin ({elapsed:.2f} s under the profiler); "
          f"the plugin's functions, top {top} by cumulative time:")
    stats = pstats.Stats(str(profile_file))
    stats.sort_stats("cumulative").print_stats(r"pytest_nocompile", top)
    # setLevel clears the level cache of every logger in the process (218 once dynamo is imported);
    # pytest's log capture calls addHandler/removeHandler for every non-propagating logger (54 of
    # torch's) twice in every test phase, plugin or not: the cost of importing torch, not the
    # plugin's.
    print("who calls the logging functions whose cost grows with the number of loggers:")
    stats.print_callers(r"\((setLevel|_clear_cache|addHandler|removeHandler)\)")


# -- main ------------------------------------------------------------------------------


SUITE_NAMES = ("empty", "a", "a-unused", "a+dynamo", "a+torch", "b", "c", "evict", "shared",
               "shared-no-isolate")
# Under valgrind a run is about 50 times slower, and torch's import alone takes minutes there.
INSTRUCTION_SUITES = ("a", "a-unused")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds of alternating runs (default 5; 3 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="a tenth of the tests, for a smoke run")
    parser.add_argument("--part", choices=("all", "suites", "instructions", "startup", "children"),
                        default="all",
                        help="wall times of the suites, instruction counts (needs valgrind), the "
                             "start-up checks, the child-process start-up hook's cost, or "
                             "all (default)")
    parser.add_argument("--suites", default=",".join(SUITE_NAMES),
                        help="comma-separated suites to time (default: all of "
                             f"{','.join(SUITE_NAMES)})")
    parser.add_argument("--wall-only", action="store_true",
                        help="suites part: wall times only, no hook timer (for a plugin version "
                             "without its seam)")
    parser.add_argument("--locations", type=int, default=3,
                        help="instructions part: count copies of the suites at this many "
                             "locations (default 3)")
    parser.add_argument("--starts", type=int, default=None,
                        help="children part: `python -c pass` runs per side and state (default "
                             "200; 40 with --quick)")
    parser.add_argument("--plugin-args", default="", metavar="ARGS",
                        help="more options for every suite's with-plugin side, one string (e.g. "
                             "--nocompile-no-subprocess)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile suite a with the plugin under cProfile")
    parser.add_argument("--keep", metavar="DIR",
                        help="generate the suites in DIR, a new or empty folder, and keep them")
    args = parser.parse_args(argv)
    unknown = set(args.suites.split(",")) - set(SUITE_NAMES)
    if unknown:
        parser.error(
            f"--suites: unknown {', '.join(sorted(unknown))}; choose from {', '.join(SUITE_NAMES)}")
    if args.locations < 1:
        parser.error("--locations: give 1 or more")
    if args.starts is not None and args.starts < 4:
        parser.error("--starts: give 4 or more")
    if args.keep and Path(args.keep).exists() and any(Path(args.keep).iterdir()):
        parser.error(f"--keep {args.keep}: not empty; give a new or empty folder")
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    scale = 10 if args.quick else 1
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nocompile-overhead-"))
    try:
        write_stand_ins(root / "plugins")
        env = pytest_env(root / "plugins")
        extra = tuple(shlex.split(args.plugin_args))
        suites = {suite.name: replace(suite, with_plugin=suite.with_plugin + extra)
                  for suite in make_suites(root / "suites", 1000 // scale, 200 // scale)}
        print(machine_description(env, suites["empty"].folder), flush=True)
        if extra:
            print(f"with-plugin side of every suite: {' '.join(WITH_PLUGIN)} ... {' '.join(extra)}",
                  flush=True)
        startup_table = suites_table = own_table = instruction_table = children_table = ""
        if args.part in ("all", "startup"):
            empty = suites["empty"].folder
            # Start-up differences (~30 ms) are within one run's noise here, and a run costs 0.3 s:
            # take many.
            rows = import_rows(env, empty, runs=5) + collect_rows(empty, env, runs=4 * rounds)
            startup_table = format_table(("start-up", "value"), rows)
        if args.part in ("all", "suites"):
            chosen = [suites[name] for name in SUITE_NAMES if name in args.suites.split(",")]
            timings = time_suites(chosen, rounds, env)
            suites_table = format_table(SUITE_HEADERS, (suite_row(timing) for timing in timings))
            without = {timing.suite.name: statistics.median(timing.without) for timing in timings}
            if not args.wall_only:
                own_table = format_table(OWN_WORK_HEADERS,
                                         own_work_rows(chosen, env, runs=3, without=without))
        if args.part in ("all", "instructions"):
            if shutil.which("valgrind"):
                counted = [suites[name] for name in INSTRUCTION_SUITES]
                instruction_table = format_table(INSTRUCTION_HEADERS,
                                                 instruction_rows(counted, suites["empty"].folder,
                                                                  env, args.locations))
            else:
                instruction_table = (
                    "instructions: valgrind not found; install it (Debian: valgrind) to count them")
        if args.part in ("all", "children"):
            children_table = children_tables(root, env, args.starts or (40 if args.quick else 200))
        if args.profile:
            profile_suite(suites["a"], env, root, top=25)
        if suites_table or startup_table:
            print(f"\nmedians of {rounds} rounds, each round runs both sides back to back, "
                  "alternating which goes first")
        for table in (suites_table, own_table, instruction_table, startup_table, children_table):
            if table:
                print("\n" + table)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
