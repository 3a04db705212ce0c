"""The ``merge`` command of ``python -m pytest_nocompile``: its arguments, and running it."""

from __future__ import annotations

import argparse
import sys


def add_to(commands: argparse._SubParsersAction) -> None:
    """The command's parser, among ``python -m pytest_nocompile``'s."""
    merge = commands.add_parser("merge", help="merge the baselines (--nocompile-save) or JSON "
                                              "reports (--nocompile-json) of shards into one",
                                description="Merge the baselines (--nocompile-save) or JSON "
                                "reports (--nocompile-json) that shards of one suite wrote "
                                "into one file. Shards that both ran a test must agree on its "
                                "counts and reasons.")
    merge.add_argument("out", metavar="OUT",
                       help="the merged file to write (it may be one of the inputs)")
    merge.add_argument("inputs", metavar="IN", nargs="+", help="a shard's baseline or report")


def run(arguments: argparse.Namespace) -> int:
    """Merge; the exit code: 0 merged, 1 the inputs could not be merged."""
    from .merge import MergeError, write_merged

    try:
        print(write_merged(arguments.out, arguments.inputs))
    except MergeError as error:
        print(f"pytest-nocompile merge: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"pytest-nocompile merge: cannot write {arguments.out}: {error}", file=sys.stderr)
        return 1
    return 0
