"""The budget kinds' table and budget resolution: pure code, no torch, no pytest run."""

from __future__ import annotations

import pytest

from pytest_nocompile.judge.budget import (
    BudgetUsageError,
    MarkerBudget,
    RecompileBudget,
    budget_from_marker,
    parse_option_count,
    resolve,
    with_markers,
)
from pytest_nocompile.vocabulary.kinds import (
    COMPILES,
    COUNTED_KINDS,
    GRAPH_BREAKS,
    KINDS,
    KINDS_BY_KEY,
    KINDS_BY_MARKER,
    RECOMPILES,
    BudgetKind,
)


def test_every_kind_has_distinct_names() -> None:
    for attribute in ("key", "marker", "option", "assertion"):
        values = [getattr(kind, attribute) for kind in KINDS]
        assert len(set(values)) == len(KINDS), attribute
    # What names a count (noun, column, short) is distinct per count: a floor shares its counted
    # kind's.
    for attribute in ("noun", "column", "short"):
        values = [getattr(kind, attribute) for kind in COUNTED_KINDS]
        assert len(set(values)) == len(COUNTED_KINDS), attribute
    for floor in (kind for kind in KINDS if kind.same_count_as):
        counted = KINDS_BY_KEY[floor.same_count_as]
        assert ((floor.noun, floor.short, floor.events)
                == (counted.noun, counted.short, counted.events))
    assert set(KINDS_BY_MARKER) == {"max_recompiles", "max_graph_breaks", "max_compiles",
                                    "min_compiles", "max_compile_seconds",
                                    "max_compile_instructions", "max_cache_misses",
                                    "max_cudagraph_rerecords", "max_cudagraph_skips",
                                    "max_syncs", "max_kernels"}
    assert [kind.option for kind in KINDS] == ["--max-compiles", "--max-recompiles",
                                               "--max-graph-breaks", "--min-compiles",
                                               "--max-compile-seconds",
                                               "--max-compile-instructions", "--max-cache-misses",
                                               "--max-cg-rerecords", "--max-cg-skips",
                                               "--max-syncs", "--max-kernels"]


def test_marker_forms_and_help_come_from_the_entry() -> None:
    assert RECOMPILES.marker_form == ("@pytest.mark.max_recompiles(N), N an int >= 0 or None, "
                                      "with optional isolate=True/False and strict=True/False")
    assert GRAPH_BREAKS.marker_form == ("@pytest.mark.max_graph_breaks(N), N an int >= 0 or None, "
                                        "with optional user_only=True/False")
    assert RECOMPILES.marker_help.startswith(
        "max_recompiles(N, isolate=True, strict=False): fail the test when its call phase")
    assert COMPILES.marker_help.startswith(
        "max_compiles(N): fail the test when its call phase has more than N graphs compiled")
    assert all(kind.marker_help.endswith("[pytest-nocompile]") for kind in KINDS)


@pytest.mark.parametrize(("kind", "count", "allowed", "exact", "headline"), [
    (RECOMPILES, 3, 0, False, "3 recompiles > max_recompiles(0)"),
    (COMPILES, 1, 2, True, "1 compile != max_compiles(2)"),
    (GRAPH_BREAKS, 1, 0, False, "1 graph break > max_graph_breaks(0)"),
    (RECOMPILES, 2, 8, False,
     "2 recompiles within max_recompiles(8), but dynamo hit its recompile limit"),
])
def test_headlines(kind: BudgetKind, count: int, allowed: int, exact: bool, headline: str) -> None:
    assert kind.headline(count, allowed, f"{kind.marker}({allowed})", exact) == headline


def test_budget_reads_each_kind_by_key_and_by_marker_name() -> None:
    budget = RecompileBudget.of({"recompiles": 0, "graph_breaks": None, "compiles": 2},
                                isolate=False)
    # table order, unbudgeted kinds dropped
    assert budget.limits == (("compiles", 2), ("recompiles", 0))
    assert ((budget.allowed(RECOMPILES), budget.allowed(GRAPH_BREAKS), budget.max_compiles)
            == (0, None, 2))
    assert budget.budgeted and not RecompileBudget().budgeted
    assert budget.describe(COMPILES) == "max_compiles(2)"
    # cache keys
    assert hash(budget) == hash(RecompileBudget.of({"compiles": 2, "recompiles": 0}, isolate=False))
    with pytest.raises(AttributeError, match="no attribute 'max_everything'"):
        budget.max_everything  # noqa: B018


def test_markers_override_the_run_and_none_opts_out() -> None:
    run = RecompileBudget.of({"recompiles": 0, "compiles": 5})
    test = with_markers(run, {"recompiles": MarkerBudget(None), "graph_breaks": MarkerBudget(1),
                              "compiles": MarkerBudget(3, strict=True)})
    assert test.limits == (("compiles", 3), ("graph_breaks", 1))
    assert (test.isolate, test.strict) == (None, None)  # only max_recompiles carries isolate/strict
    assert with_markers(run, {"recompiles": MarkerBudget(1, isolate=False, strict=True)}) == (
        RecompileBudget((("compiles", 5), ("recompiles", 1)), isolate=False, strict=True))
    assert (resolve(1, 2, None) == 2 and resolve(1, None, None) == 1
            and resolve(1, 2, MarkerBudget(None)) is None)


