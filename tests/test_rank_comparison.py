"""same_across_ranks's comparison of the processes a test started, on events made by hand: pure, no
torch."""

from __future__ import annotations

from typing import Optional

from pytest_nocompile.features.compile_cost.kinds import COMPILE_SECONDS
from pytest_nocompile.features.contracts.rank_comparison import differences
from pytest_nocompile.record.process_events import ProcessEvents
from pytest_nocompile.record.snapshot import ProcessSnapshot
from pytest_nocompile.vocabulary.events import (
    CodeLocation,
    CompileEvent,
    GuardFailure,
    HealthEvent,
    ProcessInfo,
    RecompileEvent,
)
from pytest_nocompile.vocabulary.graph_break_events import GraphBreakEvent

STEP = CodeLocation("/w/train.py", 10, "step")
EVAL = CodeLocation("/w/train.py", 20, "evaluate")


def rank(number: Optional[int], *compiled: CodeLocation, recompiled: tuple[CodeLocation, ...] = (),
         world: Optional[int] = None, pid: int = 0) -> ProcessEvents:
    process = ProcessEvents(ProcessInfo(pid or 100 + (number or 0), number))
    process.world = world
    for code in compiled:
        process.add_compile(CompileEvent("0/0", compiling=code, process=process.info))
    for code in recompiled:
        process.add_recompile(RecompileEvent(code.function, code.filename, code.line,
                                             (GuardFailure("n == 1", "0/0"),), "",
                                             user_code=CodeLocation("/w/train.py", 33, "main",
                                                                    "step(batch, 2)"),
                                             process=process.info, compile_id="0/1"))
        process.add_compile(CompileEvent("0/1", compiling=code, process=process.info))
    return process


def without_graph(process: ProcessEvents, *frames: CodeLocation,
                  recompiled: bool = False) -> ProcessEvents:
    """``process`` with frame compiles that made no graph (each a compile time, as torch records one
    per frame), the last a recompile if asked."""
    for code in frames:
        process.add_health(HealthEvent(COMPILE_SECONDS, 0.1, compiling=code, process=process.info))
    if recompiled:
        process.add_recompile(RecompileEvent(
            frames[-1].function, frames[-1].filename, frames[-1].line,
            (GuardFailure("tensor 'args[0]' size mismatch at index 0. expected 8, actual 5",
                          "0/0"),),
            "", process=process.info))
    return process


def label(info: Optional[ProcessInfo]) -> str:
    return str(info)


def compared(*processes: ProcessEvents) -> list[str]:
    """What the comparison says of these processes, each as the judge is given it (a snapshot)."""
    return differences([ProcessSnapshot(process, label(process.info)) for process in processes],
                       label)


def test_processes_that_compiled_alike_pass() -> None:
    assert compared(rank(0, STEP, EVAL), rank(1, EVAL, STEP), rank(2, STEP, EVAL)) == []


def test_the_process_unlike_the_others_is_named_with_each_function_that_differs() -> None:
    lines = compared(rank(0, STEP), rank(1, STEP, recompiled=(STEP,)), rank(2, STEP))
    assert lines == [
        "rank 1 (pid 101) compiled unlike rank 0 (pid 100)",
        "    step (/w/train.py:10): 2 compiles (1 recompile) in rank 1, 1 compile "
        "(0 recompiles) in rank 0",
        "        first recompile (rank 1): guard failed: 0/0: n == 1",
        "        triggered by: /w/train.py:33 in main: step(batch, 2)",
    ]


def test_of_two_processes_the_lowest_rank_is_the_reference_and_a_function_one_never_compiled_is_said() -> None:  # noqa: E501
    lines = compared(rank(1, STEP), rank(0, STEP, EVAL))
    assert lines == [
        "rank 1 (pid 101) compiled unlike rank 0 (pid 100)",
        "    evaluate (/w/train.py:20): never compiled in rank 1, 1 compile "
        "(0 recompiles) in rank 0",
    ]


def test_a_rank_of_the_job_that_compiled_nothing_is_named() -> None:
    assert (compared(rank(0, STEP, world=2))
            == ["rank 1 compiled nothing in the call, while rank 0 compiled"])
    assert compared(rank(1, STEP)) == ["rank 0 compiled nothing in the call, while rank 1 compiled"]
    # no world size, no rank above: nothing known to be missing
    assert compared(rank(0, STEP)) == []


def test_processes_without_ranks_are_compared_by_the_order_they_reported() -> None:
    lines = compared(rank(None, STEP, pid=7), rank(None, STEP, STEP, pid=8))
    assert lines[0] == "pid 8 compiled unlike pid 7"
    assert lines[1] == ("    step (/w/train.py:10): 2 compiles (0 recompiles) in pid 8, 1 compile "
                        "(0 recompiles) in pid 7")


def test_events_outside_the_call_are_not_compared() -> None:
    fixture_server = rank(3, STEP)
    fixture_server.compiles[:] = [CompileEvent("0/0", phase="setup", compiling=STEP)]
    assert compared(rank(0, STEP, world=1), fixture_server) == []


def test_a_rank_whose_graphless_frame_recompiled_is_named_with_its_recompile_not_as_compiling_nothing() -> None:  # noqa: E501
    # torch.compile(DDP(model)): dynamo compiles DDP's frames to no graph, and one recompiles on
    # rank 1's short batch.
    lines = compared(without_graph(rank(0, world=2), STEP),
                     without_graph(rank(1, world=2), STEP, STEP, recompiled=True))
    assert lines == [
        "rank 1 (pid 101) compiled unlike rank 0 (pid 100)",
        "    step (/w/train.py:10): 2 compiles without a graph (1 recompile) in rank 1, "
        "1 compile without a graph (0 recompiles) in rank 0",
        "        first recompile (rank 1): guard failed: "
        "0/0: tensor 'args[0]' size mismatch at index 0. expected 8, actual 5",
    ]
    assert compared(without_graph(rank(0), STEP), without_graph(rank(1), STEP)) == []


def test_a_frame_without_a_graph_is_told_apart_from_the_graphs_of_its_function() -> None:
    lines = compared(rank(0, STEP), without_graph(rank(1, STEP), STEP, STEP))
    # rank 1's two frame compiles of step: one made the graph, one none
    assert lines[1] == ("    step (/w/train.py:10): 1 compile and 1 without a graph (0 recompiles) "
                        "in rank 1, 1 compile (0 recompiles) in rank 0")


def test_a_rank_where_dynamo_only_broke_the_graph_compiled_something() -> None:
    only_broke = rank(0, world=2)
    only_broke.add_graph_break(GraphBreakEvent("/w/train.py", 12, "Unsupported method call",
                                               process=only_broke.info))
    lines = compared(only_broke, rank(1, STEP, world=2))
    assert lines == ["rank 1 (pid 101) compiled unlike rank 0 (pid 100)",
                     "    step (/w/train.py:10): 1 compile (0 recompiles) in rank 1, "
                     "never compiled in rank 0"]
