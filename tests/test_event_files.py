"""The child-process transport and the record's share per process: pure code on written lines, no
torch."""

from __future__ import annotations

import json
import os
from pathlib import Path

from nocompile_testing import (
    BudgetedRecord,
    failure_of,
    judge_record,
    recorded_messages,
    with_health_counts,
)
from pytest_nocompile.features.child_events.event_files import EventDirectory
from pytest_nocompile.features.child_startup.event_writer import EventWriter
from pytest_nocompile.judge.budget import RecompileBudget
from pytest_nocompile.judge.result import Verdict, count_properties
from pytest_nocompile.vocabulary.kinds import GRAPH_BREAKS, RECOMPILES

RECOMPILE = recorded_messages("torch-2.13-recompiles.txt")[0]  # f recompiled: n == 2
LIMIT = "torch._dynamo hit config.recompile_limit (8)\n   function: 'step' (adam.py:214)"


def line(moment: float, pid: int, event: str, rank: int | None = None,
         compile_id: str | None = None) -> dict[str, object]:
    """One line as a child's reporter writes it (observe/startup.py)."""
    entry: dict[str, object] = {"t": moment, "pid": pid, "rank": rank, "event": event}
    if event in ("recompile", "limit"):
        entry["message"] = RECOMPILE if event == "recompile" else LIMIT
    if event in ("recompile", "limit", "compile"):
        entry["compile_id"] = compile_id
    return entry


def recompiled(moment: float, pid: int, rank: int | None = None,
               attempt: int = 1) -> list[dict[str, object]]:
    """A recompile and the graph it compiled."""
    return [line(moment, pid, "recompile", rank, f"0/{attempt}"),
            line(moment, pid, "compile", rank, f"0/{attempt}")]


def write(folder: Path, pid: int, *entries: dict[str, object]) -> None:
    with open(folder / f"{pid}.jsonl", "a") as out:
        for entry in entries:
            out.write(json.dumps(entry) + "\n")


def test_writer_appends_whole_lines_to_a_file_per_process_and_makes_the_directory_on_first_write(
    tmp_path: Path
) -> None:
    folder = tmp_path / "test-1"
    writer = EventWriter(str(folder))
    assert not folder.exists()  # nothing written, nothing made
    writer.write({"event": "recompile", "n": 1})
    writer.write({"event": "compile", "n": 2})
    (written,) = folder.iterdir()
    assert (written.name == f"{writer.token()}.jsonl"
            and writer.token().startswith(f"{os.getpid()}-"))
    assert [json.loads(text)["n"] for text in written.read_text().splitlines()] == [1, 2]


def test_writer_is_silent_once_the_run_directory_is_gone(tmp_path: Path) -> None:
    # a test phase's folder under a removed run folder
    writer = EventWriter(str(tmp_path / "gone" / "1" / "call"))
    writer.write({"event": "recompile"})
    assert writer.broken and not (tmp_path / "gone").exists()


def test_reader_reads_each_complete_line_once_and_waits_for_a_half_written_one(
    tmp_path: Path
) -> None:
    reports = EventDirectory(str(tmp_path / "test-1"))
    assert reports.read_new() == [] and not reports.exists()
    (tmp_path / "test-1").mkdir()
    with open(tmp_path / "test-1" / "7.jsonl", "w") as out:
        out.write('{"n": 1}\n{"n": 2}\n{"n": ')
    assert [entry["n"] for entry in reports.read_new()] == [1, 2]
    with open(tmp_path / "test-1" / "7.jsonl", "a") as out:
        out.write('3}\nnot json\n{"n": 4}\n')
    assert [entry["n"] for entry in reports.read_new()] == [3, 4]
    assert reports.read_new() == []
    reports.remove()
    assert not (tmp_path / "test-1").exists()


def watched(tmp_path: Path, budget: RecompileBudget) -> tuple[BudgetedRecord, Path]:
    folder = tmp_path / "test-1"
    folder.mkdir()
    record = BudgetedRecord(budget)
    record.read_children_from(EventDirectory(str(folder)))
    return record, folder


def test_a_childs_events_fall_in_the_phase_they_were_logged_in_and_only_the_calls_count(
    tmp_path: Path
) -> None:
    record, folder = watched(tmp_path, RecompileBudget.of({RECOMPILES.key: 0}))
    record.end_setup()
    record.start_call(at=100.0)
    write(folder, 41,
          line(98.0, 41, "compile", compile_id="0/0"),  # before the call: setup's
          *recompiled(99.0, 41, attempt=1),
          *recompiled(101.0, 41, rank=1, attempt=2))  # the call's
    record.end_call()
    assert record.call_ended_at is not None
    write(folder, 41, *recompiled(record.call_ended_at + 1, 41, rank=1, attempt=3))  # teardown's
    record.read_children()
    (child,) = record.children.values()
    assert [event.phase for event in child.recompiles] == ["setup", "call", "teardown"]
    assert [event.phase for event in child.compiles] == ["setup", "setup", "call", "teardown"]
    assert str(child.info) == "rank 1 (pid 41)"
    assert ({process.info: process.counts for process in record.snapshot().processes}[child.info]
            == with_health_counts({"compiles": 1, "recompiles": 1, "graph_breaks": 0}))
    # the test's own process
    assert record.counts() == with_health_counts({"compiles": 0, "recompiles": 0,
                                                  "graph_breaks": 0})
    assert record.events == [] and [event.process for event in record.log] == [child.info] * 3


