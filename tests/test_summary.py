"""The summary table, JSON document and baseline comparison from typed results: pure code; and,
end to end, the table and JSON report of a run for the counts it did not read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nocompile_testing import RunPytest
from pytest_nocompile.features.baselines.baseline import (
    ANY_TORCH,
    Baseline,
    BaselineError,
    compare,
    load_baseline,
    saved_baseline,
)
from pytest_nocompile.features.caches.kind import CACHE_MISSES
from pytest_nocompile.features.compile_cost.kinds import COMPILE_SECONDS_KIND
from pytest_nocompile.features.reports.json_report import json_document, outcome_of
from pytest_nocompile.features.syncs.kind import SYNCS
from pytest_nocompile.judge.budget import RecompileBudget
from pytest_nocompile.judge.result import TestResult, Verdict, idle_result
from pytest_nocompile.observe.wanted_signals import every_kinds_signals
from pytest_nocompile.output.summary import LONG_TABLE, summary_lines
from pytest_nocompile.vocabulary.kinds import KINDS
from pytest_nocompile.watching.measured import (
    HEALTH_KINDS,
    HEARD_WITHOUT_DYNAMO,
    NOT_READ,
    kinds_not_read,
)


def result(compiles: int, recompiles: int, graph_breaks: int, budget: dict[str, int],
           over: tuple[str, ...] = (), cause: str | None = None) -> TestResult:
    counts = {**{kind.key: 0 for kind in KINDS}, "compiles": compiles, "recompiles": recompiles,
              "graph_breaks": graph_breaks}
    verdict = Verdict.OVER if over else Verdict.WITHIN if budget else Verdict.NO_BUDGET
    return TestResult(counts, {key: budget.get(key) for key in counts}, verdict, over, cause)


RESULTS = {
    "t.py::quiet": idle_result(RecompileBudget.of({"recompiles": 0})),
    "t.py::within": result(2, 1, 0, {"recompiles": 1}),
    "t.py::over": result(3, 1, 1, {"recompiles": 0, "graph_breaks": 1}, ("recompiles",),
                         "f recompiled: 0/0: n == 2"),
    "t.py::unbudgeted": result(1, 0, 0, {}),
}


def test_table_worst_first_with_causes() -> None:
    assert summary_lines(RESULTS) == [
        "compiles  recompiles  graph breaks  budget                    verdict        test",
        "       3           1             1  recompiles<=0, breaks<=1  over budget    t.py::over",
        "       2           1             0  recompiles<=1             within budget  t.py::within",
        "       1           0             0  -                         no budget      "
        "t.py::unbudgeted",
        "t.py::over: f recompiled: 0/0: n == 2",
    ]
    assert (summary_lines({"t.py::quiet": RESULTS["t.py::quiet"]})
            == ["no test compiled in its call phase (1 watched)"])


def test_a_long_table_lists_only_failures_unless_all_are_asked_for() -> None:
    many = {f"t.py::many[{n:02}]": result(1, 0, 0, {}) for n in range(LONG_TABLE - 1)}
    # short enough: every test
    assert (len(summary_lines({**many, "t.py::over": RESULTS["t.py::over"]}, "auto"))
            == LONG_TABLE + 2)
    results = {**many, "t.py::within": RESULTS["t.py::within"], "t.py::over": RESULTS["t.py::over"]}
    assert summary_lines(results, "auto") == [
        "compiles  recompiles  graph breaks  budget                    verdict      test",
        "       3           1             1  recompiles<=0, breaks<=1  over budget  t.py::over",
        f"and {LONG_TABLE} more tests that compiled within budget or without one, not listed: "
        f"only failures are listed once more than {LONG_TABLE} tests compiled "
        "(--nocompile-table=all lists every one)",
        "t.py::over: f recompiled: 0/0: n == 2",
    ]
    assert len(summary_lines(results, "all")) == LONG_TABLE + 3
    assert summary_lines(many, "failures") == [
        f"no test over budget; {LONG_TABLE - 1} tests compiled within budget or without one "
        "(--nocompile-table=all lists them)"]


def test_recompiles_outside_the_call_are_said_when_the_table_does_not_show_the_test() -> None:
    setup_recompile = {"function": "scale", "filename": "t.py", "line": 3, "phase": "setup",
                       "reasons": [], "user_code": None}
    fixture = TestResult({kind.key: 0 for kind in KINDS},
                         {**{kind.key: None for kind in KINDS}, "recompiles": 0}, Verdict.WITHIN,
                         details={**RESULTS["t.py::quiet"].details,
                                  "recompile_events": [setup_recompile]})
    assert summary_lines({"t.py::fixture": fixture}) == [
        "no test compiled in its call phase (1 watched)",
        "t.py::fixture: 1 recompile in setup, not counted (budgets count the call phase; "
        "a fixture's compiles are outside it)",
    ]
    every_test = {f"t.py::test[{n}]": fixture for n in range(LONG_TABLE + 1)}
    assert summary_lines(every_test) == [
        f"no test compiled in its call phase ({LONG_TABLE + 1} watched)",
        f"{LONG_TABLE + 1} tests recompiled or broke graphs only outside the call (in fixtures), "
        "not counted (--nocompile-table=all lists them)",
    ]
    assert len(summary_lines(every_test, "all")) == LONG_TABLE + 2


def test_a_count_not_read_is_n_a_in_the_table_and_null_in_json_whatever_columns_show() -> None:
    counts = {**{kind.key: 0 for kind in KINDS}, "compiles": 1}
    budgeted = TestResult({**counts, "compile_seconds": 2.5, "cache_misses": 1},
                          {"compile_seconds": 30, "cache_misses": 2}, Verdict.WITHIN,
                          shown={"cache_misses": {"inductor.fxgraph_cache_hit": 1.0}})
    not_read = {kind.key: NOT_READ for kind in HEALTH_KINDS}
    unread = TestResult(counts, {"recompiles": 0}, Verdict.WITHIN, unmeasured=not_read)
    assert summary_lines({"t.py::budgeted": budgeted, "t.py::unread": unread}) == [
        "compiles  recompiles  graph breaks  compile s  cache misses  cache hits  "
        "budget                    verdict        test",
        "       1           0             0       2.50             1           1  "
        "compile s<=30, misses<=2  within budget  t.py::budgeted",
        "       1           0             0        n/a           n/a         n/a  "
        "recompiles<=0             within budget  t.py::unread",
    ]
    entry = TestResult.from_dict(unread.to_dict()).to_dict()  # as xdist carries it
    assert [entry[kind.key] for kind in HEALTH_KINDS] == [None] * len(HEALTH_KINDS)
    assert (entry["compiles"], entry["not_measured"]["compile_seconds"]) == (1, NOT_READ)


def test_which_kinds_a_test_read_follows_the_signals_wanted_when_its_call_began() -> None:
    every = every_kinds_signals()
    assert kinds_not_read(every, True) == {}  # --nocompile-report, the JSON report: every kind
    # No record attached: the syncs before dynamo came were missed.
    assert list(kinds_not_read(every, False)) == ["syncs"]
    assert list(kinds_not_read(frozenset(), True)) == [kind.key for kind in HEALTH_KINDS]
    assert list(kinds_not_read(frozenset(COMPILE_SECONDS_KIND.health_signals), True)) == [
        kind.key for kind in HEALTH_KINDS if kind is not COMPILE_SECONDS_KIND]
    from pytest_nocompile.observe.capture import DYNAMO_LOGS

    # The kinds heard without dynamo are those whose sources arm without it.
    heard_without = [kind for kind in HEALTH_KINDS if not DYNAMO_LOGS.needs_dynamo(kind.signals)]
    assert heard_without == list(HEARD_WITHOUT_DYNAMO)
    assert DYNAMO_LOGS.needs_dynamo(CACHE_MISSES.signals)
    assert not DYNAMO_LOGS.needs_dynamo(SYNCS.health_signals)


# A user's tiny decoder LM, compiled, on (batch, seq) input; one test budgets compile time, one
# syncs, one neither, and each reads the loss at every step. On CPU, syncs are measured nowhere;
# compile time only once a test budgets it.
TINY_LM = '''
import pytest
import torch


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.head = torch.nn.Linear(16, 64)

    def forward(self, idx):
        return self.head(self.embed(idx))


def train(steps=3):
    model = torch.compile(TinyLM(), backend="eager")
    for _ in range(steps):
        logits = model(torch.randint(0, 64, (2, 8)))
        assert logits.mean().item() == logits.mean().item()  # a sync at every step, on a GPU


@pytest.mark.max_recompiles(0)
def test_plain():
    train()


@pytest.mark.max_compile_seconds(60)
def test_compile_budget():
    train()


@pytest.mark.max_syncs(0)
def test_sync_budget():
    train()
'''


def _row(result: pytest.RunResult, test: str) -> dict[str, str]:
    lines = result.stdout.lines
    start = next(index for index, line in enumerate(lines) if line.startswith("compiles  "))
    header = lines[start].replace("graph breaks", "graph_breaks").replace("compile s", "compile_s")
    columns = header.split()
    row = next(line for line in lines[start:] if line.endswith(f"test_lm.py::{test}")).split()
    return dict(zip(columns[:5], row[:5]))


def test_the_table_says_n_a_for_a_count_the_run_did_not_read_and_json_null(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    if pytest.importorskip("torch").cuda.is_available():
        pytest.skip("a machine with CUDA observes syncs")
    pytester.makepyfile(test_lm=TINY_LM)
    result = run("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    # Before the first test that budgets compile time, it is not read: no 0.00 for a compile that
    # took a second.
    assert _row(result, "test_plain") == {
        "compiles": "1", "recompiles": "0", "graph_breaks": "0", "compile_s": "n/a", "syncs": "n/a"}
    assert _row(result, "test_sync_budget")["syncs"] == "n/a"  # measured nowhere on CPU
    # Read from the budgeted test on: its real figure.
    assert float(_row(result, "test_sync_budget")["compile_s"]) > 0
    # A JSON report reads every count: the real figures, and null.
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    entries = json.loads((pytester.path / "report.json").read_text())["tests"]
    tests = {test["nodeid"]: test for test in entries}
    plain = tests["test_lm.py::test_plain"]
    assert (plain["compiles"], plain["syncs"], plain["compile_seconds"] > 0) == (1, None, True)
    assert plain["not_measured"]["syncs"].startswith("syncs were not observed")


def test_json_document_carries_outcomes_and_every_count() -> None:
    document = json_document(RESULTS, {"t.py::over": [("call", "failed", False)]},
                             {"torch_version": "2.x"})
    tests = {entry["nodeid"]: entry for entry in document["tests"]}
    assert document["format"] == "pytest-nocompile-report/1" and document["torch_version"] == "2.x"
    assert ((tests["t.py::over"]["outcome"], tests["t.py::within"]["outcome"])
            == ("failed", "passed"))
    assert {key: tests["t.py::over"][key] for key in ("compiles", "recompiles", "graph_breaks",
                                                      "max_compiles", "max_graph_breaks")} == {
        "compiles": 3, "recompiles": 1, "graph_breaks": 1,
        "max_compiles": None, "max_graph_breaks": 1}


@pytest.mark.parametrize(("reports", "outcome"), [
    ([], "passed"),
    ([("setup", "failed", False)], "error"),
    ([("call", "skipped", True)], "xfailed"),
    ([("call", "passed", True)], "xpassed"),
    ([("setup", "skipped", False)], "skipped"),
])
def test_outcomes(reports: list[tuple[str, str, bool]], outcome: str) -> None:
    assert outcome_of(reports) == outcome


def test_baseline_round_trip_and_comparison(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(saved_baseline(RESULTS, "2.13.0+cpu").document))
    saved = load_baseline(str(path))
    assert saved.versions["2.13"]["t.py::over"] == {"compiles": 3, "recompiles": 1,
                                                    "graph_breaks": 1, "cudagraph_rerecords": 0,
                                                    "cudagraph_skips": 0, "reasons": []}
    later = {**RESULTS, "t.py::within": result(3, 2, 0, {"recompiles": 1}),
             "t.py::new": result(0, 0, 0, {})}
    del later["t.py::quiet"]
    comparison = compare(saved, later, "2.13.1")
    assert comparison.regressed
    assert comparison.lines() == [
        "compared with the entries for torch 2.13",
        "t.py::within: compiles rose 2 -> 3, recompiles rose 1 -> 2",
        "new test (not in baseline): t.py::new",
        "1 test of the baseline did not run here (deselected, not collected, run by another shard, "
        "or removed): not compared",
    ]
    assert (comparison.verdict("b.json")
            == "2 counts rose against the baseline b.json, in 1 test (listed above)")
    assert compare(saved, RESULTS, "2.13.0").lines() == ["compared with the entries for torch 2.13",
                                                         "no change against the baseline"]


def test_a_save_keeps_what_did_not_run_or_failed_and_its_line_says_how_many() -> None:
    previous = Baseline({"2.13": {"t.py::gone": {"recompiles": 4}, "t.py::over": {"recompiles": 0}},
                         "2.4": {"t.py::gone": {"recompiles": 5}}})
    saved = saved_baseline(RESULTS, "2.13.0+cpu", previous,
                           failed={"t.py::over", "t.py::not_a_result"})
    entries = saved.document["torch"]
    assert sorted(entries["2.13"]) == ["t.py::gone", "t.py::over", "t.py::quiet",
                                       "t.py::unbudgeted", "t.py::within"]
    assert entries["2.13"]["t.py::gone"] == {"recompiles": 4}
    assert entries["2.13"]["t.py::over"] == {"recompiles": 0}
    assert entries["2.4"] == {"t.py::gone": {"recompiles": 5}}
    assert saved.line("b.json") == ("nocompile: baseline b.json (torch 2.13): "
                                    "3 tests saved, 1 kept (not run), 1 not saved (failed)")
    replaced = saved_baseline(RESULTS, "2.13.0+cpu", previous, failed={"t.py::over"}, replace=True)
    assert sorted(replaced.document["torch"]["2.13"]) == ["t.py::over", "t.py::quiet",
                                                          "t.py::unbudgeted", "t.py::within"]
    assert replaced.document["torch"]["2.4"] == {"t.py::gone": {"recompiles": 5}}
    assert replaced.line("b.json") == ("nocompile: baseline b.json (torch 2.13): "
                                       "3 tests saved, 1 dropped (not run), 1 not saved (failed)")
    first = saved_baseline({"t.py::quiet": RESULTS["t.py::quiet"]}, "2.13.0+cpu")
    assert first.line("b.json") == "nocompile: baseline b.json (torch 2.13): 1 test saved"


def test_a_skipped_test_keeps_its_entry_and_one_without_gets_its_counts() -> None:
    previous = Baseline({"2.13": {"t.py::unbudgeted": {"recompiles": 7}}})
    for replace in (False, True):
        saved = saved_baseline(RESULTS, "2.13.0+cpu", previous,
                               skipped={"t.py::unbudgeted", "t.py::quiet"}, replace=replace)
        entries = saved.document["torch"]["2.13"]
        assert entries["t.py::unbudgeted"] == {"recompiles": 7}
        assert entries["t.py::quiet"]["recompiles"] == 0
        assert saved.line("b.json") == ("nocompile: baseline b.json (torch 2.13): "
                                        "3 tests saved, 1 kept (not run)")


def test_saving_over_a_counts_only_baseline_keeps_its_entries_as_this_torchs() -> None:
    gone = {"compiles": 1, "recompiles": 0, "graph_breaks": 0}
    previous = Baseline({ANY_TORCH: {"t.py::gone": gone}}, counts_only=True)
    saved = saved_baseline(RESULTS, "2.13.0+cpu", previous)
    assert saved.document["format"] == "pytest-nocompile-baseline/2"
    assert list(saved.document["torch"]) == ["2.13"]
    assert saved.document["torch"]["2.13"]["t.py::gone"] == gone
    assert saved.line("b.json") == ("nocompile: baseline b.json (torch 2.13): "
                                    "4 tests saved, 1 kept (not run)")


@pytest.mark.parametrize("tests", [{"t": {"recompiles": "1"}}, {"t": {}},
                                   {"t": {"compiles": True, "recompiles": 0}}, []])
def test_corrupt_baselines_are_refused(tmp_path: Path, tests: object) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"format": "pytest-nocompile-baseline/1", "tests": tests}))
    with pytest.raises(BaselineError, match="is corrupt"):
        load_baseline(str(path))
