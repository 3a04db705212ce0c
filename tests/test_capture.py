"""Capture leaves torch as it found it, prints nothing, keeps the user's own logs, and agrees with
torch's metrics."""

from __future__ import annotations

import pytest

from nocompile_testing import HAS_RECOMPILE_REASON_METRIC, RECOMPILE_ONCE, RunPytest, expect_lines

# An inner conftest that snapshots every torch global the plugin could touch
# around each test (outermost wrapper) and writes any difference to a file.
STATE_CHECK_CONFTEST = '''
import logging, pytest, torch, torch._dynamo
import torch._logging._internal as torch_logging
from torch._dynamo.utils import counters

# torch removes its lazy trace handler at the first compile of the process:
# compile once here so that torch's own change is not blamed on a test.
torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
torch._dynamo.reset()

def snapshot():
    state = torch_logging.log_state
    loggers = {
        name: (logger.level, logger.propagate, tuple(map(id, logger.handlers)),
               tuple(map(id, logger.filters)))
        for name, logger in list(logging.root.manager.loggerDict.items())
        if name.startswith("torch") and isinstance(logger, logging.Logger)
    }
    return {
        "artifacts": sorted(state.artifact_names),
        "levels": sorted(state.log_qname_to_level.items()),
        "loggers": loggers,
        "config": {key: repr(value)
                   for key, value in torch._dynamo.config.get_config_copy().items()},
        # torch < 2.6 has no compile stance
        "stance": repr(getattr(torch._dynamo.eval_frame, "_stance", None)),
        # The health sources swap the class of torch's counters while armed: put back after each
        # test.
        "counters": (repr(counters.default_factory),
                     sorted({type(value).__name__ for value in counters.values()})),
    }

def differences(before, after):
    found = []
    for key in ("artifacts", "levels", "config", "stance", "counters"):
        if before[key] != after[key]:
            found.append(key)
    for name, settings in before["loggers"].items():
        if after["loggers"].get(name) != settings:
            found.append(name)
    return found

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    before = snapshot()
    try:
        return (yield)
    finally:
        with open("state-differences.txt", "a") as out:
            out.write(f"{item.name}: {differences(before, snapshot())}\\n")
'''

MIXED = RECOMPILE_ONCE + '''
@pytest.mark.max_recompiles(1)
def test_passing():
    recompile_once()

@pytest.mark.max_recompiles(0)
def test_budget_failure():
    recompile_once()

@pytest.mark.max_recompiles(0)
def test_error():
    recompile_once()
    raise RuntimeError("boom")

def test_fixture(nocompile_assert_max_recompiles):
    with nocompile_assert_max_recompiles(0):
        recompile_once()

@pytest.mark.max_recompiles(-1)
def test_bad_marker():
    pass

def test_unwatched():
    recompile_once()
'''


def test_torch_state_is_identical_before_and_after_every_test(pytester: pytest.Pytester,
                                                              run: RunPytest) -> None:
    pytester.makeconftest(STATE_CHECK_CONFTEST)
    pytester.makepyfile(test_mixed=MIXED)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=2, failed=3, errors=1)
    lines = (pytester.path / "state-differences.txt").read_text().splitlines()
    assert lines == [f"{name}: []" for name in
                     ("test_passing", "test_budget_failure", "test_error", "test_fixture",
                      "test_bad_marker", "test_unwatched")]


def test_state_check_detects_a_leak(pytester: pytest.Pytester, run: RunPytest) -> None:
    # The check above must be able to fail: a test that leaves the artifact on is caught.
    pytester.makeconftest(STATE_CHECK_CONFTEST)
    pytester.makepyfile('''
        import torch._logging._internal as torch_logging
        def test_leaks():
            torch_logging.log_state.enable_artifact("recompiles")
    ''')
    run().assert_outcomes(passed=1)
    assert (pytester.path / "state-differences.txt").read_text() == "test_leaks: ['artifacts']\n"


def test_nothing_is_printed_for_passing_and_failing_tests(pytester: pytest.Pytester,
                                                          run: RunPytest) -> None:
    pytester.makepyfile(test_mixed=MIXED)
    result = run("-s", "-p", "no:logging")  # -s: anything printed would reach the output
    assert "Recompiling function" not in result.stdout.str() + result.stderr.str()
    assert "__recompiles" not in result.stdout.str() + result.stderr.str()
    # With the logging plugin on, nothing of ours lands in "Captured log" sections either.
    result = run()
    assert "__recompiles" not in result.stdout.str()


