"""``python -m pytest_nocompile merge OUT IN [IN ...]``: merge shard baselines or
reports into one file."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; the exit code: 0 merged, 1 the inputs could not be
    merged, 2 a usage error."""
    parser = argparse.ArgumentParser(prog="python -m pytest_nocompile",
                                     description="pytest-nocompile's tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser("merge", help="merge the baselines (--nocompile-save) or JSON "
                                              "reports (--nocompile-json) of shards into one",
                                description="Merge the baselines (--nocompile-save) or JSON "
                                "reports (--nocompile-json) that shards of one suite wrote "
                                "into one file. Shards that both ran a test must agree on its "
                                "counts and reasons.")
    merge.add_argument("out", metavar="OUT",
                       help="the merged file to write (it may be one of the inputs)")
    merge.add_argument("inputs", metavar="IN", nargs="+", help="a shard's baseline or report")
    arguments = parser.parse_args(argv)
    from .features.merge.merge import MergeError, write_merged

    try:
        print(write_merged(arguments.out, arguments.inputs))
    except MergeError as error:
        print(f"pytest-nocompile merge: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"pytest-nocompile merge: cannot write {arguments.out}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
