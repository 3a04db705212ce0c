"""The suite's order: its slowest tests first, dealt to xdist's workers (tests/conftest.py)."""

from __future__ import annotations

from typing import Optional

import pytest

# The slowest tests of the suite, slowest first (over 100 s each in a run of 2026-12-02 beside six
# other test runs on 2 CPUs: --durations), a parametrized one by its name without the brackets. They
# run first, dealt to the workers in turn (:func:`dealt_slowest_first`): xdist hands tests out in
# collection order (pytest-randomly's, shuffled), and one of these started last could keep one
# worker going for minutes while the other waited.
SLOWEST_FIRST = (
    "tests/test_children.py::test_children_of_every_kind_report_to_their_test",
    "tests/test_children.py::test_fixtures_see_children_and_a_childs_own_torch_logs_still_print",
    "tests/test_readme.py::test_install_lines_work_as_written_in_a_fresh_venv",
    "tests/test_compile_time.py::test_a_real_inductor_compile_shows_inductor_in_the_breakdown",
    "tests/test_children.py::test_ddp_on_gloo_whose_batch_shape_depends_on_the_rank",
    "tests/test_child_lines.py::"
    "test_children_that_exec_exit_hard_cannot_write_or_run_oddly_are_counted_or_said",
    "tests/test_cache_misses.py::"
    "test_the_docs_warm_start_misses_in_a_cold_cache_and_hits_in_a_second_process_sharing_it",
    "tests/test_gating.py::test_a_long_summary_table_lists_only_failures_unless_asked",
    "tests/test_gating.py::test_xdist_budgets_summary_json_and_compare",
    "tests/test_warm_start.py::"
    "test_the_cold_run_misses_the_cache_and_the_warm_run_hits_it_and_misses_nothing",
    "tests/test_same_across_ranks.py::test_ranks_alike_pass_and_the_rank_that_differs_is_named",
    "tests/test_cache_misses.py::test_a_bypass_counts_as_a_miss_with_torchs_reason",
    "tests/test_children.py::test_the_opt_out_watches_the_test_process_only",
    "tests/test_children.py::test_spawned_rank_that_recompiles_fails_the_test_naming_it",
    "tests/test_children.py::test_xdist_workers_watch_their_tests_children",
    "tests/test_exact_counts.py::"
    "test_a_variable_leaked_into_pytests_environment_does_not_blind_the_run",
    "tests/test_exact_counts.py::"
    "test_a_nested_pytest_run_started_by_a_watched_test_watches_its_own_tests",
)


def slowest_first_rank(item: pytest.Item) -> Optional[int]:
    """The test's place in :data:`SLOWEST_FIRST`, or None when it is not one of them."""
    name = item.nodeid.partition("[")[0]
    return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else None


def slowest(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items of :data:`SLOWEST_FIRST`, in its order (a parametrized test's in theirs)."""
    ranked = [(rank, item) for item in items if (rank := slowest_first_rank(item)) is not None]
    return [item for _, item in sorted(ranked, key=lambda pair: pair[0])]


def first_batch_size(tests: int, workers: int) -> int:
    """How many tests xdist's load scheduling sends each worker first: a quarter of its share."""
    return max(tests // workers // 4, 2)


def dealt_slowest_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items``, the slowest dealt in turn to the start of each worker's first batch.

    The others keep their order. Put all first, the slowest would all fall in the first
    worker's batch.
    """
    rest = [item for item in items if slowest_first_rank(item) is None]
    batch = first_batch_size(len(items), workers)
    slowest_items = slowest(items)
    hands = [slowest_items[worker::workers] for worker in range(workers)]
    first_batches: list[pytest.Item] = []
    for hand in hands:
        filler = batch - len(hand[:batch])
        first_batches += hand[:batch] + rest[:filler]
        del rest[:filler]
    return first_batches + [item for hand in hands for item in hand[batch:]] + rest
