"""The record's phases and counts, and the verdict on them: pure code on recorded messages, no
torch."""

from __future__ import annotations

import json

import pytest

from nocompile_testing import (
    BudgetedRecord,
    failure_of,
    judge_record,
    recorded_messages,
    with_health_counts,
)
from pytest_nocompile.judge.budget import RecompileBudget
from pytest_nocompile.judge.result import TestResult, Verdict, count_properties, idle_result
from pytest_nocompile.judge.verdict import over_budget
from pytest_nocompile.vocabulary.display_paths import is_torch_file
from pytest_nocompile.vocabulary.events import (
    CompileEvent,
    HealthEvent,
    RecompileLimitHit,
    parse_limit_warning,
    recompile_event,
)
from pytest_nocompile.vocabulary.graph_break_events import graph_break_event
from pytest_nocompile.vocabulary.kinds import COMPILES, GRAPH_BREAKS, RECOMPILES

RECOMPILE = recorded_messages("torch-2.13-recompiles.txt")[0]  # f recompiled: n == 2
LIMIT = "torch._dynamo hit config.recompile_limit (8)\n   function: 'step' (adam.py:214)"
# A graph break at line N of test_a.py; each place is one graph break (a break traced again is not
# counted again).
GRAPH_BREAK = ("Graph break in user code at /x/test_a.py:{line}\nGraph Break Reason: "
               "Failed to trace builtin operator")


def limit_hit(message: str, compile_id: str | None = None) -> RecompileLimitHit:
    """The limit hit dynamo's warning ``message`` names (a test's fixture: it must parse)."""
    hit = parse_limit_warning(message, compile_id=compile_id)
    assert hit is not None
    return hit


def recorded(budget: RecompileBudget, setup: int = 0, call: int = 0, teardown: int = 0,
             graphs: int = 0, breaks: int = 0, limit: bool = False) -> BudgetedRecord:
    """A record as capture fills it: each recompile with the graph it compiled (each setup and
    teardown one too)."""
    record = BudgetedRecord(budget)
    for _ in range(setup):
        record.add(recompile_event(RECOMPILE, compile_id="0/1"))
        record.add(CompileEvent("0/1"))
    record.end_setup()
    record.start_call()
    for _ in range(call):
        record.add(recompile_event(RECOMPILE, compile_id="0/1"))
    for line in range(breaks):
        record.add(graph_break_event(GRAPH_BREAK.format(line=5 + line), is_torch_file))
    if limit:
        record.add(limit_hit(LIMIT))
    for _ in range(graphs):
        record.add(CompileEvent("1/0"))
    record.end_call()
    for _ in range(teardown):
        record.add(recompile_event(RECOMPILE, compile_id="0/1"))
        record.add(CompileEvent("0/1"))
    return record


def test_only_the_call_phase_counts_for_every_kind() -> None:
    record = recorded(RecompileBudget.of({"recompiles": 5}), setup=2, call=1,
                      teardown=3, graphs=4, breaks=2)
    assert [event.phase for event in record.events] == ["setup", "setup", "call",
                                                        "teardown", "teardown", "teardown"]
    assert ((record.count(RECOMPILES), record.count(GRAPH_BREAKS), record.count(COMPILES))
            == (1, 2, 4))
    assert (len(record.events), len(record.compiles)) == (6, 2 + 4 + 3)
    assert ([event.phase for event in record.compiles]
            == ["setup"] * 2 + ["call"] * 4 + ["teardown"] * 3)


def test_counts_read_during_the_call_follow_every_later_event() -> None:
    # A fixture or block may read the counts mid-call; each kind's later events still count (the
    # counts are kept between events, not fixed at the first read).
    record = BudgetedRecord(RecompileBudget.of({"recompiles": 0}))
    record.start_call()
    assert record.counts()[COMPILES.key] == 0
    record.add(CompileEvent("0/0"))
    assert record.counts()[COMPILES.key] == 1
    record.add(recompile_event(RECOMPILE, compile_id="0/1"))
    record.add(graph_break_event(GRAPH_BREAK.format(line=5), is_torch_file))
    record.add(HealthEvent("inductor.fxgraph_cache_miss", 1, None, "0/1"))
    assert (record.counts()[RECOMPILES.key], record.counts()[GRAPH_BREAKS.key],
            record.counts()["cache_misses"]) == (1, 1, 1)
    # the attempt just logged was refused: a limit hit, not a recompile
    record.add(limit_hit(LIMIT, compile_id="0/1"))
    assert record.counts()[RECOMPILES.key] == 0
    record.end_call()
    record.add(CompileEvent("1/0"))  # teardown's: the call's counts stay
    assert record.counts()[COMPILES.key] == 1


