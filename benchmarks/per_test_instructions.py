#!/usr/bin/env python3
"""The plugin's cost per watched test and its start-up one-off in instructions, per git revision.

    python benchmarks/per_test_instructions.py [--revisions 6d9973a,8e4dcbd,HEAD] [--root DIR]
                                               [--compiling]

Issue 39's method. Two suites of trivial tests that import torch at module level (``import
torch``, then ``def test_N(): assert N + 1``): "one" (1 test) and "many" (201 tests, 100 a
module), each with a ``conftest.py`` that calls ``gc.disable()``. Each suite runs under
callgrind (``--trace-children=no``; the total of all threads, callgrind's "Collected" line)
with ``--max-recompiles=0``, on two sides:

- **with**: the plugin, ``-p pytest_nocompile.plugin``;
- **without**: startup_instructions.py's inert side (``-p no:nocompile -p
  nocompile_markers_stand_in``), whose stand-in registers the markers and here also accepts
  ``--max-recompiles`` and ``--max-graph-breaks``, so both sides take the same options and
  pay pytest's entry-point scan for a ``-p`` name.

Then, in instructions, start-up one-off = with1 - without1, and per watched test =
((with201 - without201) - (with1 - without1)) / 200: the first test's share (torch's import
above all) cancels out. The plugin's cost per test module is in it too, spread over the 100
tests of a module (with the 201 tests in one module it read 27 k less at 6d9973a and 8e4dcbd).

Setting: ``PYTHONDONTWRITEBYTECODE=1`` (every run compiles the plugin and the test files from
source, with no ``__pycache__`` left in ROOT), ``PYTHONHASHSEED=0``, ``OMP_NUM_THREADS=1``,
``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``, and fixed folder names: the suites under ``ROOT/suites``
and every revision's package extracted (``git archive``, :func:`revisions.extract`) in turn
into the same folder, ``ROOT/plugin/pytest_nocompile``, first on ``PYTHONPATH`` (the installed
editable package is shadowed). Before a revision's counts a plain run with the import probe of
startup_instructions.py checks that the plugin imported is the extracted one, and that the
without side imports none. The counts compare within one run, not across machines.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from revisions import revision_list
from startup_instructions import (
    PACKAGE,
    SIDES,
    STAND_IN,
    TOTAL,
    environment,
    fresh_root,
    install_revision,
    probe,
    run,
)

DEFAULT_REVISIONS = "6d9973a,8e4dcbd,HEAD"
MARKER = ".per_test_instructions"  # a root this script made, which it may empty
BUDGET = ("--max-recompiles=0",)
OPTIONS = (  # the stand-in accepts the plugin's budget options too (and does nothing with them)
    "\n\n"
    "def pytest_addoption(parser):\n"
    "    for name in ('--max-recompiles', '--max-graph-breaks'):\n"
    "        parser.addoption(name, type=int, default=None, help='stand-in for pytest-nocompile')\n"
)
SUITES = {"one": 1, "many": 201}
TESTS_PER_MODULE = 100
CONFTEST = "import gc\n\ngc.disable()\n"
# --compiling: each test compiles a function and recompiles it once (backend="eager"), within
# --max-recompiles=1: what the plugin's cross-checks (issue 40) cost where they run. Fewer tests,
# as each pays a dynamo compile under callgrind.
COMPILING_SUITES = {"one": 1, "many": 21}
COMPILING_TEST = ("def test_{i}():\n"
                  "    f = torch.compile(lambda x, n: x * n, backend='eager')\n"
                  "    f(torch.ones(2), 2)\n"
                  "    f(torch.ones(2), 3)\n")
COMPILING_BUDGET = ("--max-recompiles=1",)
CALLGRIND = (
    "valgrind", "--tool=callgrind", "--trace-children=no", "--callgrind-out-file=/dev/null",
)


def write_suites(root: Path, suites: dict[str, int] = SUITES,
                 test: str = "def test_{i}():\n    assert {i} + 1\n") -> dict[str, Path]:
    """The two suites of trivial torch-importing tests (``test``, by its number ``i``), under
    ``root``, each with its conftest."""
    (root / "pytest.ini").write_text("[pytest]\n")
    folders = {}
    for name, tests in suites.items():
        folder = folders[name] = root / name
        folder.mkdir()
        (folder / "conftest.py").write_text(CONFTEST)
        for start in range(0, tests, TESTS_PER_MODULE):
            stop = min(start + TESTS_PER_MODULE, tests)
            tests_text = (test.format(i=i) for i in range(start, stop))
            module = folder / f"test_{start // TESTS_PER_MODULE:03d}.py"
            module.write_text("import torch  # noqa: F401\n\n\n" + "\n\n".join(tests_text))
    return folders


def count(args: tuple[str, ...], folder: Path, env: dict[str, str]) -> int:
    """Instructions of one pytest run under callgrind, all threads."""
    result = run((*CALLGRIND, sys.executable, "-m", "pytest"), args, folder, env)
    match = TOTAL.search(result.stderr)
    if match is None:
        sys.exit("aborted: no instruction count in valgrind's output")
    return int(match.group(1))


def install(revision: str, root: Path) -> str:
    """Extract ``revision``'s package into ``ROOT/plugin`` in place of the last; its short sha."""
    sha = install_revision(revision, root)
    for cache in root.rglob("__pycache__"):
        shutil.rmtree(cache)
    return sha


