#!/usr/bin/env python3
"""Run this project's tests and examples against several torch versions, one fresh venv each.

    python scripts/torch_matrix.py [--versions 2.6,2.13] [--keep-going] [--out FILE]
                                   [--tests PATH,PATH] [--skip-examples] [--baseline FILE]

For each torch version (default: every minor release 2.4 .. 2.15) this script

1. creates a fresh virtual environment under /tmp (``python -m venv``),
2. installs that torch (``torch==X.Y.*``, the newest patch release pip offers,
   or exactly ``X.Y.Z`` when a full version is given), then this project in
   editable mode with its ``test`` extra, with torch pinned by a constraints
   file so pip cannot change it (the project's own ``torch>=`` floor is left
   out where the pinned torch is older, so that old torch can be tried at all),
3. runs (a) the test suite, ``python -m pytest -p nocompile -n 2 -q -p
   no:randomly tests`` (``--tests``: those files or folders instead), and
   (b) the examples, ``python -m pytest -p nocompile -q -p no:randomly
   examples`` (not with ``--skip-examples``), from the repository root,
4. reads pytest's final summary line of each (passed, failed, errors, skipped,
   xfailed, ...), and
5. deletes the venv, also when a step failed.

With ``--baseline FILE`` every version's suite run gets
``NOCOMPILE_MATRIX_BASELINE=FILE``: tests/test_reason_baselines.py then saves
that torch's entries into the one file and compares with them, keeping the
entries the versions before it wrote (one baseline, several torch versions).

One version at a time: each CUDA wheel is several GB, so pip runs with
``--no-cache-dir`` and the venv is gone before the next version starts. At
the end it prints a Markdown table (torch as installed, e.g. ``2.6.0+cu124``,
the suite's counts, the examples' counts, the date), and with ``--out`` also
writes it to a file. Without ``--keep-going`` it stops at the first version
that could not be installed or whose run gave no summary line; failing tests
are results, not errors, and never stop it. Standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VERSIONS = tuple(f"2.{minor}" for minor in range(4, 16))
# then the tests to run: "tests" unless --tests
SUITE = ("-m", "pytest", "-p", "nocompile", "-n", "2", "-q", "-p", "no:randomly")
EXAMPLES = ("-m", "pytest", "-p", "nocompile", "-q", "-p", "no:randomly", "examples")
# The words of pytest's summary line, in the order the table shows them.
OUTCOMES = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")
_SUMMARY_PART = re.compile(
    r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)\b")
_SUMMARY_LINE = re.compile(
    r"\b(?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|no tests ran)\b.* in [\d.]+s")


class MatrixError(RuntimeError):
    """A step for one version failed before any test could run (install, import)."""


@dataclass
class RunCounts:
    """pytest's outcome counts for one run, read from its final summary line."""

    counts: dict[str, int] = field(default_factory=dict)
    summary: str | None = None  # the summary line itself; None when pytest printed none
    returncode: int | None = None

    def cell(self) -> str:
        if self.summary is None:
            return f"no summary (exit {self.returncode})"
        shown = [f"{self.counts[name]} {name}" for name in OUTCOMES if self.counts.get(name)]
        return ", ".join(shown) or self.summary


@dataclass
class VersionResult:
    requested: str
    installed: str | None = None
    suite: RunCounts | None = None
    examples: RunCounts | None = None
    error: str | None = None
    date: str = field(default_factory=lambda: datetime.date.today().isoformat())


def parse_summary(output: str) -> RunCounts:
    """The counts in the last pytest summary line of ``output`` (e.g.
    ``3 passed, 1 skipped in 2.1s``)."""
    for line in reversed(output.splitlines()):
        text = line.strip().strip("=").strip()
        if not _SUMMARY_LINE.search(text):
            continue
        counts: dict[str, int] = {}
        for number, word in _SUMMARY_PART.findall(text):
            key = {"error": "errors", "warning": "warnings"}.get(word, word)
            counts[key] = counts.get(key, 0) + int(number)
        return RunCounts(counts, text)
    return RunCounts()