def test_an_event_added_while_the_counts_are_worked_out_is_in_the_next_counts(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # A compile in another thread can land between reading the lists and keeping the counts: the
    # kept counts must not hide it afterwards.
    record = BudgetedRecord(RecompileBudget.of({"recompiles": 0}))
    record.start_call()
    work_out = type(record.own)._call_counts

    def with_a_compile_meanwhile(process):
        counts = work_out(process)
        monkeypatch.undo()
        record.add(CompileEvent("1/0"))  # the other thread's, after the lists were read
        return counts

    monkeypatch.setattr(type(record.own), "_call_counts", with_a_compile_meanwhile)
    assert record.counts()[COMPILES.key] == 0
    assert record.counts()[COMPILES.key] == 1


def test_a_test_whose_setup_failed_counts_nothing() -> None:
    record = BudgetedRecord(RecompileBudget.of({"recompiles": 0}))
    record.add(recompile_event(RECOMPILE))
    record.end_setup()
    record.add(recompile_event(RECOMPILE))
    assert [event.phase for event in record.events] == ["setup", "teardown"]
    assert record.count(RECOMPILES) == 0 and judge_record(record).verdict is Verdict.WITHIN


@pytest.mark.parametrize(("budget", "over", "verdict"), [
    ({}, (), Verdict.NO_BUDGET),
    ({"recompiles": 1, "graph_breaks": 2, "compiles": 3}, (), Verdict.WITHIN),
    ({"recompiles": 0}, ("recompiles",), Verdict.OVER),
    ({"compiles": 2, "graph_breaks": 1}, ("compiles", "graph_breaks"), Verdict.OVER),
])
def test_the_verdict(budget: dict[str, int], over: tuple[str, ...], verdict: Verdict) -> None:
    result = judge_record(recorded(RecompileBudget.of(budget), call=1, graphs=3, breaks=2))
    assert (result.over, result.verdict) == (over, verdict)
    assert result.counts == with_health_counts({"compiles": 3, "recompiles": 1, "graph_breaks": 2})


def test_a_limit_hit_fails_a_recompile_budget_only() -> None:
    assert (judge_record(recorded(RecompileBudget.of({"recompiles": 8}), call=2, limit=True)).over
            == ("recompiles",))
    assert (judge_record(recorded(RecompileBudget.of({"compiles": 8}), call=2, limit=True)).over
            == ())
    assert (over_budget(RECOMPILES, 0, 0, limit_hit=True)
            and not over_budget(COMPILES, 0, 0, limit_hit=True))
    assert (over_budget(COMPILES, 1, 2, exact=True)
            and not over_budget(COMPILES, 1, None, exact=True))


def test_causes_follow_the_first_kind_over_budget() -> None:
    assert (judge_record(recorded(RecompileBudget.of({"recompiles": 0}), call=1)).cause
            == "f recompiled: 0/0: n == 2")
    assert (judge_record(recorded(RecompileBudget.of({"graph_breaks": 0}), call=1, breaks=1)).cause
            == "graph break: Failed to trace builtin operator")
    assert (judge_record(recorded(RecompileBudget.of({"compiles": 1}), graphs=2, breaks=1)).cause
            == "graph break: Failed to trace builtin operator")
    assert (judge_record(recorded(RecompileBudget.of({"compiles": 1}), graphs=2)).cause
            == "2 compiles > max_compiles(1)")
    assert judge_record(recorded(RecompileBudget.of({"recompiles": 1}), limit=True)).cause == (
        "0 recompiles within max_recompiles(1), but dynamo hit its recompile limit")


def test_failure_text_has_a_part_per_kind_over_budget() -> None:
    record = recorded(RecompileBudget.of({"recompiles": 0, "graph_breaks": 0, "compiles": 9}),
                      setup=1, call=1, breaks=1)
    text = failure_of(record, judge_record(record).over)
    first, second = text.split("\n\n")
    assert first.splitlines()[0] == "1 recompile > max_recompiles(0)"
    assert "not counted (outside the call phase): 1 recompile" in first
    assert second.splitlines()[:3] == ["1 graph break > max_graph_breaks(0)",
                                       "[1/1] graph break at /x/test_a.py:5",
                                       "    reason: Failed to trace builtin operator"]


def test_results_travel_as_json_and_come_back_equal() -> None:
    record = recorded(RecompileBudget.of({"recompiles": 0}), setup=1, call=2,
                      graphs=3, breaks=1, limit=True)
    result = judge_record(record)
    carried = json.loads(json.dumps(result.to_dict()))
    assert TestResult.from_dict(carried) == result
    assert (carried["verdict"] == "over budget" and carried["max_recompiles"] == 0
            and carried["max_compiles"] is None)
    assert [event["phase"] for event in carried["recompile_events"]] == ["setup", "call", "call"]
    assert carried["recompile_limit_hits"] == [{"limit_name": "recompile_limit", "limit": 8,
                                                "function": "'step' (adam.py:214)", "phase": "call",
                                             "process": None, "refused_attempt": None,
                                             "unread_text": None}]
    assert count_properties(result) == list(with_health_counts(
        {"compiles": 3, "recompiles": 2, "graph_breaks": 1}, "nocompile_").items())


def test_idle_results() -> None:
    assert idle_result(RecompileBudget.of({"recompiles": 0})).verdict is Verdict.WITHIN
    assert idle_result(RecompileBudget()).to_dict()["verdict"] == "no budget"
    assert (TestResult.from_dict(idle_result(RecompileBudget()).to_dict())
            == idle_result(RecompileBudget()))


def test_an_attempt_refused_at_the_recompile_limit_is_a_limit_hit_not_a_recompile() -> None:
    # What dynamo logs at the limit: "Recompiling function ..." for the attempt, then the
    # limit warning under the same compile id, and no graph.
    record = BudgetedRecord(RecompileBudget.of({"recompiles": 3}))
    record.start_call()
    record.add(CompileEvent("0/0"))
    for attempt in (1, 2, 3):
        record.add(recompile_event(RECOMPILE, compile_id=f"0/{attempt}"))
        record.add(CompileEvent(f"0/{attempt}"))
    record.add(recompile_event(RECOMPILE, compile_id="0/4"))
    record.add(limit_hit(LIMIT, compile_id="0/4"))
    record.end_call()
    assert (record.count(COMPILES), record.count(RECOMPILES)) == (4, 3)
    (hit,) = record.limit_hits
    assert hit.refused is not None and hit.refused.compile_id == "0/4"
    result = judge_record(record)
    assert result.over == ("recompiles",)  # a limit hit fails a recompile budget whatever the count
    assert failure_of(record, result.over).splitlines()[0] == (
        "3 recompiles within max_recompiles(3), but dynamo hit its recompile limit")


@pytest.mark.parametrize(("recompile_id", "limit_id", "graph_between", "refused"), [
    ("0/4", "1/2", False, False),  # another frame's limit: that recompile compiled
    ("0/4", "0/4", True, False),  # a graph came in between: it compiled
    (None, None, False, True),  # no compile ids (older torch): the same function, right before
])
def test_only_the_attempt_right_before_the_limit_warning_is_refused(
    recompile_id: str | None, limit_id: str | None, graph_between: bool, refused: bool
) -> None:
    record = BudgetedRecord()
    record.start_call()
    step = RECOMPILE.replace("Recompiling function f ", "Recompiling function step ")
    record.add(recompile_event(step, compile_id=recompile_id))
    if graph_between:
        record.add(CompileEvent(recompile_id))
    record.add(limit_hit(LIMIT, compile_id=limit_id))
    assert ((record.count(RECOMPILES), record.limit_hits[0].refused is not None)
            == (0 if refused else 1, refused))
