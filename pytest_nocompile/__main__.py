"""``python -m pytest_nocompile COMMAND ...``: the commands of the islands that are commands
(:data:`.features.COMMANDS`, each with ``add_to(subparsers)`` and ``run(arguments)`` in its
``command`` module), such as ``merge OUT IN [IN ...]``, which merges shard baselines or reports
into one file."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Optional, Sequence

from .features import COMMANDS


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; the exit code: the command's (merge: 0 merged, 1 the inputs could not
    be merged), 2 a usage error."""
    parser = argparse.ArgumentParser(prog="python -m pytest_nocompile",
                                     description="pytest-nocompile's tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    runs: dict[str, Callable[[argparse.Namespace], int]] = {}
    for name in COMMANDS:
        command = importlib.import_module(f"{__package__}.features.{name}.command")
        command.add_to(commands)
        runs[name] = command.run
    arguments = parser.parse_args(argv)
    return runs[arguments.command](arguments)


if __name__ == "__main__":
    sys.exit(main())