USER_LOGS = '''
import pytest, torch

@pytest.mark.max_recompiles(0)
def test_recompiles():
    f = torch.compile(lambda x, n: x * n, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)
'''


def test_user_torch_logs_recompiles_output_stays(pytester: pytest.Pytester, run: RunPytest,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_LOGS", "recompiles")
    pytester.makepyfile(USER_LOGS)
    result = run("-s", "-p", "no:logging")
    result.assert_outcomes(failed=1)
    expect_lines(result, ["1 recompile > max_recompiles(0) (marker on the test)"])
    assert "[__recompiles] Recompiling function <lambda>" in result.stderr.str()


@pytest.mark.parametrize("where", ["conftest", "test"])
def test_user_set_logs_recompiles_output_stays(pytester: pytest.Pytester, run: RunPytest,
                                               where: str) -> None:
    enable = "torch._logging.set_logs(recompiles=True)"
    if where == "conftest":
        pytester.makeconftest(f"import torch\n{enable}\n")
        pytester.makepyfile(USER_LOGS)
    else:
        pytester.makepyfile(USER_LOGS.replace("    f = torch.compile",
                                              f"    {enable}\n    f = torch.compile"))
    result = run("-s", "-p", "no:logging")
    result.assert_outcomes(failed=1)
    expect_lines(result, ["1 recompile > max_recompiles(0) (marker on the test)"])
    assert "[__recompiles] Recompiling function <lambda>" in result.stderr.str()


@pytest.mark.skipif(not HAS_RECOMPILE_REASON_METRIC,
                    reason="torch < 2.7: get_compilation_metrics() entries have no "
                           "recompile_reason")
def test_count_agrees_with_compilation_metrics_and_compile_ids(pytester: pytest.Pytester,
                                                               run: RunPytest) -> None:
    # Independent of the log text: torch's compilation metrics carry a recompile_reason
    # for every recompile, and a recompile's compile id has an attempt number above 0.
    pytester.makepyfile('''
        import torch
        from torch._dynamo.utils import clear_compilation_metrics, get_compilation_metrics

        class Branchy(torch.nn.Module):
            def forward(self, x, n):
                return x * n if self.training else x - n

        def test_cross_check(nocompile_recompiles):
            clear_compilation_metrics()
            m = Branchy()
            f = torch.compile(m, backend="eager")
            f(torch.ones(2), 2)
            f(torch.ones(3), 2)
            f(torch.ones(3, dtype=torch.float64), 2)
            m.eval()
            f(torch.ones(3), 2)
            f(torch.ones(3), 7)
            metrics = [m for m in get_compilation_metrics() if m.recompile_reason is not None]
            assert len(nocompile_recompiles) == len(metrics) >= 4
            for event, metric in zip(nocompile_recompiles, metrics):
                assert event.reasons[0].guard in metric.recompile_reason
                frame, attempt = event.compile_id.split("/")
                assert int(attempt) > 0
    ''')
    run("-p", "no:logging").assert_outcomes(passed=1)


def test_torch_warnings_from_the_plugins_own_reset_do_not_fail_tests(pytester: pytest.Pytester,
                                                                     run: RunPytest) -> None:
    # torch 2.11's reset() imports inductor modules that emit a DeprecationWarning;
    # under -W error that must not become the user's error. Simulate it on any torch.
    pytester.makeconftest('''
        import warnings, torch._dynamo

        original_reset = torch._dynamo.reset

        def reset_that_warns():
            open("reset-ran", "w").close()
            warnings.warn("deprecated thing imported by torch", DeprecationWarning)
            original_reset()

        torch._dynamo.reset = reset_that_warns
    ''')
    pytester.makepyfile('''
        import pytest, torch

        @pytest.mark.max_recompiles(0)
        def test_clean():
            torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))

        @pytest.mark.max_recompiles(0)
        def test_clean_after_a_compile():  # its setup resets: the first test compiled
            torch.compile(lambda x: x + 2, backend="eager")(torch.ones(2))
    ''')
    run("-W", "error", "-p", "no:randomly").assert_outcomes(passed=2)
    assert (pytester.path / "reset-ran").exists()
