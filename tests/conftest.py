"""The ``run`` fixture: pytest with the plugin on a user's test file, forked from a fork server or in a subprocess."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Optional

import pytest

from forked_runs import SUBPROCESS_SWITCH, ForkServer, forking
from nocompile_testing import RunPytest

# The outer run's: an inner run sets its own per test.
OUTER_RUN_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_NOCOMPILE_EVENTS")
FRESH_INTERPRETER = "fresh_interpreter"  # the marker, registered in pyproject.toml
# The environment as each test starts, before its fixtures change it: the fork server's.
TEST_START_ENVIRONMENT = pytest.StashKey[dict[str, str]]()
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


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest tests first, dealt to xdist's workers in turn (:func:`dealt_slowest_first`)."""
    items[:] = dealt_slowest_first(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[TEST_START_ENVIRONMENT] = {name: value for name, value in os.environ.items() if name not in OUTER_RUN_VARIABLES}


@pytest.fixture(scope="session")
def session_fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """This process's fork server, started by the first inner run that can be forked; ended with the session."""
    server = ForkServer(tmp_path_factory.mktemp("fork-server") / "server.log")
    yield server
    server.close()


@pytest.fixture
def fork_server(session_fork_server: ForkServer, request: pytest.FixtureRequest) -> ForkServer:
    """This process's fork server, in the environment this test started with (restarted if that changed)."""
    session_fork_server.follow(request.node.stash[TEST_START_ENVIRONMENT])
    return session_fork_server


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, fork_server: ForkServer) -> RunPytest:
    """Run pytest with the plugin on the files written to ``pytester``, as ``python -mpytest`` in a new process.

    Never in-process: pytester's in-process mode drops the modules a run
    imported, and torch does not survive being imported twice in one process.
    Only this plugin is loaded (``-p nocompile`` with autoload off), and the
    outer run's xdist variables are dropped, so other installed plugins cannot
    change what the inner run prints.

    The process is forked from this worker's fork server (see
    ``forked_runs.py``), which has imported torch but not ``torch._dynamo``, so
    that a run does not pay for importing torch again. It is a real subprocess
    instead when the test is marked ``fresh_interpreter`` (its inner run must
    not find torch imported), when ``NOCOMPILE_TESTS_SUBPROCESS=1`` is set (to
    compare both ways), and whenever a fork could behave differently: the test
    changed an environment variable that Python, torch or the plugin's start-up
    hook read at start-up (``TORCH_LOGS``, ``TMPDIR``, ``PYTEST_NOCOMPILE_EVENTS``
    ...), or wrote a module that would shadow one the server imported. The
    outer test's captured output says which, after pytester's "running:" line.
    """
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in OUTER_RUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    marker = request.node.get_closest_marker(FRESH_INTERPRETER)
    fork = marker is None and os.environ.get(SUBPROCESS_SWITCH) != "1"

    def run_pytest(*args: str) -> pytest.RunResult:
        with forking(pytester, fork_server) if fork else contextlib.nullcontext():
            return pytester.runpytest_subprocess("-p", "nocompile", "-p", "no:cacheprovider", *args)

    return run_pytest
