#!/usr/bin/env python3
"""The plugin's own work per watched test, its hooks driven directly, side by side across versions
of the plugin.

    python benchmarks/driven_hooks.py [--revisions d8fb3ba,HEAD] [--rounds 3] [--tests 300]
    python benchmarks/driven_hooks.py --revisions "dc6d382,HEAD,HEAD --nocompile-trace-dir=traces"

``overhead.py`` times the plugin's hooks inside real pytest runs, where a
loaded machine moves a figure by a third between two runs of the same code.
This script takes pytest's own per-test work out: a small plugin calls the
watcher's per-test hooks (setup, call, teardown and the three reports) on
one collected test, ``--tests`` times in a row, in a process that imported
dynamo, and prints the least time per test over 7 batches. Two cases:

- **idle**: a watched test (``max_recompiles(0)``) in which nothing compiles;
- **compiling**: the same with one compile recorded during its call.

Each git revision given is extracted with ``git archive`` (:mod:`revisions`) and put first on
``PYTHONPATH``; an entry may add pytest options after its revision (a side of its own, for an option
one revision has); the sides alternate, ``--rounds`` processes each. The
loop keeps the plugin's code and data in the processor's caches, so the
figures are lower than ``overhead.py``'s: compare revisions within one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from revisions import extract, revision_sides

TEST_FILE = '''
import pytest
import torch._dynamo  # noqa: F401

@pytest.mark.max_recompiles(0)
def test_driven():
    pass
'''

# -p drive_hooks: the watcher's per-test hooks, called NOCOMPILE_DRIVE times on the first test,
# outside pluggy.
DRIVE_PLUGIN = '''
import os, time
import pytest
from _pytest.reports import TestReport


def _drive(wrapper):
    next(wrapper)
    try:
        wrapper.send(None)
    except StopIteration:
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    import pytest_nocompile
    assert pytest_nocompile.__file__.startswith(os.environ["NOCOMPILE_DRIVE_PACKAGE"]), (
        pytest_nocompile.__file__)
    tests, compiling = (int(os.environ["NOCOMPILE_DRIVE"]),
                        os.environ["NOCOMPILE_DRIVE_COMPILE"] == "1")
    watcher = session.config.pluginmanager.get_plugin("nocompile-watcher")
    item = session.items[0]
    reports = [TestReport(item.nodeid, item.location, {}, "passed", None, when, [], 0.0)
               for when in ("setup", "call", "teardown")]

    def one_test():
        _drive(watcher.pytest_runtest_setup(item))
        call = watcher.pytest_runtest_call(item)
        next(call)
        if compiling:
            record = watcher.current.record
            if hasattr(record, "add_compile"):  # a revision before the capture made the events
                record.add_compile(None, None, None)
            else:
                from pytest_nocompile.vocabulary.events import CompileEvent
                record.add(CompileEvent())
        try:
            call.send(None)
        except StopIteration:
            pass
        _drive(watcher.pytest_runtest_teardown(item, None))
        for report in reports:
            report.user_properties = []
            report.sections = []
            watcher.pytest_runtest_logreport(report)

    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(tests):
            one_test()
        best = min(best, (time.perf_counter() - start) / tests)
    print(f"DRIVEN {best * 1e6:.2f}")
    return True
'''

CASES = {"idle": "0", "compiling": "1"}


def measure(package: Path, suite: Path, case: str, tests: int, options: list[str]) -> float:
    """Least µs per driven test of one process."""
    env = {**os.environ, "PYTHONPATH": f"{package}{os.pathsep}{suite}",
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "NOCOMPILE_DRIVE": str(tests), "NOCOMPILE_DRIVE_COMPILE": CASES[case],
           "NOCOMPILE_DRIVE_PACKAGE": str(package)}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-p", "drive_hooks", "-p", "pytest_nocompile.plugin",
                             "--nocompile-no-isolate", *options, "."],
                            cwd=suite, env=env, capture_output=True, text=True)
    found = [line for line in result.stdout.splitlines() if line.startswith("DRIVEN ")]
    if not found:
        sys.exit(f"{package}: {case}: no figure\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return float(found[0].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revisions", default="HEAD",
                        help="comma-separated git revisions (default: HEAD)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="processes per revision and case, alternating (default 3)")
    parser.add_argument("--tests", type=int, default=300,
                        help="driven tests per batch (default 300)")
    args = parser.parse_args()
    sides = revision_sides(args.revisions)
    with tempfile.TemporaryDirectory() as temp:
        suite = Path(temp) / "suite"
        suite.mkdir()
        (suite / "test_driven.py").write_text(TEST_FILE)
        (suite / "drive_hooks.py").write_text(DRIVE_PLUGIN)
        packages = {revision: extract(revision, Path(temp))
                    for revision in dict.fromkeys(revision for _, revision, _ in sides)}
        times: dict[tuple[str, str], list[float]] = {(label, case): [] for label, _, _ in sides
                                                     for case in CASES}
        for _ in range(args.rounds):
            for case in CASES:
                for label, revision, options in sides:
                    times[label, case].append(measure(packages[revision], suite, case,
                                                      args.tests, options))
    print("the plugin's per-test hooks driven directly, dynamo imported, max_recompiles(0), "
          f"no isolation; least of {args.rounds} processes x 7 batches x {args.tests} tests "
          "(us per test)")
    width = max(12, *(len(label) for label, _, _ in sides))
    print(f"{'revision':<{width}} {'case':<10} {'us/test':>8}  all")
    for (label, case), measured in times.items():
        print(f"{label:<{width}} {case:<10} {min(measured):>8.1f}  "
              f"{', '.join(f'{value:.1f}' for value in measured)}")


if __name__ == "__main__":
    main()
