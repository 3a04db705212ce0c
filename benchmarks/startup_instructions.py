#!/usr/bin/env python3
"""The plugin's start-up one-off and per-test cost in instructions, and the modules it imports, per
git revision.

    python benchmarks/startup_instructions.py [--revisions 6d9973a,HEAD] [--modes source,cached]
        [--tests 1000]

Issue 34's figures: "a run with one budgeted trivial test imports 44 of the 74 modules (41 with no
budget at all) and spends about 393 M instructions more than pytest alone", and about 195 k
instructions per watched test. ``overhead.py --part instructions`` gives the one-off of a run with
*no* test, and only for the installed version; this script counts, under callgrind, for each
revision:

- **one test**: one trivial test, with the plugin and ``--max-recompiles=0`` (budgeted), with the
  plugin and no option (no budget), and with overhead.py's inert stand-in (``-p no:nocompile -p
  nocompile_markers_stand_in``: both sides pay pytest's entry-point scan for a ``-p`` name);
- **empty**: no test at all, with and without the plugin (suite "empty" of overhead.py);
- **suite a**: ``--tests`` trivial tests (100 a module) with and without, budgeted; per watched test
  is ``(a - one test) / (tests - 1)``, and overhead.py's ``(a - empty) / tests`` beside it (which
  charges the first test's imports to every test).

Deterministic setting: ``PYTHONHASHSEED=0``, ``OMP_NUM_THREADS=1``, the cyclic garbage collector off
(pytest run through ``runpy`` after ``gc.disable()``), autoloading off, and fixed folder names:
every revision is extracted (``git archive``, as :mod:`revisions` does) into the same folder,
``ROOT/plugin/pytest_nocompile``, first on ``PYTHONPATH``, and measured before the next one.

``--modes``: ``source`` sets ``PYTHONDONTWRITEBYTECODE=1`` with no ``__pycache__`` in the plugin's
or the suites' folders, so every run compiles the plugin's modules (and the test files) from source,
as a process does where bytecode is never written (some CI images; this development machine's
shell); that is the setting of issue 34's 393 M (at 6d9973a: 387 M with the collector off, 392 M
with it on), and most of it is compiling. ``overhead.py`` reads cached bytecode: its "per test (k)"
column of suite a is ``(a - empty) / tests`` (190 k at 6d9973a, one location) and its one-off 74 M.
``cached`` writes the bytecode first (one plain run of every command) and reads it, as an installed
package does. The modules each run imports come from a plain run (no callgrind) with a probe plugin
that records, for every ``pytest_nocompile`` module, which module imported it first and whether at
module level or inside a function; nothing about the package's layout is assumed, so revisions with
modules moved into subpackages compare as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

from revisions import ROOT, extract, revision_list

PACKAGE = "pytest_nocompile"
PYTEST = ("-q", "-p", "no:cacheprovider")
WITHOUT_GC = ("-c",
              "import gc, runpy; gc.disable(); runpy.run_module('pytest', run_name='__main__', "
              "alter_sys=True)")
# overhead.py's sides: the inert stand-in, the plugin budgeted (suite a's option), the plugin asked
# nothing
SIDES = {
    "without": ("-p", "no:nocompile", "-p", "nocompile_markers_stand_in"),
    "budget": ("-p", f"{PACKAGE}.plugin", "--max-recompiles=0"),
    "no budget": ("-p", f"{PACKAGE}.plugin"),
}
STAND_IN = (
    "def pytest_configure(config):\n"
    "    for name in ('max_recompiles', 'max_graph_breaks'):\n"
    "        config.addinivalue_line('markers', name + '(N): stand-in for pytest-nocompile')\n"
)
# -p nocompile_import_probe, loaded before the plugin: who first imported each module of the
# package.
PROBE = '''
import json, os, sys

PACKAGE = "pytest_nocompile"
importers = {}


class Recorder:
    def find_spec(self, name, path=None, target=None):
        if (name == PACKAGE or name.startswith(PACKAGE + ".")) and name not in importers:
            frame = sys._getframe(1)
            while frame and ("importlib" in frame.f_code.co_filename
                             or frame.f_globals.get("__name__") == __name__):
                frame = frame.f_back
            importers[name] = ([frame.f_globals.get("__name__", "?"), frame.f_code.co_name,
                                frame.f_lineno] if frame else None)
        return None


sys.meta_path.insert(0, Recorder())


def pytest_unconfigure(config):
    package = sys.modules.get(PACKAGE)
    with open(os.environ["NOCOMPILE_PROBE_OUT"], "w") as out:
        json.dump({"file": getattr(package, "__file__", None), "modules": sorted(sys.modules),
                   "importers": {name: importers.get(name) for name in sys.modules
                                 if name.split(".")[0] == PACKAGE}}, out)
'''
TOTAL = re.compile(r"Collected : (\d+)")
MARKER = ".startup_instructions"  # a root this script made, which it may empty


def write_suites(root: Path, tests: int) -> dict[str, Path]:
    (root / "pytest.ini").write_text("[pytest]\n")
    folders = {name: root / name for name in ("empty", "one", "a")}
    for folder in folders.values():
        folder.mkdir()
    (folders["one"] / "test_000.py").write_text("def test_0():\n    assert 0 + 1\n")
    for start in range(0, tests, 100):
        body = "\n\n".join(f"def test_{index}():\n    assert {index} + 1\n"
                           for index in range(start, min(start + 100, tests)))
        (folders["a"] / f"test_{start // 100:03d}.py").write_text(body)
    return folders


def environment(root: Path, mode: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTEST_ADDOPTS", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join((str(root / "plugin"), str(root / "plugins"))))
    if mode == "source":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(prefix: tuple[str, ...], args: tuple[str, ...], folder: Path,
        env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [*prefix, *PYTEST, *args, "--rootdir", str(folder), str(folder)]
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if result.returncode not in (0, 5):  # 5: no tests collected (the empty suite)
        sys.exit(f"aborted: {' '.join(command)} exited {result.returncode}\n"
                 f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result


def count(args: tuple[str, ...], folder: Path, env: dict[str, str]) -> int:
    prefix = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
              *WITHOUT_GC)
    match = TOTAL.search(run(prefix, args, folder, env).stderr)
    if match is None:
        sys.exit("aborted: no instruction count in valgrind's output")
    return int(match.group(1))


def probe(args: tuple[str, ...], folder: Path, env: dict[str, str], out: Path) -> dict[str, Any]:
    run((sys.executable, "-m", "pytest"), ("-p", "nocompile_import_probe", *args), folder,
        dict(env, NOCOMPILE_PROBE_OUT=str(out)))
    return json.loads(out.read_text())


def package_modules(folder: Path) -> list[str]:
    names = []
    for path in folder.rglob("*.py"):
        parts = path.relative_to(folder.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def importer_text(name: str, importers: dict[str, Optional[list[Any]]]) -> str:
    """``name <- importer (module level, line 3)``: who imported it first; follow the importers for
    a chain."""
    importer = importers.get(name)
    if not importer:
        return name
    module, function, line = importer
    return (f"{name} <- {module} "
            f"({'module level' if function == '<module>' else f'in {function}()'}, line {line})")


def install_revision(revision: str, root: Path) -> str:
    """Extract ``revision``'s package into ``ROOT/plugin`` in place of the last (the same folder
    for every revision: fixed folder names); its short sha."""
    plugin = root / "plugin"
    shutil.rmtree(plugin, ignore_errors=True)
    plugin.mkdir()
    (root / "extract").mkdir()
    extracted = extract(revision, root / "extract")
    shutil.move(str(extracted / PACKAGE), str(plugin / PACKAGE))
    shutil.rmtree(root / "extract")
    return subprocess.run(["git", "rev-parse", "--short", revision], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def measure_revision(revision: str, root: Path, folders: dict[str, Path], modes: list[str],
                     tests: int, per_test: bool) -> None:
    sha = install_revision(revision, root)
    plugin = root / "plugin"
    print(f"\n=== {revision} ({sha})", flush=True)
    for mode in modes:
        env = environment(root, mode)
        for cache in root.rglob("__pycache__"):
            shutil.rmtree(cache)
        jobs = [("one", side) for side in SIDES] + [("empty", "without"), ("empty", "budget")]
        if per_test:
            jobs += [("a", "without"), ("a", "budget")]
        if mode == "cached":
            # untimed: writes the plugin's, the stand-ins' and the rewritten tests' bytecode
            for folder, side in jobs:
                run((sys.executable, "-m", "pytest"), SIDES[side], folders[folder], env)
        counts = {}
        for folder, side in jobs:
            counts[folder, side] = count(SIDES[side], folders[folder], env)
            print(f"  {mode:6} {folder:5} {side:9} {counts[folder, side]:>14,}", flush=True)
        one = counts["one", "budget"] - counts["one", "without"]
        print(f"  {mode}: start-up one-off, one budgeted test: {one / 1e6:.1f} M; one "
              "test, no budget: "
              f"{(counts['one', 'no budget'] - counts['one', 'without']) / 1e6:.1f} M; no test: "
              f"{(counts['empty', 'budget'] - counts['empty', 'without']) / 1e6:.1f} M")
        if per_test:
            a = counts["a", "budget"] - counts["a", "without"]
            empty = counts["empty", "budget"] - counts["empty", "without"]
            print(f"  {mode}: per watched test: {(a - one) / (tests - 1) / 1e3:.1f} k ((a - one "
                  f"test) / {tests - 1}); {(a - empty) / tests / 1e3:.1f} k ((a - empty) / "
                  f"{tests}, overhead.py's); suite a {a / 1e6:.1f} M over "
                  f"{counts['a', 'without'] / 1e6:.1f} M", flush=True)
    env = environment(root, modes[-1])
    runs = {side: probe(SIDES[side], folders["one"], env, root / "probe.json") for side in SIDES}
    found = runs["budget"]["file"]
    if not found or not found.startswith(str(plugin)):
        sys.exit(f"aborted: the runs imported {PACKAGE} from {found}, not {plugin}")
    everything = package_modules(plugin / PACKAGE)
    inert = set(runs["without"]["modules"])
    listed: set[str] = set()
    for side in ("budget", "no budget"):
        ours = [name for name in runs[side]["modules"] if name.split(".")[0] == PACKAGE]
        others = [name for name in runs[side]["modules"] if name not in inert
                  and name.split(".")[0] != PACKAGE]
        print(f"  one test, {side}: imports {len(ours)} of the {len(everything)} modules; not: "
              f"{', '.join(name for name in runs['budget']['modules'] if name.startswith(PACKAGE) and name not in ours) or '-'}; "  # noqa: E501
              f"others beyond the inert run's: {', '.join(others) or 'none'}")
        for name in ours:
            if name not in listed:
                print(f"    {importer_text(name, runs[side]['importers'])}")
                listed.add(name)
    print("  never imported in either run: "
          f"{', '.join(name for name in everything if name not in listed)}")



def fresh_root(root: Path, marker: str, stand_in: str) -> None:
    """``root`` made anew, with the inert stand-in (``stand_in``) and the import probe in its
    ``plugins`` folder; only a root that a run of the same script made (it holds ``marker``) is
    emptied first. Exits where valgrind is missing."""
    if not shutil.which("valgrind"):
        sys.exit("valgrind not found (Debian: apt-get install valgrind)")
    if root.exists():
        if not (root / marker).exists():
            sys.exit(f"{root} exists and is not this script's; give another --root")
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / marker).touch()
    (root / "plugins").mkdir()
    (root / "plugins" / "nocompile_markers_stand_in.py").write_text(stand_in)
    (root / "plugins" / "nocompile_import_probe.py").write_text(PROBE)

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revisions", default="HEAD",
                        help="comma-separated git revisions, measured in turn (default: HEAD)")
    parser.add_argument("--modes", default="source,cached",
                        help="bytecode: source (compiled every run), cached, or both (default)")
    parser.add_argument("--tests", type=int, default=1000,
                        help="suite a's trivial tests (default 1000)")
    parser.add_argument("--no-per-test", action="store_true",
                        help="skip suite a (its two counts are most of the time)")
    parser.add_argument("--root", default="/tmp/nocompile-startup",
                        help="fixed folder for the suites and the extracted plugin")
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if not modes or set(modes) - {"source", "cached"}:
        parser.error("--modes: source, cached or both")
    if args.tests < 2:
        parser.error("--tests: give 2 or more")
    root = Path(args.root)
    fresh_root(root, MARKER, STAND_IN)
    (root / "suites").mkdir()
    folders = write_suites(root / "suites", args.tests)
    versions = subprocess.run([sys.executable, "-c",
                               "import sys, torch, pytest; print(sys.version.split()[0], "
                               "torch.__version__, pytest.__version__)"],
                              capture_output=True, text=True, check=True).stdout.split()
    print(f"python {versions[0]}, torch {versions[1]}, pytest {versions[2]}; callgrind, gc off, "
          f"PYTHONHASHSEED=0, OMP_NUM_THREADS=1, root {root}; instructions with the plugin minus "
          "the inert stand-in's")
    for revision in revision_list(args.revisions):
        measure_revision(revision, root, folders, modes, args.tests, not args.no_per_test)


if __name__ == "__main__":
    main()