def test_user_only_is_the_graph_break_markers_over_the_runs() -> None:
    run = RecompileBudget.of({"graph_breaks": 0, "compiles": 1}, user_only=True)
    assert run.describe(GRAPH_BREAKS) == "max_graph_breaks(0, user_only=True)"
    assert run.describe(COMPILES) == "max_compiles(1)"
    assert with_markers(run, {"compiles": MarkerBudget(2)}).user_only is True
    counting_all = budget_from_marker((0,), {"user_only": False}, GRAPH_BREAKS)
    assert with_markers(run, {"graph_breaks": counting_all}).user_only is False
    mine_only = budget_from_marker((1,), {"user_only": True}, GRAPH_BREAKS)
    marked = with_markers(RecompileBudget(), {"graph_breaks": mine_only})
    assert marked.user_only and marked.counts_user_only(GRAPH_BREAKS)
    assert not marked.counts_user_only(COMPILES)


@pytest.mark.parametrize(("kind", "args", "kwargs", "problem"), [
    (COMPILES, (), {},
     "max_compiles(): expected exactly one positional N, got 0; use @pytest.mark.max_compiles(N)"),
    (COMPILES, (0,), {"exact": True}, "max_compiles(0, exact=True): unknown keyword exact;"),
    (RECOMPILES, (0,), {"strict": "yes"},
     "max_recompiles(0, strict='yes'): strict must be True or False, got 'yes';"),
    (GRAPH_BREAKS, (True,), {}, "max_graph_breaks(True): expected an int >= 0, got True (bool);"),
    (GRAPH_BREAKS, (0,), {"user_only": 1},
     "max_graph_breaks(0, user_only=1): user_only must be True or False, got 1;"),
    (RECOMPILES, (0,), {"user_only": True},
     "max_recompiles(0, user_only=True): unknown keyword user_only;"),
])
def test_bad_markers_name_what_was_given_and_the_accepted_form(
    kind: BudgetKind, args: tuple[object, ...], kwargs: dict[str, object], problem: str
) -> None:
    with pytest.raises(BudgetUsageError) as raised:
        budget_from_marker(args, kwargs, kind)
    assert str(raised.value).startswith(problem)
    assert str(raised.value).endswith(kind.marker_form)


def test_option_counts() -> None:
    assert parse_option_count(" 3 ", "--max-compiles") == 3
    with pytest.raises(BudgetUsageError, match=r"--max-compiles: expected an int >= 0, got 'x'"):
        parse_option_count("x", "--max-compiles")
    with pytest.raises(BudgetUsageError,
                       match=r"ini key max_compiles: expected an int >= 0, got -1"):
        parse_option_count("-1", "ini key max_compiles")


def test_each_kind_raises_its_own_exception_under_one_base() -> None:
    import pytest_nocompile
    from pytest_nocompile import (
        BudgetExceeded,
        CacheMissBudgetExceeded,
        CompileBudgetExceeded,
        CompileInstructionBudgetExceeded,
        CompileTimeBudgetExceeded,
        CudagraphRerecordBudgetExceeded,
        CudagraphSkipBudgetExceeded,
        GraphBreakBudgetExceeded,
        KernelBudgetExceeded,
        RecompileBudgetExceeded,
        SyncBudgetExceeded,
        TooFewCompiles,
    )

    assert [kind.exceeded for kind in KINDS] == [CompileBudgetExceeded, RecompileBudgetExceeded,
                                                 GraphBreakBudgetExceeded, TooFewCompiles,
                                                 CompileTimeBudgetExceeded,
                                                 CompileInstructionBudgetExceeded,
                                                 CacheMissBudgetExceeded,
                                                 CudagraphRerecordBudgetExceeded,
                                                 CudagraphSkipBudgetExceeded,
                                                 SyncBudgetExceeded, KernelBudgetExceeded]
    assert all(issubclass(kind.exceeded, BudgetExceeded)
               and issubclass(kind.exceeded, AssertionError) for kind in KINDS)
    # Code written when every kind (these three) raised RecompileBudgetExceeded still catches each
    # of them with it; kinds added since never raised it.
    assert all(issubclass(kind.exceeded, RecompileBudgetExceeded)
               for kind in (COMPILES, RECOMPILES, GRAPH_BREAKS))
    # The old import path still works.
    from pytest_nocompile.assertions import RecompileBudgetExceeded as old_path

    assert old_path is RecompileBudgetExceeded
    assert {kind.exceeded.__module__ for kind in KINDS} == {"pytest_nocompile.exceptions"}
    assert all(getattr(pytest_nocompile, kind.exceeded.__name__) is kind.exceeded for kind in KINDS)