def sides(budget: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The with and without sides' arguments, both under ``budget``."""
    return (("with", (*SIDES["no budget"], *budget)), ("without", (*SIDES["without"], *budget)))


def check_imports(root: Path, folder: Path, env: dict[str, str],
                  budget: tuple[str, ...] = BUDGET) -> str:
    """A plain run of each side with the import probe: the plugin's file (exit if not ours)."""
    out = root / "probe.json"
    (_, with_args), (_, without_args) = sides(budget)
    found = probe(with_args, folder, env, out)["file"]
    plugin = root / "plugin" / PACKAGE
    if not found or not found.startswith(f"{plugin}/"):
        sys.exit(f"aborted: the with side imported {PACKAGE} from {found}, not {plugin}")
    without = probe(without_args, folder, env, out)["file"]
    if without:
        sys.exit(f"aborted: the without side imported {PACKAGE} from {without}")
    out.unlink()
    return str(found)


def measure(revision: str, root: Path, folders: dict[str, Path], env: dict[str, str],
            suites: dict[str, int] = SUITES, budget: tuple[str, ...] = BUDGET) -> list[str]:
    """Count the four runs of one revision (both sides under ``budget``); its table row."""
    sha = install(revision, root)
    label = revision if sha.startswith(revision) else f"{revision} ({sha})"
    print(f"=== {label}: {check_imports(root, folders['one'], env, budget)}", file=sys.stderr,
          flush=True)
    counts = {}
    for suite in suites:
        for side, args in sides(budget):
            counts[side, suite] = count(args, folders[suite], env)
            print(f"  {side:7} {suite:4} {counts[side, suite]:>16,}", file=sys.stderr, flush=True)
    one = counts["with", "one"] - counts["without", "one"]
    many = counts["with", "many"] - counts["without", "many"]
    extra = suites["many"] - suites["one"]
    figures = [counts[side, suite] for suite in suites for side in ("with", "without")]
    per_test = (many - one) / extra
    return [label, *(f"{n:,}" for n in figures), f"{one / 1e6:.1f}", f"{per_test / 1e3:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revisions", default=DEFAULT_REVISIONS,
                        help="comma-separated git revisions, in turn (default: %(default)s)")
    parser.add_argument("--root", default="/tmp/nocompile-per-test",
                        help="fixed folder of the suites and the plugin (default: %(default)s)")
    parser.add_argument("--compiling", action="store_true",
                        help="tests that each compile and recompile a function (1 and 21 of them)")
    args = parser.parse_args()
    revisions = revision_list(args.revisions)
    if not revisions:
        parser.error("--revisions: give one or more")
    root = Path(args.root)
    fresh_root(root, MARKER, STAND_IN + OPTIONS)
    (root / "suites").mkdir()
    suites, budget = ((COMPILING_SUITES, COMPILING_BUDGET) if args.compiling
                      else (SUITES, BUDGET))
    folders = (write_suites(root / "suites", suites, COMPILING_TEST) if args.compiling
               else write_suites(root / "suites"))
    # no PYTEST_NOCOMPILE_* variable of this shell (the installed .pth reads one at every start)
    env = {key: value for key, value in environment(root, "source").items()
           if not key.startswith("PYTEST_NOCOMPILE")}
    script = ("import sys, torch, pytest\n"
              "print(sys.version.split()[0], torch.__version__, pytest.__version__)")
    command = [sys.executable, "-c", script]
    versions = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    python, torch, pytest = versions.split()
    print(f"python {python}, torch {torch}, pytest {pytest}; callgrind, all threads, "
          f"gc off in the suites' conftest, PYTHONHASHSEED=0, OMP_NUM_THREADS=1, "
          f"PYTHONDONTWRITEBYTECODE=1, root {root}\n", flush=True)
    rows = [measure(revision, root, folders, env, suites, budget) for revision in revisions]
    many = suites["many"]
    header = ["revision", "with1", "without1", f"with{many}", f"without{many}",
              "start-up one-off (M)", "per test (k)"]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for row in rows:
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
