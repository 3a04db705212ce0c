"""The ``doctor`` command of ``python -m pytest_nocompile``: its arguments, and running it."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from typing import Iterator


def add_to(commands: argparse._SubParsersAction) -> None:
    """The command's parser, among ``python -m pytest_nocompile``'s."""
    doctor = commands.add_parser(
        "doctor", help="say what pytest-nocompile can see on the torch installed here",
        description="Compile tiny functions and say, for each signal a gate counts (compiles, "
        "recompiles, graph breaks, limit hits, swallowed errors, compile cost, cache misses, "
        "kernels, syncs), whether each of its witnesses was seen and its text read on the torch "
        "installed here. Exits 1 where a witness is dark.")
    doctor.add_argument("--eager-only", action="store_true",
                        help="skip the probes only inductor runs (cache misses, kernels)")


def run(arguments: argparse.Namespace) -> int:
    """Probe and print the table; the exit code: 0 every witness seen, 1 one is dark or torch
    cannot be watched at all."""
    from ...observe.dynamo_state import torch_problem

    problem = torch_problem()  # torch missing, broken or too old: nothing can be seen
    if problem is not None:
        print(f"pytest-nocompile doctor: {problem}", file=sys.stderr)
        return 1
    import torch

    from .findings import exit_code, table, verdict
    from .probes import run_probes

    with _quiet():
        findings = run_probes(with_inductor=not arguments.eager_only)
    cuda = "CUDA" if torch.cuda.is_available() else "no CUDA"
    print(f"pytest-nocompile doctor: torch {torch.__version__}, Python "
          f"{sys.version.split()[0]}, {cuda}")
    print()
    for line in table(findings):
        print(line)
    print()
    print(verdict(findings, torch.__version__))
    return exit_code(findings)


@contextmanager
def _quiet() -> Iterator[None]:
    """What torch writes to standard error while the probes run (the warnings they provoke, the
    swallowed error's traceback, C++ output) is dropped: the table says what was seen."""
    sys.stderr.flush()
    kept = os.dup(2)
    dropped = os.open(os.devnull, os.O_WRONLY)
    os.dup2(dropped, 2)
    os.close(dropped)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(kept, 2)
        os.close(kept)