def test_a_budget_applies_to_each_process_and_the_result_shows_the_worst(tmp_path: Path) -> None:
    record, folder = watched(tmp_path, RecompileBudget.of({RECOMPILES.key: 1}))
    record.start_call(at=0.0)
    for pid, rank in ((41, 0), (42, 1)):  # each rank recompiles once: within max_recompiles(1)
        write(folder, pid, line(0.5, pid, "compile", rank, "0/0"), *recompiled(1.0, pid, rank))
    record.end_call()
    result = judge_record(record)
    assert result.verdict is Verdict.WITHIN and result.counts["recompiles"] == 1
    assert ([(process["rank"], process["recompiles"]) for process in result.processes]
            == [(None, 0), (0, 1), (1, 1)])
    assert result.processes[0]["test_process"] and result.processes[0]["pid"] == os.getpid()

    write(folder, 42, *recompiled(2.0, 42, rank=1, attempt=2))  # rank 1 again: over
    record = BudgetedRecord(RecompileBudget.of({RECOMPILES.key: 1}))
    record.read_children_from(EventDirectory(str(folder)))
    record.start_call(at=0.0)
    record.end_call()
    result = judge_record(record)
    assert result.verdict is Verdict.OVER and result.over == ("recompiles",)
    assert result.cause == "rank 1 (pid 42): f recompiled: 0/0: n == 2"
    failure = failure_of(record, result.over)
    assert failure.splitlines()[0] == "rank 1 (pid 42): 2 recompiles > max_recompiles(1)"
    assert "rank 0 (pid 41)" not in failure
    # a compile-health kind only where budgeted or counted
    counts = "compiles=3 recompiles=2 graph_breaks=0"
    assert ("nocompile_process", f"rank 1 (pid 42): {counts}") in count_properties(result)
    assert json.loads(json.dumps(result.to_dict()))["processes"] == list(result.processes)


def test_a_limit_hit_in_a_child_fails_its_recompile_budget_whatever_its_count(
    tmp_path: Path
) -> None:
    record, folder = watched(tmp_path, RecompileBudget.of({RECOMPILES.key: 5, GRAPH_BREAKS.key: 5}))
    record.start_call(at=0.0)
    write(folder, 43, *recompiled(1.0, 43), line(1.5, 43, "recompile", compile_id="0/2"),
          line(1.5, 43, "limit", compile_id="0/2"))
    record.end_call()
    result = judge_record(record)
    assert result.over == ("recompiles",)
    assert ("pid 43: 1 recompile within max_recompiles(5), but dynamo hit its recompile limit"
            in failure_of(record, result.over))


def test_a_child_that_could_not_watch_itself_is_named(tmp_path: Path) -> None:
    record, folder = watched(tmp_path, RecompileBudget.of({RECOMPILES.key: 0}))
    record.start_call(at=0.0)
    write(folder, 44, {"t": 1.0, "pid": 44, "rank": None, "event": "problem",
                       "message": "torch 2.3.0 is too old"})
    record.end_call()
    assert record.child_problems() == ["pid 44: torch 2.3.0 is too old"]



# torch._dynamo.graph_break() at record_scenarios.py:12
GRAPH_BREAK = recorded_messages("torch-2.13-graph_breaks.txt")[1]
# print() at record_scenarios.py:7
PRINT_BREAK = recorded_messages("torch-2.13-graph_breaks.txt")[0]


def graph_break(moment: float, pid: int, message: str = GRAPH_BREAK) -> dict[str, object]:
    return {"t": moment, "pid": pid, "rank": None, "event": "graph_break", "message": message}


def test_a_childs_graph_break_traced_again_by_a_recompile_counts_once_per_process(
    tmp_path: Path
) -> None:
    record, folder = watched(tmp_path, RecompileBudget.of({GRAPH_BREAKS.key: 1}))
    record.start_call(at=0.0)
    # pid 41 traces its graph break three times (a first compile and two recompiles), pid 42 once.
    write(folder, 41, graph_break(1.0, 41), *recompiled(2.0, 41),
          graph_break(2.0, 41), graph_break(3.0, 41))
    write(folder, 42, graph_break(1.0, 42))
    record.end_call()
    assert [process[GRAPH_BREAKS.key] for process in judge_record(record).processes] == [0, 1, 1]
    assert judge_record(record).verdict is Verdict.WITHIN
    # another place: another graph break, in the call
    write(folder, 41, graph_break(1.5, 41, PRINT_BREAK))
    record = BudgetedRecord(RecompileBudget.of({GRAPH_BREAKS.key: 1}))
    record.read_children_from(EventDirectory(str(folder)))
    record.start_call(at=0.0)
    record.end_call()
    assert judge_record(record).over == ("graph_breaks",)
    assert (failure_of(record, ("graph_breaks",)).splitlines()[0]
            == "pid 41: 2 graph breaks > max_graph_breaks(1)")
