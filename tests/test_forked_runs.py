"""The run fixture's fork path: a forked inner run starts as the subprocess it replaces would, or is
not forked.

These tests drive the fork path directly (``forking``), whatever
``NOCOMPILE_TESTS_SUBPROCESS`` says, and compare it with pytester's own
subprocess on the same files.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from forked_runs import ForkServer, forking

# What an inner run's process looks like from the inside, written when pytest configures it.
PROBE_CONFTEST = '''
import json, os, signal, sys
import __main__

def pytest_configure(config):
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    state = {
        "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "cwd": os.getcwd(),
        "environ": dict(os.environ),
        "flags": list(sys.flags), "executable": sys.executable, "stdin": os.read(0, 10).decode(),
        "main": sorted(vars(__main__)), "main_file": __main__.__file__,
        "main_spec": __main__.__spec__.name,
        "stdio": [(s.encoding, s.errors, s.line_buffering, s.isatty())
                  for s in (sys.__stdin__, sys.__stdout__, sys.__stderr__)],
        "fds_0_to_2": [os.readlink(f"/proc/self/fd/{fd}").startswith(("pipe:", "{path}"))
                       for fd in (0, 1, 2)],
        "other_fds": [os.readlink(f"/proc/self/fd/{fd}") for fd in fds
                      if fd > 2 and os.path.exists(f"/proc/self/fd/{fd}")],
        "signals": [repr(signal.getsignal(number))
                    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD)],
        "umask": os.umask(0o022),
        "dynamo": "torch._dynamo" in sys.modules,
        "torch_before_the_tests": "torch" in sys.modules,
    }
    with open(config.getoption("--basetemp") + "-state.json", "w") as out:
        json.dump(state, out)
'''

PROBE_TESTS = '''
import os, sys, torch

def test_threads_and_ops():
    print("threads", torch.get_num_threads(), torch.get_num_interop_threads())
    assert torch.mm(torch.ones(64, 64), torch.ones(64, 64))[0, 0] == 64

def test_fails():
    print("to stdout"); print("to stderr", file=sys.stderr)
    assert os.environ["PYTEST_PROBE"] == "other"
'''


def _probe(pytester: pytest.Pytester) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Run the probe; its result and the state its conftest wrote."""
    before = set(pytester.path.glob("runpytest-*-state.json"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    [written] = set(pytester.path.glob("runpytest-*-state.json")) - before
    state: dict[str, Any] = json.loads(written.read_text())
    # The numbered runpytest-N folder pytester gives each run.
    state["argv"], state["orig_argv"] = ([re.sub(r"runpytest-\d+", "runpytest-N", arg)
                                          for arg in state[key]] for key in ("argv", "orig_argv"))
    return result, state


def _comparable(result: pytest.RunResult) -> list[str]:
    """The run's output lines without its duration."""
    return [re.sub(r"^=+ (.*) in [\d.]+s(?: \(.*\))? =+$", r"\1 in Ns", line)
            for line in result.outlines]


@pytest.fixture
def fork_server(fork_server: ForkServer) -> ForkServer:
    """The conftest's server, for tests of the fork path itself: skipped, saying why, where it
    cannot fork (on torch 2.6, importing what the server preloads imports torch._dynamo, so it
    refuses and every inner run is a subprocess)."""
    if not fork_server.available():
        pytest.skip(f"no fork path here: {fork_server.refusal}")
    return fork_server


def test_a_forked_run_starts_as_its_subprocess_would(
    pytester: pytest.Pytester, fork_server: ForkServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(PROBE_CONFTEST.replace("{path}", str(pytester.path)))
    pytester.makepyfile(test_probe=PROBE_TESTS)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    # pytest-only, so forkable, and not in the server's environment
    monkeypatch.setenv("PYTEST_PROBE", "value")
    umask = os.umask(0o027)  # not the server's: a subprocess inherits this process's
    try:
        subprocess_result, subprocess_state = _probe(pytester)
        with forking(pytester, fork_server):
            forked_result, forked_state = _probe(pytester)
    finally:
        os.umask(umask)
    assert fork_server.refusal is None
    # it was forked
    assert (subprocess_state.pop("torch_before_the_tests"),
            forked_state.pop("torch_before_the_tests")) == (False, True)
    assert forked_state == subprocess_state
    assert forked_state["dynamo"] is False
    assert forked_state["umask"] == 0o027
    assert forked_state["environ"]["PYTEST_PROBE"] == "value"
    assert forked_state["stdin"] == ""
    # Nothing of the server's pipes, the outer run's capture or xdist's channel.
    assert not [fd for fd in forked_state["other_fds"] if fd.startswith(("pipe:", "socket:"))]
    assert forked_result.ret == subprocess_result.ret == pytest.ExitCode.TESTS_FAILED
    assert _comparable(forked_result) == _comparable(subprocess_result)
    assert forked_result.errlines == subprocess_result.errlines
    forked_result.stdout.fnmatch_lines(["test_probe.py threads * *", ".to stdout",
                                        "*1 failed, 1 passed in *"])


@pytest.mark.parametrize("change", ["TORCH_LOGS", "TMPDIR", "PYTEST_NOCOMPILE_EVENTS",
                                    "torch.py", "sitecustomize.py"])
def test_a_run_that_a_fork_could_change_is_a_subprocess(
    pytester: pytest.Pytester, fork_server: ForkServer, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], change: str,
) -> None:
    pytester.makepyfile(
        test_one="import sys\n\ndef test_one():\n    assert 'torch' not in sys.modules\n")
    if change.endswith(".py"):
        # A module beside the tests that the server has imported, or that Python imports at
        # start-up.
        (pytester.path / change).write_text("")
    else:
        monkeypatch.setenv(change, str(pytester.path / "value"))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    with forking(pytester, fork_server):
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)  # in a fresh interpreter: torch is not imported
    why = (f"{change} differs from the fork server's *" if change.isupper()
           else f"{pytester.path / change} would be imported at start-up *")
    [said] = [line.strip() for line in capsys.readouterr().out.splitlines()
              if line.startswith(("    as a subprocess: ", "    forked "))]
    assert fnmatch.fnmatch(said, f"as a subprocess: {why}")


def test_a_forked_run_past_its_timeout_is_killed(
    pytester: pytest.Pytester, fork_server: ForkServer,
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    pytester.makepyfile(test_sleeps="import os, time\n\ndef test_sleeps():\n"
                                    f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                                    "    time.sleep(600)\n")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    with forking(pytester, fork_server), pytest.raises(pytester.TimeoutExpired,
                                                       match="5 second timeout expired running"):
        pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=5)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped by the server
    # The server serves the next run.
    pytester.makepyfile(test_sleeps="def test_passes():\n    pass\n")
    with forking(pytester, fork_server):
        pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_server_follows_a_lasting_change_of_the_tests_environment(
    pytester: pytest.Pytester, fork_server: ForkServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As inductor's first compile sets TORCHINDUCTOR_CACHE_DIR in the tests' process for good: a
    # subprocess would inherit it.
    monkeypatch.setenv("TORCHINDUCTOR_PROBE", "1")
    fork_server.follow(os.environ)
    starts = fork_server.starts
    pytester.makepyfile(test_env="import os, sys\n\ndef test_env():\n"
                                 "    assert os.environ['TORCHINDUCTOR_PROBE'] == '1' "
                                 "and 'torch' in sys.modules\n")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    with forking(pytester, fork_server):
        # forked: torch was imported
        pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert fork_server.starts == starts + 1
