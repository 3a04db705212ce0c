"""A watched test's child processes, seen from the test's process: where they
report, and for how long.

Each phase of a watched test has a folder of its own under the run's folder
(:mod:`.run_folders`: ``<tempdir>/pytest-nocompile-of-<user>/run-<pid>-<random>/``),
``<n>/setup``, ``<n>/call`` and ``<n>/teardown``, named in
:data:`~..child_startup.event_writer.ENV_VAR` while that phase runs. A process inherits the
variable when it starts, so the folder it reports to says which phase
started it: only processes started in the test's call count against the
test. Beside it, the variable of each kind a child reads only where told
(``BudgetKind.children_told_by``: syncs' ``PYTEST_NOCOMPILE_SYNCS``) tells them whether the
run reads it: only then do they turn torch's sync debug mode on. A process
started in setup or teardown (a fixture's server) is reported in that phase, "not
counted", whenever it compiles. Afterwards the variable is as the test found it
and the test's folders are gone; the run's folder goes when the run ends. A
process started outside any watched test never has the variable, so nothing it
does counts against a later test.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Optional

import pytest

from ...observe import wanted_signals
from ...vocabulary.kinds import KINDS, BudgetKind, told_to_children
from ...vocabulary.measures import plural
from ..child_startup.hook import ENV_VAR

if TYPE_CHECKING:
    from ...record.record import RecompileRecord
    from ...vocabulary.events import Phase
    from ..child_events.child_lines import Reading
    from ..child_events.event_files import EventDirectory
    from .run_folders import RunFolder

# The event files' reader (..child_events.event_files) loads when a test's process first wrote,
# or its folder is unusable.

class TestReports:
    """One watched test's reports: ``<n>/`` with a folder per phase, each process's lines tagged
    with the phase that started it.

    One folder for the test, made by the first process that writes: a read
    of a test whose processes wrote nothing (nearly every test) is one look,
    and the test's first read also looks whether one could have written.
    """

    __slots__ = ("base", "run", "nodeid", "_owner", "_phases", "_folders", "_written", "_usable")
    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, base: str, run: str, owner: ChildReports, nodeid: str) -> None:
        self.base = base
        self.run = run  # the run's folder, in which a process makes the test's (base)
        self.nodeid = nodeid
        self._owner = owner  # the run's, which sets the variables
        self._phases: list[str] = []  # in the order they began
        # by phase, made once the test's folder exists
        self._folders: dict[str, EventDirectory] = {}
        self._written = False  # the test's folder exists: a process wrote (it stays until removed)
        self._usable = False  # the run's folder was seen writable during this test

    @property
    def path(self) -> str:
        """The folder of the phase now running (what the variable names)."""
        return f"{self.base}/{self._phases[-1]}"

    def read(self, final: bool = False) -> Optional[Reading]:
        """What is new in every phase's folder, each file tagged with the phase
        that started its process.

        None: no process wrote, and one could have (nearly every test; no
        object is made for it).
        """
        if not self._written:
            self._written = os.access(self.base, os.F_OK)
            if not self._written:
                # Could a process have written? Asked once a test: the run's folder gone or made
                # unwritable is seen at the call's end, when it can still fail a budgeted test.
                if self._usable or os.access(self.run, os.W_OK | os.X_OK):
                    self._usable = True
                    return None
                from ..child_events.child_lines import Reading
                from ..child_events.event_files import unusable

                reading = Reading()
                reading.problem = unusable(self.run, self.path)
                return reading
        from ..child_events.child_lines import Reading
        from ..child_events.event_files import EventDirectory

        reading = Reading()
        current = self._phases[-1]
        for phase in self._phases:
            folder = self._folders.get(phase)
            if folder is None:
                folder = self._folders[phase] = EventDirectory(f"{self.base}/{phase}")
            first = len(reading.files)
            # Whether a process could make its folder at all: asked of the phase now running only.
            folder.read(final, into=reading, check_missing=phase == current)
            for lines in reading.files[first:]:
                lines.started_in = phase  # the folder says it, whatever the process wrote
        return reading

    # A record's reports (record.ProcessReports): the test's processes report here.
    def read_into(self, record: RecompileRecord, final: bool) -> None:
        reading = self.read(final)
        # else nothing to load the intake for
        if reading is not None and (reading.files or reading.unreported or reading.problem):
            from ..child_events.child_intake import take

            take(record, reading, self.path)

    def warnings(self, skipped: dict[str, list[str]],
                 problems: list[str]) -> list[pytest.PytestWarning]:
        from ..child_events.child_lines import report_warnings

        return report_warnings(skipped, problems)

    def enter(self, phase: Phase) -> None:
        """A phase begins (setup, the call, teardown): processes started from now on report to
        its folder."""
        self._phases.append(phase)
        os.environ[ENV_VAR] = f"{self.base}/{phase}"
        self._owner.tell_the_phase()

    def close(self, record: RecompileRecord) -> None:
        """The test ended: its reports read a last time, then the run's :meth:`ChildReports.end`."""
        record.read_children(final=True)
        # A fixture's process (a session server) may go on compiling after this test: read again
        # at the run's end.
        self._owner.end(self, record if self.fixtures_reported() else None)

    def fixtures_reported(self) -> bool:
        """Whether a process started in setup or teardown (a fixture's, which may outlive
        the test) has written."""
        return self._written and any(phase != "call" and folder.exists()
                                     for phase, folder in self._folders.items())

    def remove(self, just_read: bool = False) -> None:
        if self._written if just_read else os.access(self.base, os.F_OK):
            from ..child_events.tree_removal import remove_test_folder

            remove_test_folder(self.base)
            self._written = False


