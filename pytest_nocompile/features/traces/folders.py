"""``--nocompile-trace-dir=DIR``: where each watched test's structured trace is written, and kept
only when the test failed (or, with ``--nocompile-compare``, fails against the baseline).

In each process that runs tests, the running test's trace goes to a
scratch folder of the run inside DIR, ``DIR/.nocompile-<random>/running/``
(torch makes it with the first trace file a process writes). A test that
failed keeps that folder: it is renamed to ``DIR/<node id as a file name>/``,
holding torch's own files (``dedicated_log_torch_trace_[rank_<N>_]<random>.log``,
one per process that compiled), and, where a ``tlparse`` executable is on
``PATH``, tlparse's pages for each beside it (``<file name without .log>/index.html``).
A passing test's files are removed and the folder is left for the next test:
making and removing a folder per test cost 3 ms on an ext4 file system here,
unlinking a file 17 µs. The scratch folder goes with the run. An xdist worker
keeps its own tests' traces; the controller does nothing.

With ``--nocompile-compare``, a test that passed but fails against the
baseline (judged when the run ends) keeps its trace too. Which test that is
is known from its result, made at its teardown report, after its teardown:
its files wait in the folder until then (no test runs in between), and the
result is compared with the test's baseline entry where it is made, so that
an xdist worker decides for its own tests as it does for failures. Waiting
for the run's end instead would keep every passing test's trace until then,
in each worker's scratch folder, which goes with the worker.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Optional

import pytest

from .structured_trace import StructuredTrace

if TYPE_CHECKING:
    from ...judge.result import TestResult
    from ...watching.watch import Watch

SCRATCH_PREFIX = ".nocompile-"
RUNNING = "running"  # the scratch folder's folder for the test now running
TRACE_SUFFIX = ".log"  # torch's trace files: dedicated_log_torch_trace_*.log
SECTION_TITLE = "nocompile trace"
NAME = "traces"  # the key of its state in each watch's feature_state: the test's TestTrace
TLPARSE = "tlparse"
TLPARSE_SECONDS = 60.0  # for all of one test's trace files together
_NAME_LIMIT = 120  # characters of a kept folder's name; a longer node id is cut and given a hash
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class TraceWarning(pytest.PytestWarning):
    """A failing test's structured trace could not be kept, or tlparse failed on it
    (``--nocompile-trace-dir``)."""


def folder_name(nodeid: str) -> str:
    """A test's kept folder's name: its node id with every run of other characters than letters,
    digits, ``.``, ``_`` and ``-`` made one ``_`` (``test_a.py::test_b[1-2]`` gives
    ``test_a.py_test_b_1-2``)."""
    name = _UNSAFE.sub("_", nodeid).strip("._") or "test"
    if len(name) > _NAME_LIMIT:
        name = f"{name[:_NAME_LIMIT - 11]}-{hashlib.sha1(nodeid.encode()).hexdigest()[:10]}"
    return name


def trace_files(folder: str) -> list[str]:
    """The trace files torch wrote in ``folder`` (none where it was never made)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(name for name in names if name.endswith(TRACE_SUFFIX))