def torch_requirement(version: str) -> str:
    """``2.6`` -> ``torch==2.6.*`` (newest patch); ``2.6.0`` or ``2.6.0+cpu`` -> exactly that."""
    if re.fullmatch(r"\d+\.\d+", version):
        return f"torch=={version}.*"
    if re.fullmatch(r"\d+\.\d+\.\d+(?:\+\w+)?", version):
        return f"torch=={version}"
    raise argparse.ArgumentTypeError(f"not a torch version: {version!r} (want X.Y or X.Y.Z)")


def _toml_string_list(text: str, key: str) -> list[str]:
    match = re.search(rf"^{re.escape(key)}\s*=\s*\[(.*?)\]", text, re.MULTILINE | re.DOTALL)
    body = re.sub(r"#.*", "", match[1]) if match else ""
    return re.findall(r'"([^"]+)"', body)


def project_requirements(pyproject: Path, extra: str) -> list[str]:
    """This project's dependencies and one extra's, torch left out, read from pyproject.toml."""
    text = pyproject.read_text()
    if sys.version_info >= (3, 11):
        import tomllib

        project = tomllib.loads(text)["project"]
        requirements = (list(project.get("dependencies", []))
                        + list(project.get("optional-dependencies", {}).get(extra, [])))
    else:  # Python 3.10 has no tomllib: a plain reading of the two lists
        requirements = _toml_string_list(text, "dependencies") + _toml_string_list(text, extra)
    return [r for r in requirements
            if re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() != "torch"]


def run(command: list[str], log: Path, env: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``command`` from the repository root, its output appended to ``log``."""
    with log.open("a") as stream:
        stream.write(f"\n$ {' '.join(command)}\n")
        stream.flush()
        result = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        stream.write(result.stdout)
    if check and result.returncode != 0:
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines or ["(no output)"]
        shown = " ".join(Path(part).name if part.startswith("/") else part for part in command)
        raise MatrixError(f"`{shown}` exited {result.returncode}: {errors[-1]}")
    return result


def clean_env(venv: Path) -> dict[str, str]:
    """The environment for the test runs: the venv first on PATH, no leftover torch logging or
    plugins."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("TORCH_LOGS", "TORCH_COMPILE_DEBUG", "PYTEST_ADDOPTS", "PYTHONPATH",
                          "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def run_version(version: str, log: Path, python: str, tests: tuple[str, ...] = ("tests",),
                examples: bool = True, baseline: Path | None = None) -> VersionResult:
    """Install torch ``version`` and this project into a fresh venv, run both pytest runs, delete
    the venv."""
    result = VersionResult(version)
    venv = Path(tempfile.mkdtemp(prefix=f"torch-matrix-{version}-", dir="/tmp"))
    try:
        run([python, "-m", "venv", "--clear", str(venv)], log)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check",
               "--no-cache-dir"]
        run([*pip, "install", "-q", torch_requirement(version)], log)
        vpython = str(venv / "bin" / "python")
        # A marked line: old torch warns on stderr (no numpy yet), which this output holds too.
        printed = run([vpython, "-c", "import torch; print('torch-version:', torch.__version__)"],
                      log).stdout
        result.installed = next((line.split()[-1] for line in printed.splitlines()
                                 if line.startswith("torch-version: ")), "?")
        constraints = venv / "torch-constraint.txt"
        constraints.write_text(f"torch=={result.installed}\n")
        # The project without its dependencies (its torch floor may be above the torch tried),
        # then its other dependencies and test extra, torch held where it is by the constraint.
        run([*pip, "install", "-q", "--no-deps", "-e", "."], log)
        run([*pip, "install", "-q", "-c", str(constraints),
             *project_requirements(ROOT / "pyproject.toml", "test")], log)
        env = clean_env(venv)
        if baseline is not None:
            env["NOCOMPILE_MATRIX_BASELINE"] = str(baseline.resolve())
        for name, arguments in (("suite", (*SUITE, *tests)),
                                ("examples", EXAMPLES))[: 2 if examples else 1]:
            completed = run([vpython, *arguments], log, env=env, check=False)
            counts = parse_summary(completed.stdout)
            counts.returncode = completed.returncode
            setattr(result, name, counts)
    except MatrixError as error:
        result.error = str(error)
    finally:
        shutil.rmtree(venv, ignore_errors=True)
    return result


