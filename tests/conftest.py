"""The ``run`` fixture: pytest with the plugin on a user's test file, forked from a fork server or
in a subprocess."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import pytest
from slowest_first import dealt_slowest_first

from forked_runs import SUBPROCESS_SWITCH, ForkServer, forking
from nocompile_testing import OUTER_RUN_VARIABLES, RunPytest

FRESH_INTERPRETER = "fresh_interpreter"  # the marker, registered in pyproject.toml
# The environment as each test starts, before its fixtures change it: the fork server's.
TEST_START_ENVIRONMENT = pytest.StashKey[dict[str, str]]()
# What a spawned gloo rank's abort at its exit reads as (torch.multiprocessing.spawn's error).
RANK_ABORTED_AT_EXIT = "terminated with signal SIGABRT"


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest tests first, dealt to xdist's workers in turn (:func:`dealt_slowest_first`);
    tests that spawn ranks rerun where one aborted at its exit, and for nothing else."""
    if config.pluginmanager.hasplugin("rerunfailures"):
        for item in items:
            if item.get_closest_marker("spawns_ranks") is not None:
                item.add_marker(pytest.mark.flaky(reruns=2, only_rerun=[RANK_ABORTED_AT_EXIT]))
    items[:] = dealt_slowest_first(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[TEST_START_ENVIRONMENT] = {name: value for name, value in os.environ.items()
                                          if name not in OUTER_RUN_VARIABLES}


@pytest.fixture(scope="session")
def session_fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """This process's fork server, started by the first inner run that can be forked; ended with the
    session."""
    server = ForkServer(tmp_path_factory.mktemp("fork-server") / "server.log")
    yield server
    server.close()


@pytest.fixture
def fork_server(session_fork_server: ForkServer, request: pytest.FixtureRequest) -> ForkServer:
    """This process's fork server, in the environment this test started with (restarted if that
    changed)."""
    session_fork_server.follow(request.node.stash[TEST_START_ENVIRONMENT])
    return session_fork_server


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
        fork_server: ForkServer) -> RunPytest:
    """Run pytest with the plugin on the files written to ``pytester``, as ``python -mpytest`` in a
    new process.

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