def check_trace_dir(path: str) -> Optional[str]:
    """Why traces cannot be kept under ``path`` (made if missing), or None."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        return error.strerror or str(error)
    if not os.access(path, os.W_OK | os.X_OK):
        return f"folder {path} is not writable"
    return None


class TestTrace:
    """One watched test's structured trace: written to a folder of its own while it runs, kept if
    the test failed."""

    __slots__ = ("folders", "item", "process", "failed", "said", "kept", "waiting")
    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, folders: TraceFolders, item: pytest.Item, process: StructuredTrace) -> None:
        self.folders = folders
        self.item = item
        self.process = process  # where this process and those the test starts write it
        self.failed = False  # a report of the test failed (setup, or the call: over budget too)
        self.said = False  # a failing report said where the trace is kept
        self.kept: Optional[str] = None  # where it was kept, once the test ended
        self.waiting = False  # the test passed: kept if its result fails against the baseline

    def end(self, teardown_failed: bool) -> list[pytest.PytestWarning]:
        """After the teardown: the trace kept if the test failed in any phase, else removed (or,
        against a baseline, left for its result to decide); the problems met."""
        if not (self.failed or teardown_failed):
            if self.folders.regressed is not None:
                # still the unfinished one: a next test that comes first discards it
                self.waiting = True
                return []
            self.folders.unfinished = None
            self.folders.discard(self.process.folder)
            return []
        self.folders.unfinished = None
        self.kept, problems = self.folders.keep(self.process.folder, self.item.nodeid)
        return [TraceWarning(problem) for problem in problems]

    def report(self, report: pytest.TestReport,
               result: Optional[TestResult]) -> Optional[dict[str, str]]:
        """A report of the test: the first failing one says where the trace is kept; ``result`` (the
        teardown's) carries it (the field to set on it)."""
        if self.waiting and report.when == "teardown":
            self._keep_if_regressed(result)
        if report.failed:
            self.failed = True
            if not self.said:
                self.said = True
                line = (self.folders.failure_line(self.process.folder, self.item.nodeid)
                        if self.kept is None else f"trace: {self.kept}")
                if line is not None:
                    report.sections.append((SECTION_TITLE, line))
        if result is None or self.kept is None:
            return None
        report.user_properties.append(("nocompile_trace", self.kept))
        return {"trace": self.kept}

    def _keep_if_regressed(self, result: Optional[TestResult]) -> None:
        """The passing test's result is in: its trace kept where it fails against the baseline, else
        removed."""
        self.waiting = False
        self.folders.unfinished = None
        regressed = self.folders.regressed
        if result is None or regressed is None or not regressed(self.item.nodeid, result):
            self.folders.discard(self.process.folder)
            return
        self.kept, problems = self.folders.keep(self.process.folder, self.item.nodeid)
        for problem in problems:
            _warn_after_the_test(self.item, TraceWarning(problem))


class TraceFolders:
    """Per run, in each process that runs tests: a folder for each watched test's trace, kept when
    the test failed."""

    def __init__(self, root: str,
                 regressed: Optional[Callable[[str, TestResult], bool]] = None) -> None:
        self.root = root
        # with a baseline: whether a test's result fails against it (a passing test's trace is kept)
        self.regressed = regressed
        self._scratch: Optional[str] = None  # made with the first watched test
        # the trace of a test that has not ended (its folder is in use)
        self.unfinished: Optional[TestTrace] = None
        self._off = False  # the scratch folder could not be made: said once, then no test is traced
        self._kept: set[str] = set()  # names of the folders this process kept

    def begin(self, item: pytest.Item) -> Optional[TestTrace]:
        """A test's setup starts: its trace goes to the scratch folder's ``running`` (made by the
        first process that writes)."""
        if self._scratch is None:
            if self._off:
                return None
            import tempfile

            try:
                self._scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=self.root)
            except OSError as error:  # DIR removed or made unwritable during the run
                self._off = True
                item.warn(TraceWarning("--nocompile-trace-dir: no structured trace is kept from "
                                       f"{item.nodeid} on: {error}"))
                return None
        folder = f"{self._scratch}/{RUNNING}"
        # an earlier attempt that never reached its teardown: its files are not this test's
        if self.unfinished is not None:
            self.discard(folder)
        trace = self.unfinished = TestTrace(self, item, StructuredTrace(folder))
        trace.process.start()
        return trace

    # The hooks (registered as a plugin of the run only where traces are kept).

    @pytest.hookimpl
    def pytest_nocompile_watch_opened(self, watch: Watch) -> None:
        assert watch.item is not None  # an open watch has its test
        watch.feature_state[NAME] = self.begin(watch.item)

    @pytest.hookimpl
    def pytest_nocompile_record_attached(self, watch: Watch) -> None:
        trace = watch.feature_state.get(NAME)
        if trace is not None:
            trace.process.attach()

    @pytest.hookimpl
    def pytest_nocompile_watch_closed(self, watch: Watch) -> None:
        trace = watch.feature_state.get(NAME)
        # this process's trace handler off, and the variable children read as it was
        if trace is not None:
            trace.process.stop()

    @pytest.hookimpl
    def pytest_nocompile_test_ended(self, watch: Watch,
                                    failed: bool) -> Optional[list[pytest.PytestWarning]]:
        trace = watch.feature_state.get(NAME)
        # kept if the test failed, else removed
        return trace.end(failed) if trace is not None else None

    @pytest.hookimpl
    def pytest_nocompile_test_reported(self, watch: Watch, report: pytest.TestReport,
                                       result: Optional[TestResult]) -> Optional[dict[str, str]]:
        trace = watch.feature_state.get(NAME)
        # a failure says where the trace is kept
        return trace.report(report, result) if trace is not None else None

    def destination(self, nodeid: str) -> str:
        return os.path.join(self.root, folder_name(nodeid))

    def failure_line(self, folder: str, nodeid: str) -> Optional[str]:
        """The line a failing test's report shows: where its trace will be kept (None: nothing
        traced so far)."""
        written = trace_files(folder)
        if not written:
            return None
        kept = self.destination(nodeid)
        line = f"trace: {kept}"
        if self.tlparse is not None:
            where = (os.path.join(kept, written[0][:-len(TRACE_SUFFIX)], "index.html")
                     if len(written) == 1 else f"{kept}/*/index.html, one per trace file")
            line += f" (tlparse: {where})"
        return line

    def keep(self, folder: str, nodeid: str) -> tuple[Optional[str], list[str]]:
        """A failed test's trace, moved to its folder under the root: (that folder, or None when no
        process wrote a trace; the problems met, each a sentence)."""
        written = trace_files(folder)
        if not written:
            self.discard(folder)
            return None, []
        kept = self.destination(nodeid)
        # another test of this run whose node id gives the same name
        if os.path.basename(kept) in self._kept:
            kept = f"{kept}-{hashlib.sha1(nodeid.encode()).hexdigest()[:10]}"
        try:
            if os.path.lexists(kept):  # an earlier run's trace of the same test
                self._remove(kept)
            os.rename(folder, kept)
        except OSError as error:
            return None, [f"could not keep the structured trace of {nodeid} in {kept}: {error}"]
        self._kept.add(os.path.basename(kept))
        return kept, self._parse(kept, written)

    def discard(self, folder: str) -> None:
        """A passing test's trace: its files removed, the folder left for the next test (nothing to
        do where no process wrote)."""
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            path = os.path.join(folder, name)
            try:
                os.unlink(path)
            except OSError:  # a folder, or what unlink refused: removed whole, bounded
                self._remove(path)

    def pytest_unconfigure(self) -> None:
        """The run ended: remove the scratch folder, with whatever a process still running wrote
        late."""
        if self._scratch is not None:
            self._remove(self._scratch)
            self._scratch = None

    @cached_property
    def tlparse(self) -> Optional[str]:
        """The executable's path, None where there is none; looked up once."""
        import shutil

        return shutil.which(TLPARSE)

    def _parse(self, kept: str, written: list[str]) -> list[str]:
        """tlparse's pages for each trace file, beside it; the problems, each a sentence."""
        executable = self.tlparse
        if executable is None:
            return []
        import subprocess

        problems = []
        deadline = time.monotonic() + TLPARSE_SECONDS
        for name in written:
            out = os.path.join(kept, name[:-len(TRACE_SUFFIX)])
            command = [executable, os.path.join(kept, name), "-o", out, "--overwrite",
                       "--no-browser"]
            try:
                done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                      text=True, errors="replace",
                                      timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                problems.append(f"tlparse did not end within {TLPARSE_SECONDS:g} s on "
                                f"{out}{TRACE_SUFFIX}")
                break
            except OSError as error:
                problems.append(f"tlparse could not be run on {out}{TRACE_SUFFIX}: {error}")
                break
            if done.returncode != 0:
                said = ((done.stderr.strip() or done.stdout.strip()).splitlines()[-1:]
                        or ["no output"])
                problems.append(f"tlparse failed on {out}{TRACE_SUFFIX} (exit code "
                                f"{done.returncode}): {said[0]}")
        return problems

    @staticmethod
    def _remove(path: str) -> None:
        from ..child_events.tree_removal import Budget, remove_tree

        remove_tree(path, Budget(5.0, 1_000_000))


def _warn_after_the_test(item: pytest.Item, warning: pytest.PytestWarning) -> None:
    """``warning`` in the run's warnings summary, for ``item``, as ``item.warn`` says it; in a
    report hook, where a warning raised as an error (``-W error``) would end the run, not fail the
    test, which has passed by then."""
    import warnings

    path, line, _ = item.location
    message = warnings.WarningMessage(warning, type(warning), path, (line or 0) + 1)
    item.ihook.pytest_warning_recorded.call_historic(kwargs={"warning_message": message,
                                                            "nodeid": item.nodeid,
                                                            "when": "runtest",
                                                            "location": None})