def markdown_table(results: list[VersionResult], tests: tuple[str, ...] = ("tests",)) -> str:
    suite = ("test suite" if tests == ("tests",)
             else f"tests ({', '.join(path.removeprefix('tests/') for path in tests)})")
    rows = [f"| torch | {suite} | examples | date |", "| --- | --- | --- | --- |"]
    for r in results:
        torch = r.installed or f"{r.requested} (not installed)"
        if r.error and r.suite is None:
            first = r.error.splitlines()[0].replace("|", "\\|")
            rows.append(f"| {torch} | error: {first} | | {r.date} |")
            continue
        suite = r.suite.cell() if r.suite else ""
        examples = r.examples.cell() if r.examples else ""
        rows.append(f"| {torch} | {suite} | {examples} | {r.date} |")
    return "\n".join(rows) + "\n"


def usable(result: VersionResult, examples: bool = True) -> bool:
    runs = (result.suite, result.examples) if examples else (result.suite,)
    return result.error is None and all(counts is not None and counts.summary is not None
                                        for counts in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--versions", default=",".join(DEFAULT_VERSIONS),
                        help="comma-separated torch versions, X.Y or X.Y.Z (default: 2.4 .. 2.15)")
    parser.add_argument("--keep-going", action="store_true",
                        help="go on to the next version after one that could not be "
                             "installed or run")
    parser.add_argument("--out", type=Path, help="also write the Markdown table to this file")
    parser.add_argument("--log", type=Path,
                        help="where pip's and pytest's output goes (default: a file under /tmp)")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python that creates each venv (default: this one)")
    parser.add_argument("--tests", default="tests",
                        help="comma-separated test files or folders for the suite run "
                             "(default: tests)")
    parser.add_argument("--skip-examples", action="store_true",
                        help="run no examples (a sweep of a few test files)")
    parser.add_argument("--baseline", type=Path,
                        help="one baseline file that every version saves its entries into and "
                             "compares with (tests/test_reason_baselines.py)")
    arguments = parser.parse_args(argv)
    tests = tuple(path.strip() for path in arguments.tests.split(",") if path.strip())
    examples = not arguments.skip_examples
    versions = [v.strip() for v in arguments.versions.split(",") if v.strip()]
    for version in versions:
        try:
            torch_requirement(version)
        except argparse.ArgumentTypeError as error:
            parser.error(str(error))
    log: Path = arguments.log or Path(tempfile.mkstemp(prefix="torch-matrix-", suffix=".log",
                                                       dir="/tmp")[1])
    print(f"logging pip and pytest output to {log}", file=sys.stderr)

    results: list[VersionResult] = []
    for version in versions:
        print(f"torch {version}: installing and testing ...", file=sys.stderr, flush=True)
        result = run_version(version, log, arguments.python, tests, examples, arguments.baseline)
        results.append(result)
        for name in ("suite", "examples"):
            counts: RunCounts | None = getattr(result, name)
            if counts is not None:
                print(f"torch {result.installed}: {name}: {counts.summary or counts.cell()}",
                      file=sys.stderr, flush=True)
        if result.error:
            print(f"torch {version}: {result.error}", file=sys.stderr, flush=True)
        if not usable(result, examples) and not arguments.keep_going:
            print(f"stopping after torch {version} (use --keep-going to go on)", file=sys.stderr)
            break

    table = markdown_table(results, tests)
    print(table, end="")
    if arguments.out:
        arguments.out.write_text(table)
    return 0 if all(usable(r, examples) for r in results) and len(results) == len(versions) else 1


if __name__ == "__main__":
    sys.exit(main())
