"""Health events, the base of the compile-health gates: counter increments seen as they happen, one
fan-out, children's lines.

In-process tests with the real torch (eager backend): ``counters["stats"]["unique_graphs"]``
rises once per graph dynamo compiles in every torch from 2.4, so it stands in
for the counters the gates watch (cache misses, CUDA-graph skips).
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Iterator

import pytest
from test_child_lines import entry, watched, write

from nocompile_testing import BudgetedRecord, judge_record
from pytest_nocompile.observe.sources.counter_increments import CounterIncrements
from pytest_nocompile.vocabulary.events import HealthEvent
from pytest_nocompile.vocabulary.kinds import BudgetKind

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")
from torch._dynamo.utils import counters  # noqa: E402

GRAPHS = BudgetKind(key="graphs", marker="max_graphs", events="health", noun="graph",
                    counts="graphs", column="graphs",
                    short="graphs", signals=("stats.unique_graphs",))


def compile_new(value: int) -> None:
    """Compile a function anew: exactly one graph (the reset drops what an earlier call compiled,
    not the counters)."""
    dynamo.reset()

    def fresh(x):
        return x * value + 1
    torch.compile(fresh, backend="eager")(torch.ones(2))


@pytest.fixture
def increments() -> Iterator[tuple[list[tuple[str, float]], CounterIncrements]]:
    seen: list[tuple[str, float]] = []
    source = CounterIncrements(lambda what, amount: seen.append((what, amount)),
                               lambda: {"stats.unique_graphs"})
    yield seen, source
    source.disarm()


def test_each_increment_of_a_wanted_counter_is_reported_though_user_code_clears_the_counters(
        increments) -> None:
    seen, source = increments
    compile_new(1)  # before arming: not reported
    source.arm()
    compile_new(2)
    counters.clear()  # as torch's TestCase does in setUp and tearDown
    compile_new(3)
    counters["stats"].clear()
    compile_new(4)
    assert seen == [("stats.unique_graphs", 1)] * 3


def test_only_wanted_names_are_reported_and_a_fall_is_not_a_rise(increments) -> None:
    seen, source = increments
    source.arm()
    counters["stats"]["calls_captured"] += 5
    counters["stats"]["unique_graphs"] = 0
    counters["other"]["unique_graphs"] += 1  # same name, another group
    assert seen == []


def test_disarming_puts_back_torchs_counter_class_and_factory(increments) -> None:
    seen, source = increments
    counters["stats"]["unique_graphs"] += 0  # a Counter made before arming
    source.arm()
    counters["made_while_armed"]["x"] += 1
    assert counters.default_factory is not collections.Counter
    source.disarm()
    assert counters.default_factory is collections.Counter
    assert {type(counter) for counter in counters.values()} == {collections.Counter}
    # no attribute of ours left behind
    assert all(not vars(counter) for counter in counters.values())
    counters["stats"]["unique_graphs"] += 1
    assert seen == []


def test_the_capture_fans_a_health_signal_out_to_every_sink_with_the_users_line() -> None:
    from pytest_nocompile.observe.capture import DYNAMO_LOGS

    first, second = BudgetedRecord(), BudgetedRecord()
    DYNAMO_LOGS.attach(first)
    DYNAMO_LOGS.attach(second)
    try:
        first.start_call()
        second.start_call()
        # the line the user code finder names
        DYNAMO_LOGS.emit_health("inductor.fxgraph_cache_miss", 1, "a reason")
    finally:
        DYNAMO_LOGS.detach(first)
        DYNAMO_LOGS.detach(second)
    for record in (first, second):
        (event,) = record.own.health
        assert (event.what, event.amount, event.reason, event.phase) == (
            "inductor.fxgraph_cache_miss", 1, "a reason", "call")
        assert event.user_code is not None and event.user_code.filename == __file__
        assert "emit_health" in (event.user_code.code or "")


def test_a_kind_counts_the_call_phases_amounts_of_its_signals_in_a_childs_lines(
        tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {})
    write(folder / "7-aaaa.jsonl",
          entry(1.0, 7, "health", "7-aaaa", what="stats.unique_graphs", amount=2, message=None),
          entry(1.5, 7, "health", "7-aaaa", what="inductor.fxgraph_cache_hit", amount=1,
                message="not counted: another signal"),
          entry(2.0, 7, "health", "7-aaaa", what="stats.unique_graphs", amount=1, message="why"))
    record.end_call()
    record.read_children(final=True)
    (child,) = record.children.values()
    assert child.count(GRAPHS) == 3
    assert [event.reason for event in child.signals(GRAPHS.signals)] == [None, "why"]
    assert record.child_warnings() == []


def test_a_childs_health_line_without_a_signal_name_is_skipped_and_said(tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {})
    write(folder / "7-aaaa.jsonl", entry(1.0, 7, "health", "7-aaaa", amount=1))
    record.end_call()
    record.read_children(final=True)
    (warning,) = record.child_warnings()
    assert "a health event without 'what'" in str(warning)


def test_a_block_counts_a_health_kind_and_its_failure_lists_each_signal_with_its_reason_and_line(
) -> None:
    from pytest_nocompile.exceptions import BudgetExceeded
    from pytest_nocompile.features.block_assertions.assertions import _BudgetBlock
    from pytest_nocompile.observe.capture import DYNAMO_LOGS

    record = BudgetedRecord()
    DYNAMO_LOGS.attach(record)
    try:
        record.start_call()
        with _BudgetBlock(GRAPHS, record, 3, False, "assert_max_graphs") as within:
            DYNAMO_LOGS.emit_health("stats.unique_graphs", 2)
        assert within.counted == 2
        with pytest.raises(BudgetExceeded) as raised, _BudgetBlock(GRAPHS, record, 1, False,
                                                                   "assert_max_graphs"):
            DYNAMO_LOGS.emit_health("stats.unique_graphs", 1, "first")
            DYNAMO_LOGS.emit_health("stats.calls_captured", 7)  # another signal: not counted
            DYNAMO_LOGS.emit_health("stats.unique_graphs", 1)
    finally:
        DYNAMO_LOGS.detach(record)
    lines = str(raised.value).splitlines()
    assert lines[0] == "2 graphs > assert_max_graphs(1)"
    assert [line for line in lines if not line.startswith("    triggered by: ")] == [
        "2 graphs > assert_max_graphs(1)", "[1/2] stats.unique_graphs", "    reason: first",
        "[2/2] stats.unique_graphs"]
    assert sum(line.startswith("    triggered by: ") and "test_health_events.py:" in line
               for line in lines) == 2, lines


def test_a_results_json_holds_each_health_event_and_xdist_carries_it_back_unchanged() -> None:
    from pytest_nocompile.judge.result import TestResult

    record = BudgetedRecord()
    record.start_call()
    record.add(HealthEvent("inductor.fxgraph_cache_miss", 1, "cold", "0/0"))
    record.end_call()
    data = judge_record(record).to_dict()
    assert data["health_events"] == [{"what": "inductor.fxgraph_cache_miss", "amount": 1,
                                      "reason": "cold", "phase": "call",
                                      "compile_id": "0/0", "compiling": None, "module": None,
                                      "thread": None, "user_code": None, "process": None}]
    assert TestResult.from_dict(data).to_dict() == data
    # a worker of an older version
    older = {key: value for key, value in data.items() if key != "health_events"}
    assert TestResult.from_dict(older).details["health_events"] == []
