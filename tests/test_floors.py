"""Floors (``min_compiles``): the rule, the verdict on a record, the failure text. Pure code, no
torch."""

from __future__ import annotations

from test_result import recorded

from nocompile_testing import failure_of, judge_record, with_health_counts
from pytest_nocompile.judge.budget import RecompileBudget
from pytest_nocompile.judge.result import TestResult, Verdict, count_properties, idle_result
from pytest_nocompile.judge.verdict import over_budget
from pytest_nocompile.vocabulary.kinds import COMPILES, MIN_COMPILES

NOTHING_RECORDED = ("    nothing recorded says why; dynamo compiles no graph when the compiled "
                    'code does not run, runs under torch.compiler.disable or '
                    'set_stance("force_eager"), runs from dynamo\'s cache (compiled before the '
                    'call: in a fixture, or by an earlier test without isolation), or holds no '
                    'tensor operation')
FLOOR = RecompileBudget.of({"min_compiles": 2}, sources={"min_compiles": "marker on the test"})


def test_a_floor_fails_below_n_and_never_above() -> None:
    assert (over_budget(MIN_COMPILES, 1, 2) and not over_budget(MIN_COMPILES, 2, 2)
            and not over_budget(MIN_COMPILES, 9, 2))
    assert not over_budget(MIN_COMPILES, 0, None)
    # A limit hit is a max_recompiles matter; a swallowed compile error fails the floor only.
    assert (not over_budget(MIN_COMPILES, 3, 2, limit_hit=True)
            and over_budget(MIN_COMPILES, 3, 2, compile_error=True))
    assert not over_budget(COMPILES, 0, 2, compile_error=True)


def test_headline_and_budget_cell() -> None:
    assert MIN_COMPILES.headline(0, 1, "min_compiles(1)") == "0 compiles < min_compiles(1)"
    assert MIN_COMPILES.headline(3, 1, "min_compiles(1)") == (
        "3 compiles within min_compiles(1), but dynamo swallowed a compile error")
    assert MIN_COMPILES.budget_cell(1) == "compiles>=1" and COMPILES.budget_cell(4) == "compiles<=4"
    assert MIN_COMPILES.marker_help.startswith(
        "min_compiles(N): fail the test when its call phase has fewer than N graphs")


def test_the_verdict_on_a_record() -> None:
    short = judge_record(recorded(FLOOR, graphs=1))
    assert (short.verdict, short.over, short.cause) == (Verdict.OVER, ("min_compiles",),
                                                        "1 compile < min_compiles(2) (marker "
                                                        "on the test)")
    assert judge_record(recorded(FLOOR, graphs=2)).verdict is Verdict.WITHIN
    # Setup's compiles (a warm-up in a fixture) are not the call's.
    assert judge_record(recorded(FLOOR, setup=3, graphs=1)).over == ("min_compiles",)
    # Beside a max_ budget: both judged, in table order.
    both = RecompileBudget.of({"compiles": 0, "min_compiles": 2})
    assert judge_record(recorded(both, graphs=1)).over == ("compiles", "min_compiles")


def test_a_floor_has_no_count_of_its_own() -> None:
    result = judge_record(recorded(FLOOR, graphs=3))
    assert result.counts == with_health_counts({"compiles": 3, "recompiles": 0, "graph_breaks": 0})
    assert ("nocompile_min_compiles", 3) not in count_properties(result)
    document = result.to_dict()
    assert (document["compiles"], document["min_compiles"],
            document["max_compiles"]) == (3, 2, None)
    assert TestResult.from_dict(document) == result
    assert result.budget_text() == "compiles>=2"


def test_a_test_that_recorded_nothing_misses_a_floor_above_zero() -> None:
    idle = idle_result(FLOOR)
    assert (idle.verdict, idle.over, idle.cause) == (Verdict.OVER, ("min_compiles",),
                                                     "0 compiles < min_compiles(2) (marker "
                                                     "on the test)")
    assert idle_result(RecompileBudget.of({"min_compiles": 0})).verdict is Verdict.WITHIN
    assert (RecompileBudget.of({"min_compiles": 1}).has_floor
            and not RecompileBudget.of({"compiles": 1}).has_floor)


def test_the_failure_says_why_so_little_compiled() -> None:
    nothing = recorded(FLOOR)
    assert failure_of(nothing, ("min_compiles",)).splitlines() == [
        "0 compiles < min_compiles(2) (marker on the test)",
        "why:",
        NOTHING_RECORDED,
    ]
    limited = recorded(FLOOR, limit=True)
    assert failure_of(limited, ("min_compiles",), stance="force_eager").splitlines()[1:] == [
        "why:",
        "    dynamo hit config.recompile_limit (8) for 'step' (adam.py:214): later calls "
        "run uncompiled",
        '    torch.compiler.set_stance("force_eager") was in force when the call ended',
    ]
    # Something compiled, too little: nothing more is known.
    assert failure_of(recorded(FLOOR, graphs=1), ("min_compiles",)) == (
        "1 compile < min_compiles(2) (marker on the test)")
