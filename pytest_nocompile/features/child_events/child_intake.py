"""What a test's child processes wrote, taken into its record: each checked line an event
of its process, in the phase it was logged in. Loaded with the first report a child wrote:
most tests start no process.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...record.process_events import ProcessEvents
from ...vocabulary.display_paths import is_torch_file

if TYPE_CHECKING:
    from ...record.record import RecompileRecord
    from ...vocabulary.events import Phase
    from .child_lines import ChildLine, Reading

# The phases whose processes (a fixture's) are never counted, whenever they compile.
_FIXTURE_PHASES: dict[str, Phase] = {"setup": "setup", "teardown": "teardown"}


def take(record: RecompileRecord, reading: Reading, path: str) -> None:
    """Add a reading of ``path`` to ``record``: its checked lines; what is skipped, and processes
    that could not write, noted."""
    from .child_lines import checked

    lines, skipped = checked(reading)
    for path, reasons in skipped.items():
        record._skipped.setdefault(path, []).extend(reasons)
    for line in lines:
        try:
            _add_entry(record, line)
        except Exception as error:  # the event's text defeated a parser: say so rather than raise
            record.note_folder_problem(f"could not take a line of pid {line.pid}: "
                                       f"{type(error).__name__}: {error}")
    for token, reason in reading.unreported:
        pid = token.partition("-")[0]
        child = _child(record, token, int(pid) if pid.isdecimal() and len(pid) < 10 else 0)
        child.problems.append(f"could not write its report to {path} ({reason})")
    if reading.problem is not None:
        record.note_folder_problem(f"the test's processes {reading.problem}")


def _child(record: RecompileRecord, key: str, pid: int) -> ProcessEvents:
    child = record.children.get(key)
    if child is None:
        from ...vocabulary.events import ProcessInfo

        nth = 1 + sum(1 for other in record.children.values()
                      if other.info is not None and other.info.pid == pid)
        child = record.children[key] = ProcessEvents(ProcessInfo(pid, nth=nth))
    return child


def _phase_at(record: RecompileRecord, moment: float) -> Phase:
    if record.call_started_at is None:
        return record.phase  # no call yet: setup, or teardown after a failed setup
    if moment < record.call_started_at:
        return "setup"
    if record.call_ended_at is None or moment < record.call_ended_at:
        return "call"
    return "teardown"


def _add_entry(record: RecompileRecord, line: ChildLine) -> None:
    from ...vocabulary.events import (
        CompileEvent,
        HealthEvent,
        limit_hit_from_warning,
        recompile_event,
    )
    from ...vocabulary.graph_break_events import graph_break_event

    child = _child(record, line.key, line.pid)
    if line.world is not None:
        child.world = line.world
    info = child.info
    assert info is not None  # a child always has its info
    if line.rank is not None and line.rank != info.rank or line.command and not info.command:
        info = replace(info, rank=info.rank if line.rank is None else line.rank,
                       command=info.command or line.command)
        child.rename(info)
    # A process started in setup or teardown (a fixture's) is that phase's whenever
    # it logs: never counted.
    phase = _FIXTURE_PHASES.get(line.started_in or "") or _phase_at(record, line.moment)
    what = line.event
    if what == "recompile":
        event = recompile_event(line.message, phase, line.compile_id, line.user_code, line.thread,
                                line.module)
        child.add_recompile(replace(event, process=info))
    elif what == "compile":
        child.add_compile(CompileEvent(line.compile_id, line.user_code, phase, line.thread, info,
                                       line.compiling, line.module))
    elif what == "limit":
        hit = limit_hit_from_warning(line.message, phase, line.compile_id)
        if hit is not None:
            child.add_limit_hit(replace(hit, process=info))
    elif what == "graph_break":
        child.add_graph_break(replace(graph_break_event(line.message, is_torch_file, phase),
                                      process=info, module=line.module))
    elif what == "health":
        # The amount as it was sent: JSON keeps 2 as 2, but a count stays an int
        # through our own checks too.
        amount = int(line.amount) if line.amount.is_integer() else line.amount
        child.add_health(
            HealthEvent(line.what or "?", amount, line.message or None, line.compile_id,
                        line.user_code, phase, line.thread, info, line.compiling, line.module))
    elif what == "problem":
        child.problems.append(line.message)
