#!/usr/bin/env python3
"""What writing a structured trace adds to a compile: the cost of ``--nocompile-trace-dir`` inside a
test's body.

    python benchmarks/structured_trace_cost.py [--compiles 40] [--rounds 5] [--backend eager]

The plugin's hooks are timed by ``overhead.py`` (``--plugin-args=--nocompile-trace-dir=traces``)
and ``driven_hooks.py``; what torch itself does while a trace handler is attached (a record
for each step of a compile, formatted and written to the file) happens inside the test and
only shows in wall time, which a loaded machine cannot resolve at 200 tests. This script
compiles fresh small functions in one process, in batches that alternate between no trace
handler and the plugin's own
:class:`~pytest_nocompile.features.traces.structured_trace.StructuredTrace` attached, and prints the
least time per compile of each side and their ratio.

Without pytest, torch's ``torch.__trace`` logger has no handler when the trace is off, so
torch builds no record at all: an upper bound. Under pytest >= 9.1 its log capture attaches
a handler to that logger in every test, so torch builds the records with or without the option.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from itertools import count

import torch
import torch._dynamo  # imported before timing, as in any run that compiled

from pytest_nocompile.features.traces.structured_trace import StructuredTrace

_FRESH = count()


def compile_batch(compiles: int, backend: str) -> float:
    """Seconds per compile (and first call) of ``compiles`` new functions, each a code object of its
    own."""
    functions = []
    for _ in range(compiles):
        scope: dict[str, object] = {}
        exec(f"def f(x):\n    return (x + {next(_FRESH)}).sin() * 2\n", scope)
        functions.append(torch.compile(scope["f"], backend=backend))
    x = torch.ones(8)
    start = time.perf_counter()
    for function in functions:
        function(x)
    return (time.perf_counter() - start) / compiles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compiles", type=int, default=40, help="compiles per batch (default 40)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="batches per side, alternating (default 5)")
    parser.add_argument("--backend", default="eager", help="torch.compile backend (default eager)")
    args = parser.parse_args()
    compile_batch(5, args.backend)  # warm: the first compile of a process imports and caches much
    sides: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for side in ("off", "on") if round_ % 2 == 0 else ("on", "off"):
                trace = StructuredTrace(f"{folder}/{round_}") if side == "on" else None
                if trace is not None:
                    trace.attach()
                try:
                    sides[side].append(compile_batch(args.compiles, args.backend))
                finally:
                    if trace is not None:
                        trace.stop()
    off, on = min(sides["off"]), min(sides["on"])
    print(f"torch {torch.__version__}, backend {args.backend}, {args.compiles} compiles x "
          f"{args.rounds} batches per side; least ms per compile (and first call)")
    for side, times in sides.items():
        print(f"trace {side:<3}  {min(times) * 1e3:8.2f}  all: "
              f"{', '.join(f'{value * 1e3:.2f}' for value in times)}")
    print(f"ratio on/off  {on / off:.3f}  (+{(on - off) * 1e3:.2f} ms per compile)")


if __name__ == "__main__":
    main()
