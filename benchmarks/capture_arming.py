#!/usr/bin/env python3
"""What a watched test pays to turn the capture on and off, side by side across versions of the
plugin.

    python benchmarks/capture_arming.py [--revisions 6ff2e97,HEAD] [--rounds 3] [--report]

Each watched test in a process that imported dynamo attaches its record to
the capture at setup (arming it: the taps on dynamo's loggers, the
convert_frame handler, the health sources its run reads), checks it at the
end of the call, and detaches it at teardown. This script times exactly
that, ``attach`` + ``check`` + ``detach`` of one record, for each git
revision given (each extracted with ``git archive`` and put first on
``PYTHONPATH``), in fresh processes that alternate between the revisions,
and prints the least per-cycle time of each (µs).

By default the run is narrowed as pytest narrows a run that budgets no
compile-health kind (revisions without ``DynamoLogs.narrow`` arm every
source); ``--report`` leaves it wide, as a run with a report does.
Development-machine figures are for comparing revisions in one run, not
across machines.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from revisions import extract, revision_list

MEASURE = r'''
import sys, time
import torch, torch._dynamo  # noqa: F401
from pytest_nocompile.observe.capture import DYNAMO_LOGS
try:
    from pytest_nocompile.record.record import RecompileRecord
    from pytest_nocompile.observe.wanted_signals import narrow
except ImportError:  # a revision from before the package's folders
    from pytest_nocompile.record import RecompileRecord
    narrow = getattr(DYNAMO_LOGS, "narrow", None)
if sys.argv[1] == "narrow" and narrow is not None:
    narrow(frozenset())
record = RecompileRecord()
def cycle(n):
    start = time.perf_counter()
    for _ in range(n):
        DYNAMO_LOGS.attach(record)
        DYNAMO_LOGS.check()
        DYNAMO_LOGS.detach(record)
    return (time.perf_counter() - start) / n * 1e6
cycle(2000)
import pytest_nocompile
assert pytest_nocompile.__file__.startswith(sys.argv[2]), pytest_nocompile.__file__
print(min(cycle(5000) for _ in range(5)))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revisions", default="HEAD",
                        help="comma-separated git revisions (default: HEAD)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="processes per revision, alternating (default 3)")
    parser.add_argument("--report", action="store_true",
                        help="leave the run wide (every health source), as a report does")
    args = parser.parse_args()
    revisions = revision_list(args.revisions)
    with tempfile.TemporaryDirectory() as temp:
        folders = {revision: extract(revision, Path(temp)) for revision in revisions}
        times: dict[str, list[float]] = {revision: [] for revision in revisions}
        for _ in range(args.rounds):
            for revision, folder in folders.items():
                result = subprocess.run([sys.executable, "-c", MEASURE,
                                         "wide" if args.report else "narrow", str(folder)],
                                        env={"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"},
                                        cwd=temp,  # not the checkout: first on sys.path
                                        capture_output=True, text=True)
                if result.returncode != 0:
                    sys.exit(f"{revision}: {result.stderr[-2000:]}")
                times[revision].append(float(result.stdout.split()[-1]))
    print("attach + check + detach of one record, "
          f"{'wide (a report)' if args.report else 'narrowed (no health budget)'}; least of "
          f"{args.rounds} processes x 5 x 5000 cycles")
    print(f"{'revision':<12} {'us/test':>8}  all")
    for revision, measured in times.items():
        print(f"{revision:<12} {min(measured):>8.1f}  "
              f"{', '.join(f'{value:.1f}' for value in measured)}")


if __name__ == "__main__":
    main()
