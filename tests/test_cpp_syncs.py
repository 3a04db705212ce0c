"""max_syncs for the syncs torch warns of outside Python's warning machinery: read from stderr
through a relay, never printed.

DDP's reducer and communication hooks sync where no Python called them: c10's logger writes torch's
warning to fd 2 instead of raising a Python warning. The stand-in here (:data:`FAKE_CPP_SYNCS`, on
top of test_syncs' ``FAKE_CUDA``) writes the very line c10 writes, from a thread running C code
(libc's ``write`` through ctypes, without the GIL), while torch's mode is "warn" and C++ warnings
are on. The same on two GPUs with NCCL and DDP: tests/acceptance/test_cuda_cpp_syncs.py.
"""

from __future__ import annotations

import json
import socket

import pytest
from test_syncs import FAKE_CUDA

from nocompile_testing import RunPytest
from pytest_nocompile.features.sync_relay.relay_process import Relay, command_mark, pass_mark

pytest.importorskip("torch")

FAKE_CPP_SYNCS = r'''
import ctypes
import threading

# the stand-in's CUDA is up: the plugin's stderr relay starts at once
torch.cuda.is_initialized = lambda: True
_LIBC = ctypes.CDLL(None)


def cpp_sync(times=1):
    """What c10's base warning handler writes at a sync no Python called (a C++ thread of DDP's
    reducer)."""
    if (MODE[0] != 1
            or os.environ.get("TORCH_CPP_LOG_LEVEL", "").upper() in ("ERROR", "FATAL", "2", "3")):
        return
    # c10 writes the global rank torch.distributed set: a process's own
    rank = os.environ.get("RANK")
    line = ((f"[rank{rank}]:" if rank else "")
            + "[W1127 14:41:40.996158070 CUDAFunctions.cpp:162] Warning: "
            "called a synchronizing CUDA operation (function warn_or_error_on_sync)\n").encode()

    def reducer():
        for _ in range(times):
            _LIBC.write(2, line, len(line))

    thread = threading.Thread(target=reducer)
    thread.start()
    thread.join()


torch.fake_cpp_sync = cpp_sync
'''

CPP_PLACE = ("in torch's C++ code outside Python (DDP's reducer, a communication hook): "
             "no line of yours known")
SYNC_TEXT = "synchronizing CUDA operation"  # in torch's warning, never in the plugin's own lines

IN_PROCESS = '''
import os
import sys

import pytest
import torch

FOUND = {}


def fd2():
    info = os.fstat(2)
    return info.st_dev, info.st_ino


def test_before():
    FOUND["fd2"] = fd2()


@pytest.mark.max_syncs(1)
def test_reducer():
    os.write(2, b"the test's own line, to fd 2\\n")
    torch.fake_cpp_sync(3)
    torch.fake_sync(0)
    print("the test's own line, to sys.stderr", file=sys.stderr)


def test_after():
    assert fd2() == FOUND["fd2"]  # fd 2 as found: pytest's capture file, or the terminal
    assert "PYTEST_NOCOMPILE_STDERR_RELAY" not in os.environ
    assert torch._C._cuda_get_sync_debug_mode() == 0
    os.write(2, b"after the watched test\\n")
'''