class ChildReports:
    """Per run, in each process that runs tests: the run's folder, a folder per watched test's
    phase, and the variable; a plugin on the hooks of a watched test's life."""

    def __init__(self) -> None:
        self._run: Optional[RunFolder] = None  # made with the first watched test
        self._tests = 0
        # Tests whose fixtures started processes that reported: (node id, record, how many
        # recompiles each child had reported by the test's end, by its key).
        self._after_their_test: list[tuple[str, RecompileRecord, dict[str, int]]] = []
        # The variable as every test finds it: set only when pytest itself runs in a watched test's
        # process. Read once: a lookup of an absent variable raises and catches a KeyError, every
        # test.
        self._found = os.environ.get(ENV_VAR)
        # The variables of the kinds a child reads only where told (syncs'), by name, as found
        # (read once, as the one above).
        self._found_told: dict[str, Optional[str]] = {}
        # What the environment tells the test's processes when no test runs (as found), and
        # while one runs, for the wanted signals of _told_for (made again when they change: they
        # are a new set whenever the kinds are, before the run narrows them at collection's end).
        self._told_when_found = self._as_found(KINDS.derived(told_to_children))
        self._told = self._told_when_found
        self._told_for: Optional[frozenset[str]] = None
        # as this run last set them: the environment is written only when they change
        self._told_now = self._told_when_found

    def begin(self, nodeid: str) -> TestReports:
        """A test's setup starts: the processes it starts report to its setup folder (made by
        the first that writes)."""
        if self._run is None:
            import tempfile

            from ..child_startup.hook import install_fork_handler
            from .run_folders import RunFolder

            self._run = RunFolder.make(tempfile.gettempdir())  # removes dead runs' folders first
            install_fork_handler()  # a fork of this process during a test reports on its own
        self._tests += 1
        run = self._run.path
        reports = TestReports(f"{run}/{self._tests}", run, self, nodeid)
        reports.enter("setup")
        return reports

    def tell_the_phase(self) -> None:
        """A phase of a test began (its folder named to the processes it starts): tell them which
        kinds they read, as the run reads them now (a budget, a block assertion or a report of
        syncs, seen so far)."""
        wanted = wanted_signals.wanted_signals()
        told = self._told if wanted is self._told_for else self._telling(wanted)
        # nearly every run: never, and the environment is not written
        if told is not self._told_now and told != self._told_now:
            self._tell(told)
        if "multiprocessing.forkserver" in sys.modules:
            _restart_fork_server()

    def end(self, reports: TestReports, read_again: Optional[RecompileRecord]) -> None:
        """The test's reports were read a last time: the variable back as the test found it, and
        its folders removed; unless ``read_again``: then its record is read again at the run's
        end, and its folders are left for a fixture's process that may go on reporting (the run's
        end removes them)."""
        if read_again is not None:
            self._after_their_test.append((reports.nodeid, read_again, {
                key: len(child.recompiles) for key, child in read_again.children.items()}))
        if self._found is None:
            try:
                del os.environ[ENV_VAR]
            except KeyError:  # the test removed it itself
                pass
        else:
            os.environ[ENV_VAR] = self._found
        found = self._told_when_found
        if self._told_now is not found and self._told_now != found:
            self._tell(found)
        if read_again is None:
            reports.remove(just_read=True)

    def _telling(self, wanted: frozenset[str]) -> tuple[tuple[str, Optional[str]], ...]:
        """What the test's processes are to be told, by variable: ``"1"`` for each kind told to
        children that the run reads (one of its signals wanted), else the variable as found."""
        kinds = KINDS.derived(told_to_children)
        self._told_for = wanted
        found = self._told_when_found = self._as_found(kinds)
        told = tuple((name, "1" if not wanted.isdisjoint(kind.signals) else value)
                     for kind, (name, value) in zip(kinds, found))
        self._told = found if told == found else told
        return self._told

    def _as_found(self, kinds: tuple[BudgetKind, ...]) -> tuple[tuple[str, Optional[str]], ...]:
        """The variables of ``kinds`` as the run found them (a gate's kind added since: as now)."""
        for kind in kinds:
            if kind.children_told_by not in self._found_told:
                self._found_told[kind.children_told_by] = os.environ.get(kind.children_told_by)
        return tuple((kind.children_told_by, self._found_told[kind.children_told_by])
                     for kind in kinds)

    def _tell(self, told: tuple[tuple[str, Optional[str]], ...]) -> None:
        """Tell the test's processes, in their environment, which kinds they read (each value
        ``"1"``, or as found)."""
        for name, value in told:
            if value is not None:
                os.environ[name] = value
            else:
                os.environ.pop(name, None)  # the test may have removed it itself
        self._told_now = told

    # -- the hooks (..hookspecs): the watcher begins each test's reports (begin), and the record
    # tells them of its phases and end ---

    def pytest_nocompile_process_reports(self) -> ChildReports:
        return self

    def pytest_nocompile_run_finished(self, results: Any) -> None:
        results.summary_notes += self._recompiled_after_their_test()

    def _recompiled_after_their_test(self) -> list[str]:
        """What processes that fixtures started recompiled after their test ended (each record read
        anew): a line each, counted against no test."""
        lines = []
        for nodeid, record, sizes in self._after_their_test:
            record.read_children(final=True)  # what they wrote since their test ended
            for key, child in record.children.items():
                late = len(child.recompiles) - sizes.get(key, 0)
                if late > 0:
                    lines.append(f"{child.info} (started in the {child.recompiles[-1].phase} of "
                                 f"{nodeid}): {plural(late, 'recompile')} after that test "
                                 "ended, not counted")
        self._after_their_test = []
        return lines

    def pytest_unconfigure(self) -> None:
        """The run ended: remove its folder, with whatever a straggling process wrote late."""
        if self._run is not None:
            self._run.remove()
            self._run = None


def _restart_fork_server() -> None:
    """Stop multiprocessing's fork server if one runs: it restarts on its next use,
    with the phase's environment.

    Its children are forked from it and inherit its environment, not the
    environment of the process that asked for them: a server started before
    this phase would send them to no test, or to an earlier test or phase.
    """
    forkserver = sys.modules.get("multiprocessing.forkserver")
    server = getattr(forkserver, "_forkserver", None)
    if server is not None and getattr(server, "_forkserver_pid", None) is not None:
        try:
            server._stop()  # what multiprocessing's own tests call; present from Python 3.8
        except Exception:
            pass
