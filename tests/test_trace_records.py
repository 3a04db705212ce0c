"""torch's structured-trace records stay out of pytest's captured logs; everything else stays in."""

from __future__ import annotations

import pytest

from nocompile_testing import RunPytest

# pytest >= 9.1 attaches its capture handlers to non-propagating loggers such
# as torch.__trace; before that the records never reached pytest's capture.
PYTEST_CAPTURES_TRACE = tuple(int(part) for part in pytest.__version__.split(".")[:2]) >= (9, 1)

FAILING_AFTER_A_COMPILE = '''
import logging
import torch

def test_fails_after_compiling():
    f = torch.compile(lambda x: x * 2, backend="eager")
    f(torch.ones(2))
    logging.getLogger("torch._dynamo").warning("a torch record the user should see")
    logging.getLogger("user").warning("a record of the user's own")
    assert False, "the test's own failure"
'''


def _captured_log(result: pytest.RunResult) -> str:
    text = result.stdout.str()
    assert "Captured log call" in text, text
    return text.partition("Captured log call")[2]


def test_trace_records_are_left_out_of_the_report(pytester: pytest.Pytester,
                                                  run: RunPytest) -> None:
    pytester.makepyfile(test_trace_user=FAILING_AFTER_A_COMPILE)
    result = run("--log-level=DEBUG")
    result.assert_outcomes(failed=1)
    log = _captured_log(result)
    assert "torch.__trace" not in log
    assert "WARNING  torch._dynamo:test_trace_user.py:7 a torch record the user should see" in log
    assert "WARNING  user:test_trace_user.py:8 a record of the user's own" in log


@pytest.mark.skipif(not PYTEST_CAPTURES_TRACE,
                    reason="pytest < 9.1 never captured torch.__trace records")
@pytest.mark.parametrize("keep", [["--nocompile-keep-trace-logs"],
                                  ["-o", "nocompile_drop_trace_logs=false"]], ids=["option", "ini"])
def test_the_records_can_be_kept(pytester: pytest.Pytester, run: RunPytest,
                                 keep: list[str]) -> None:
    pytester.makepyfile(test_trace_user=FAILING_AFTER_A_COMPILE)
    result = run("--log-level=DEBUG", *keep)
    result.assert_outcomes(failed=1)
    assert "DEBUG    torch.__trace:" in _captured_log(result)


def test_torch_trace_output_is_intact(pytester: pytest.Pytester, run: RunPytest,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """TORCH_TRACE's own files still get the records pytest's capture no longer shows."""
    trace_dir = pytester.path / "trace"
    monkeypatch.setenv("TORCH_TRACE", str(trace_dir))
    pytester.makepyfile(test_trace_user=FAILING_AFTER_A_COMPILE)
    result = run("--log-level=DEBUG")
    result.assert_outcomes(failed=1)
    assert "torch.__trace" not in _captured_log(result)
    logs = list(trace_dir.glob("*.log"))
    assert logs and any("dynamo_start" in path.read_text() for path in logs), logs