def test_a_sync_no_python_called_counts_under_torchs_cpp_code_and_no_line_of_it_is_printed(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makeconftest(FAKE_CUDA + FAKE_CPP_SYNCS)
    pytester.makepyfile(test_in_process=IN_PROCESS)
    # pytest's fd capture (its default) moves fd 2 at every phase; without it, fd 2 is the terminal
    for capture in ("fd", "no"):
        result = run("-p", "no:randomly", f"--capture={capture}", "-rA")
        result.assert_outcomes(failed=1, passed=2)
        result.stdout.fnmatch_lines(["4 syncs > max_syncs(1) (marker on the test)"])
        result.stdout.fnmatch_lines([f"3 × {CPP_PLACE}"])
        result.stdout.fnmatch_lines(
            ["1 × test_in_process.py:23 in test_reducer: torch.fake_sync(0)"])
        output = result.stdout.str() + result.stderr.str()
        assert SYNC_TEXT not in output
        for line in ("the test's own line, to fd 2", "the test's own line, to sys.stderr",
                     "after the watched test"):
            assert output.count(line) == 1, (capture, line)  # passed on once, to where it was going
        # in the failure's section (what went through the relay may come a moment after what did
        # not)
        if capture == "fd":
            section = result.stdout.str().partition("Captured stderr call")[2].partition("=====")[0]
            assert ("the test's own line, to fd 2" in section
                    and "the test's own line, to sys.stderr" in section)


USERS_WARN = '''
import pytest
import torch


@pytest.mark.max_syncs(5)
def test_warns_itself():
    torch.cuda.set_sync_debug_mode("warn")
    torch.fake_cpp_sync(2)  # shown: the user asked torch to warn
    torch.cuda.set_sync_debug_mode("default")
    torch.fake_cpp_sync(1)  # counted only


@pytest.mark.max_syncs(5)
def test_reads_its_own_stderr(capfd):
    import os
    os.write(2, b"to fd 2\\n")
    torch.fake_cpp_sync(2)
    # what the test wrote, when it reads it: the relay passed it on first
    assert capfd.readouterr().err == "to fd 2\\n"
    with capfd.disabled():
        os.write(2, b"past capfd\\n")
    os.write(2, b"again\\n")
    assert capfd.readouterr().err == "again\\n"
'''


def test_the_users_own_warn_mode_shows_them_and_capfd_reads_what_the_test_wrote(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makeconftest(FAKE_CUDA + FAKE_CPP_SYNCS)
    pytester.makepyfile(test_users=USERS_WARN)
    result = run("-p", "no:randomly", "-s", "--nocompile-json=report.json")
    result.assert_outcomes(passed=2)
    assert result.stderr.str().count(SYNC_TEXT) == 2
    assert result.stderr.str().count("past capfd") == 1
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert [test["syncs"] for test in tests] == [3, 2]
    assert "lower_bound" not in tests[0]


LOWER_BOUND = '''
import pytest
import torch


@pytest.mark.max_syncs(0)
def test_quiet():
    torch.fake_cpp_sync(2)  # c10 drops it at this log level: nothing to count
    torch.fake_sync(0)
'''


def test_where_c10_drops_its_warnings_the_count_is_a_lower_bound_in_the_failure_the_table_and_the_json(  # noqa: E501
        pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_CPP_LOG_LEVEL", "ERROR")
    pytester.makeconftest(FAKE_CUDA + FAKE_CPP_SYNCS)
    pytester.makepyfile(test_bound=LOWER_BOUND)
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    why = ("syncs in torch's C++ code (DDP's reducer, communication hooks) are not seen here: "
           "TORCH_CPP_LOG_LEVEL=ERROR turns torch's C++ warnings off")
    result.stdout.fnmatch_lines(["1 sync > max_syncs(0) (marker on the test)",
                                 f"    a lower bound: {why}",
                                 "1 × test_bound.py:8 in test_quiet: torch.fake_sync(0)"])
    result.stdout.fnmatch_lines(
        ["compiles  recompiles  graph breaks  syncs  budget    verdict      test",
         "       0           0             0    >=1  syncs<=0  over budget  "
         "test_bound.py::test_quiet"])
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert (test["syncs"], test["lower_bound"]) == (1, {"syncs": why})


RELAY_ENDS = '''
import os
import signal
import time

import pytest
import torch

from pytest_nocompile.features.sync_relay.stderr_relay import RELAY


@pytest.mark.max_syncs(0)
def test_relay_killed():
    torch.fake_cpp_sync(1)
    RELAY.flush()
    os.kill(RELAY._process.pid, signal.SIGKILL)  # as the OOM killer might
    deadline = time.monotonic() + 60
    while RELAY.on and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not RELAY.on  # fd 2 is back as found
    os.write(2, b"after the relay ended\\n")
    torch.fake_cpp_sync(1)  # printed now, and not counted: the count is a lower bound
'''


def test_a_relay_that_ends_gives_fd2_back_and_the_count_says_it_is_a_lower_bound(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makeconftest(FAKE_CUDA + FAKE_CPP_SYNCS)
    pytester.makepyfile(test_relay_ends=RELAY_ENDS)
    result = run("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["1 sync > max_syncs(0) (marker on the test)",
                                 "    a lower bound: syncs in torch's C++ code (DDP's reducer, "
                                 "communication hooks) are not seen here: the stderr relay ended",
                                 f"1 × {CPP_PLACE}", "*Captured stderr call*",
                                 "after the relay ended"])


C10_LINE = (b"[W1127 14:41:40.996158070 CUDAFunctions.cpp:162] Warning: called a synchronizing "
            b"CUDA operation (function warn_or_error_on_sync)\n")


def test_the_relay_passes_every_byte_on_in_order_but_c10s_sync_lines_and_its_own_commands() -> None:
    mine, theirs = socket.socketpair()
    relay = Relay(theirs, "t0k", "-")
    passed: list[bytes] = []
    relay.write = lambda data: passed.append(bytes(data))  # type: ignore[method-assign]
    # a partial line that cannot be c10's goes on at once
    relay.feed(b"user line\nprogress [00:01<00:02] 50%")
    relay.feed(b"\r" + b"[rank1]:" + C10_LINE[:30])  # c10's line, cut by a read: held
    assert b"".join(passed) == b"user line\nprogress [00:01<00:02] 50%\r"
    relay.feed(C10_LINE[30:] + b"[rank0]:" + C10_LINE + command_mark("t0k") + b"flush 7\n"
               + b"[W not torch's\n")
    relay.feed(command_mark("t0k") + b"show 1\n" + C10_LINE + pass_mark("t0k")
               + b"a child's own sync line\n")
    relay.feed(b"[W no newline yet", final=True)  # the pipe ended: what was held goes on
    assert b"".join(passed) == (b"user line\nprogress [00:01<00:02] 50%\r[W not torch's\n"
                                + C10_LINE + b"a child's own sync line\n[W no newline yet")
    # each sync line told, with its rank; the flush answered in order
    assert bytes(relay.outbox) == b"sync 1\nsync 0\nflushed 7\nsync -\n"
    # the target is a parent's relay: what is shown goes past it uncounted
    relay.upstream_pass = pass_mark("up")
    passed.clear()
    relay.feed(C10_LINE)
    assert b"".join(passed) == pass_mark("up") + C10_LINE
    mine.close()

