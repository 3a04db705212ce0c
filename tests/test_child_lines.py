"""The line protocol between a child process and its test: identity, liveness of counts, and lines
that cannot harm.

Unit tests of the writer, the reader and the record first (no torch, fast);
then a few runs of pytest on user tests whose children exec, exit hard, are
terminated, cannot write, or run where the environment is odd.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from nocompile_testing import BudgetedRecord, RunPytest, failure_of, judge_record, recorded_messages
from pytest_nocompile.features.child_events.child_lines import ChildReportWarning
from pytest_nocompile.features.child_events.event_files import MAX_LINE, EventDirectory
from pytest_nocompile.features.child_startup.event_writer import MAX_MESSAGE, EventWriter
from pytest_nocompile.judge.budget import RecompileBudget
from pytest_nocompile.judge.result import Verdict
from pytest_nocompile.vocabulary.kinds import COMPILES, RECOMPILES

RECOMPILE = recorded_messages("torch-2.13-recompiles.txt")[0]  # f recompiled: n == 2


def entry(
        moment: float, pid: int, event: str, proc: str | None = None,
        **fields: Any) -> dict[str, Any]:
    """One line as a child's reporter writes it (observe/startup.py, event_files.EventWriter)."""
    line: dict[str, Any] = {"t": moment, "pid": pid, "rank": None, "event": event}
    if proc is not None:
        line["proc"] = proc
    if event == "recompile":
        line["message"] = RECOMPILE
    return {**line, **fields}


def write(path: Path, *lines: dict[str, Any] | str | bytes) -> None:
    with open(path, "ab") as out:
        for line in lines:
            if isinstance(line, dict):
                line = json.dumps(line) + "\n"
            out.write(line.encode() if isinstance(line, str) else line)


def watched(tmp_path: Path, budget: dict[str, int]) -> tuple[BudgetedRecord, Path]:
    folder = tmp_path / "test-1"
    folder.mkdir()
    record = BudgetedRecord(RecompileBudget.of(budget))
    record.read_children_from(EventDirectory(str(folder)))
    record.start_call(at=0.0)
    return record, folder


def ending(record: BudgetedRecord) -> list[str]:
    """End the test as the plugin does (the call, then the final read) and return the warnings it
    gives."""
    record.end_call()
    record.read_children(final=True)
    found = record.child_warnings()
    # given once
    assert (all(isinstance(warning, ChildReportWarning) for warning in found)
            and record.child_warnings() == [])
    return [str(warning) for warning in found]


# -- 2: a process is its token, not its pid --------------------------------------------------------


def test_an_exec_keeps_the_pid_but_is_another_process_judged_and_shown_on_its_own(
        tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {RECOMPILES.key: 2})
    # The program after the exec writes its own file; its lines come later.
    write(folder / "7-bbbb.jsonl",
          *[entry(5.0, 7, name, "7-bbbb") for name in ("compile", "recompile", "compile")])
    write(folder / "7-aaaa.jsonl", entry(1.0, 7, "compile", "7-aaaa"),
          *[entry(1.0 + n, 7, name, "7-aaaa") for n in range(3)
            for name in ("recompile", "compile")])
    assert ending(record) == []
    result = judge_record(record)
    # not 4: two processes, not one
    assert result.verdict is Verdict.OVER and result.counts["recompiles"] == 3
    assert ([(process.get("nth", 1), process["recompiles"]) for process in result.processes]
            == [(1, 0), (1, 3), (2, 1)])
    assert result.cause is not None and result.cause.startswith("pid 7: f recompiled")
    assert (failure_of(record, result.over).splitlines()[0]
            == "pid 7: 3 recompiles > max_recompiles(2)")
    assert [str(child.info) for child in record.children.values()] == ["pid 7", "pid 7 #2"]


def test_the_writer_makes_a_token_of_its_own_in_each_process(tmp_path: Path) -> None:
    writer = EventWriter(str(tmp_path / "test-1"))
    writer.write({"event": "compile"})
    child = os.fork()
    if child == 0:  # as a fork that ran no at-fork handler (one made by C code): the same writer
        writer.write({"event": "compile"})
        os._exit(0)
    os.waitpid(child, 0)
    files = sorted((tmp_path / "test-1").iterdir())
    tokens = {json.loads(path.read_text())["proc"] for path in files}
    assert len(files) == 2 and len(tokens) == 2 and writer.token() in tokens
    assert {token.partition("-")[0] for token in tokens} == {str(os.getpid()), str(child)}


# -- 11: the writer keeps no descriptor that user code can take over -------------------------------


def test_a_child_that_closes_every_descriptor_and_opens_its_own_files_gets_none_of_the_plugins_lines(  # noqa: E501
        tmp_path: Path) -> None:
    writer = EventWriter(str(tmp_path / "test-1"))
    users = tmp_path / "users.log"
    child = os.fork()
    if child == 0:
        try:
            writer.write({"event": "compile", "n": 1})
            os.closerange(3, 256)  # as a daemon does
            for _ in range(60):  # the user's file now sits on every low descriptor number
                os.open(users, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            writer.write({"event": "compile", "n": 2})
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    assert users.read_bytes() == b""
    (written,) = (tmp_path / "test-1").iterdir()
    assert [json.loads(text)["n"] for text in written.read_text().splitlines()] == [1, 2]


# -- 4: a process that could not write says so -----------------------------------------------------


def test_a_process_whose_write_fails_leaves_a_marker_and_its_test_hears_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record, folder = watched(tmp_path, {COMPILES.key: 0})
    writer = EventWriter(str(folder))

    def disk_full(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(os, "write", disk_full)
        writer.write({"event": "compile"})  # never raises into the child
    assert writer.broken
    assert [path.name for path in folder.iterdir() if path.name.endswith(".unreported")] == [
        f"{writer.token()}.ENOSPC.unreported"]
    record.end_call()
    pid = os.getpid()
    assert record.child_problems() == [
        f"pid {pid}: could not write its report to {folder} (ENOSPC)"]
    assert not record.empty()
    assert ending(record) == []  # said in the budgeted test's failure: not again as a warning


def test_an_entry_that_cannot_be_written_is_said_too(tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {COMPILES.key: 0})
    writer = EventWriter(str(folder))
    odd: dict[str, Any] = {"event": "compile", "t": 1.0}
    odd["itself"] = odd
    writer.write(odd)  # json cannot write a circle
    writer.write({"event": "compile", "t": 1.0})  # the next line still goes
    record.end_call()
    assert record.child_problems() == [
        f"pid {os.getpid()}: could not write its report to {folder} (ValueError)"]
    assert judge_record(record).counts["compiles"] == 1


def test_a_test_without_a_budget_gets_a_warning_when_a_process_could_not_write(
        tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {})
    (folder / "9-abcd.EACCES.unreported").touch()
    assert ending(record) == [
        "pytest-nocompile could not hear from every process of this test, "
        "so their compiles are not counted: "
        f"pid 9: could not write its report to {folder} (EACCES)"
    ]


@pytest.mark.parametrize("spoiled", ["a file", "a link"])
def test_a_folder_no_process_can_write_to_is_a_problem_of_the_test(
        tmp_path: Path, spoiled: str) -> None:
    folder = tmp_path / "test-1"
    if spoiled == "a file":
        folder.write_text("")
    else:
        (tmp_path / "elsewhere").mkdir()
        folder.symlink_to(tmp_path / "elsewhere")
    writer = EventWriter(str(folder))
    writer.write({"event": "compile"})  # cannot: silent in the child
    assert (writer.broken and not (tmp_path / "elsewhere" / f"{writer.token()}.jsonl").exists()
            or spoiled == "a link")
    record = BudgetedRecord(RecompileBudget.of({COMPILES.key: 0}))
    record.read_children_from(EventDirectory(str(folder)))
    record.start_call(at=0.0)
    record.end_call()
    assert record.child_problems() == [
        f"the test's processes could not report to {folder}: ENOTDIR: Not a directory"]


def test_a_folder_made_read_only_is_a_problem_of_the_test(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record, folder = watched(tmp_path, {COMPILES.key: 0})
    access = os.access
    # As a user who is not root sees a folder of mode 0o500 (root may write anywhere).
    monkeypatch.setattr(os, "access", lambda path, mode, **kwargs: access(path, mode, **kwargs)
                        and not (mode & os.W_OK and str(path) == str(folder)))
    record.end_call()
    assert record.child_problems() == [
        f"the test's processes could not report to {folder}: it is not writable"]


def test_a_folder_the_test_removed_is_no_more_reports(tmp_path: Path) -> None:
    import shutil

    record, folder = watched(tmp_path, {COMPILES.key: 0})
    write(folder / "5-aaaa.jsonl", entry(1.0, 5, "compile", "5-aaaa"))
    record.read_children()
    shutil.rmtree(folder)
    assert ending(record) == [] and record.child_problems() == []
    assert judge_record(record).counts["compiles"] == 1


def test_a_folder_removed_and_made_again_is_read_from_the_start_of_each_file(
        tmp_path: Path) -> None:
    import shutil

    record, folder = watched(tmp_path, {COMPILES.key: 0})
    write(folder / "5-aaaa.jsonl",
          entry(1.0, 5, "compile", "5-aaaa", compile_id="0/0", thread="worker"))
    record.read_children()
    shutil.rmtree(folder)
    # by the same process's next line, in a file of the same name (and maybe the same inode)
    folder.mkdir()
    write(folder / "5-aaaa.jsonl", entry(2.0, 5, "compile", "5-aaaa", compile_id="1/0"))
    assert ending(record) == []
    assert [event.compile_id for event in record.all_compiles()] == ["0/0", "1/0"]


def test_a_run_folder_gone_mid_test_is_a_problem_of_the_test(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "test-1"
    record = BudgetedRecord(RecompileBudget.of({COMPILES.key: 0}))
    record.read_children_from(EventDirectory(str(folder)))
    record.start_call(at=0.0)
    # the run's folder never was, or was removed by someone else: no child could report
    record.end_call()
    assert record.child_problems() == [
        f"the test's processes could not report to {folder}: {tmp_path / 'run'} is gone"]


# -- 9: malformed lines, one by one ----------------------------------------------------------------


def test_malformed_lines_are_skipped_one_by_one_and_said_in_one_warning_per_file(
        tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {RECOMPILES.key: 0})
    bad = folder / "3-bad.jsonl"
    write(bad,
          entry(1.0, 3, "compile", "3-bad"),                                   # 1 counts
          # 2 an older version's exit line
          entry(1.0, 3, "totals", "3-bad", totals=[1, 2]),
          entry(1.0, 3, "recompile", "3-bad", message=123),                    # 3
          entry(1.0, 3, "compile", "3-bad", user_code=["f.py"]),               # 4
          '{"t": Infinity, "pid": 3, "event": "compile"}\n',                   # 5
          '{"t": NaN, "pid": 3, "event": "compile"}\n',                        # 6
          '{"t": 1e400, "pid": 3, "event": "compile"}\n',                      # 7
          entry(-1.0, 3, "compile", "3-bad"),                                  # 8
          entry(1.0, -3, "compile", "3-bad"),                                  # 9
          entry(1.0, 3, "compile", "3-bad", rank=True),                        # 10
          "[" * 100_000 + "\n",                                                # 11
          b"\xff\xfe not text\n",                                              # 12
          "[1, 2]\n",                                                          # 13
          entry(2.0, 3, "recompile", "3-bad"),                                 # 14 counts
          # 15 over the line limit
          entry(2.0, 3, "compile", "3-bad", message="x" * (MAX_LINE + 10)),
          entry(3.0, 3, "compile", "3-bad"),                                   # 16 counts
          # 17 cut off: never finished
          '{"t": 4.0, "pid": 3, "event": "recompile", "mess')
    good = folder / "4-good.jsonl"
    write(good, entry(1.0, 4, "compile", "4-good"))
    messages = ending(record)
    (child, other) = record.children.values()
    assert (len(child.compiles), len(child.recompiles), len(other.compiles)) == (2, 1, 1)
    assert judge_record(record).over == ("recompiles",)
    assert len(messages) == 1  # one file, one warning; the good file none
    assert messages[0].startswith("pytest-nocompile skipped part of a child process's report "
                                  f"{bad} (written by another version")
    assert messages[0].endswith(
        ": line 2: unknown event 'totals'; line 3: 'message' is int, not text; "
        "line 4: 'user_code' is not [file, line, function, code]; line 5: not JSON; line 6: "
        "not JSON; and 9 more")
    record = BudgetedRecord(RecompileBudget.of({RECOMPILES.key: 0}))  # every reason, read anew
    record.read_children_from(EventDirectory(str(folder)))
    record.read_children(final=True)
    assert record._skipped[str(bad)][5:] == [
        "line 7: 't' is inf, not a finite number >= 0",
        "line 8: 't' is -1.0, not a finite number >= 0",
        "line 9: 'pid' is -3, out of range",
        "line 10: 'rank' is bool, not an integer",
        "line 11: nested too deeply",
        "line 12: not JSON",
        "line 13: not a JSON object",
        "line 15: "
        f"{len(json.dumps(entry(2.0, 3, 'compile', '3-bad', message='x' * (MAX_LINE + 10))))} "
        f"bytes, over the {MAX_LINE}-byte limit",
        "line 17: cut off, no newline at its end (its process stopped while writing it?)",
    ]


def test_field_checks_name_what_is_wrong(tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {})
    write(folder / "3-x.jsonl",
          '{"t": 1e400, "pid": 3, "event": "compile"}\n',
          entry(-1.0, 3, "compile"), entry(1.0, -3, "compile"), entry(1.0, 3, "compile", rank=True),
          {**entry(1.0, 3, "compile"), "proc": ["3-x"]})
    record.read_children(final=True)
    assert record._skipped[str(folder / "3-x.jsonl")] == [
        "line 1: 't' is inf, not a finite number >= 0",
        "line 2: 't' is -1.0, not a finite number >= 0",
        "line 3: 'pid' is -3, out of range",
        "line 4: 'rank' is bool, not an integer",
        "line 5: 'proc' is list, not text",
    ]


def test_a_long_message_counts_and_is_shown_cut(tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {RECOMPILES.key: 0})
    write(folder / "3-x.jsonl",
          entry(1.0, 3, "recompile", "3-x", message=RECOMPILE + "\n" + "y" * 5 * MAX_MESSAGE))
    assert ending(record) == []
    (event,) = record.all_events()
    assert event.function == "f" and len(event.message) < MAX_MESSAGE + 100
    assert event.message.endswith(
        f"... [{len(RECOMPILE) + 1 + 5 * MAX_MESSAGE - MAX_MESSAGE} more characters not shown]")


def test_a_line_over_the_limit_is_skipped_without_holding_it_whole(tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {COMPILES.key: 0})
    path = folder / "3-x.jsonl"
    # still being written: skipped as soon as it is over the limit
    write(path, "x" * (3 * MAX_LINE))
    record.read_children()
    write(path, "x" * MAX_LINE + "\n", entry(1.0, 3, "compile", "3-x"))
    assert ending(record) == [f"pytest-nocompile skipped part of a child process's report {path} "
                              "(written by another version of pytest-nocompile, "
                              "or not by it at all?): "
                              f"line 1: {4 * MAX_LINE} bytes, over the {MAX_LINE}-byte limit"]
    assert judge_record(record).counts["compiles"] == 1


def test_only_regular_files_are_read_and_a_fifo_never_blocks(tmp_path: Path) -> None:
    record, folder = watched(tmp_path, {COMPILES.key: 0})
    os.mkfifo(folder / "1.jsonl")
    (tmp_path / "elsewhere.jsonl").write_text(json.dumps(entry(1.0, 2, "compile")) + "\n")
    (folder / "2.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    (folder / "3.jsonl").mkdir()
    done: list[list[str]] = []
    reader = threading.Thread(target=lambda: done.append(ending(record)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert done, "reading the folder blocked"
    prefix = "pytest-nocompile skipped part of a child process's report"
    suffix = "(written by another version of pytest-nocompile, or not by it at all?)"
    assert done[0] == [f"{prefix} {folder / '1.jsonl'} {suffix}: a FIFO, not a regular "
                       "file: not read",
                       f"{prefix} {folder / '2.jsonl'} {suffix}: a symbolic link, "
                       "not a regular file: not read",
                       f"{prefix} {folder / '3.jsonl'} {suffix}: a directory, not a regular "
                       "file: not read"]
    assert not record.children and record.child_problems() == []


# -- end to end: children that exec, exit hard, are terminated, cannot write, or run in an odd
#    environment -----------------------------------------------------------------------------------

CHILDREN = '''
import errno, json, multiprocessing, os, shutil, subprocess, sys
import pytest, torch

VAR = "PYTEST_NOCOMPILE_EVENTS"

def recompiling(calls):
    # dynamic=False: each new n is a recompile (automatic dynamic would stop at the first).
    return f"""
import torch
def scale(x, n):
    return x * n
f = torch.compile(scale, backend="eager", dynamic=False)
for n in range(1, {calls} + 1):
    f(torch.ones(2), n)
"""

def scale(x, n):
    return x * n

def compile_once(_=None):
    torch.compile(scale, backend="eager")(torch.ones(2), 1)

def python(code, **env):
    child = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                           capture_output=True, text=True)
    # exactly as without the plugin
    assert (child.returncode, child.stdout, child.stderr) == (0, "", "")

def in_fork(work):
    pid = os.fork()
    if pid == 0:
        try:
            work()
        finally:
            os._exit(0)  # no exit handler runs: what was compiled must be reported already
    assert os.waitpid(pid, 0)[1] == 0

@pytest.mark.max_recompiles(2)
def test_exec_keeps_the_pid():
    then = f"import os, sys\\nos.execv(sys.executable, [sys.executable, '-c', {recompiling(2)!r}])"
    python(recompiling(4) + then)  # 3 recompiles, then the program it becomes: 1

@pytest.mark.max_compiles(0)
def test_compiles_then_os_exit():
    in_fork(compile_once)

@pytest.mark.max_compiles(0)
def test_pool_worker_terminated():
    with multiprocessing.get_context("fork").Pool(1) as pool:  # __exit__ terminates the worker
        pool.map(compile_once, [0])

@pytest.mark.max_compiles(1)
def test_folder_is_a_file():
    # the test's folder, then a file for its phase's
    os.makedirs(os.path.dirname(os.environ[VAR]), exist_ok=True)
    open(os.environ[VAR], "w").close()
    in_fork(compile_once)

def disk_full():
    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    os.write = full
    compile_once()

@pytest.mark.max_compiles(1)
def test_disk_full():
    in_fork(disk_full)

def test_disk_full_without_budget(nocompile_recompiles):
    in_fork(disk_full)

@pytest.mark.max_compiles(1)
def test_fifo_in_the_folder():
    os.makedirs(os.environ[VAR])
    os.mkfifo(os.path.join(os.environ[VAR], "1.jsonl"))
    in_fork(compile_once)

@pytest.mark.max_compiles(0)
def test_removes_its_folder():
    in_fork(compile_once)
    shutil.rmtree(os.environ[VAR])

NO_PYTEST = ("import sys\\nfor name in ('pytest', '_pytest', 'pluggy'):\\n"
             "    sys.modules[name] = None\\n")

@pytest.mark.max_recompiles(0)
@pytest.mark.parametrize("prelude, env", [("", {"RANK": "\\u00b2"}), (NO_PYTEST, {})],
                         ids=["odd_rank", "no_pytest"])
def test_odd_child(prelude, env):
    python(prelude + recompiling(2), **env)

def take_every_descriptor(path):
    f = torch.compile(scale, backend="eager", dynamic=False)
    f(torch.ones(2), 1)
    os.closerange(3, 256)
    for _ in range(60):  # the user's own file on every low descriptor number
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    f(torch.ones(2), 2)

@pytest.mark.max_recompiles(0)
def test_fork_that_takes_every_descriptor(tmp_path):
    in_fork(lambda: take_every_descriptor(str(tmp_path / "mine.log")))
    assert (tmp_path / "mine.log").read_bytes() == b""
'''


def test_children_that_exec_exit_hard_cannot_write_or_run_oddly_are_counted_or_said(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_children=CHILDREN)
    result = run("--nocompile-json=report.json", "-rA", "-W", "always::pytest.PytestWarning")
    output = result.stdout.str()
    # Every failure is the plugin's verdict: no child's exit status or output changed, no user file
    # written to.
    assert ("INTERNALERROR" not in output and "Traceback" not in output
            and "AssertionError" not in output)
    outcomes = {test["nodeid"].partition("::")[2]: test
                for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    result.stdout.fnmatch_lines([
        # 2: both processes of the pid, each judged on its own
        "*test_exec_keeps_the_pid*",
        "pid *: 3 recompiles > max_recompiles(2) (marker on the test)",
    ])
    exec_processes = [process for process in outcomes["test_exec_keeps_the_pid"]["processes"]
                      if not process["test_process"]]
    assert [(process.get("nth", 1), process["recompiles"])
            for process in exec_processes] == [(1, 3), (2, 1)]
    assert exec_processes[0]["pid"] == exec_processes[1]["pid"]
    # 3: compiles reach the test as they happen
    for name in ("test_compiles_then_os_exit", "test_pool_worker_terminated"):
        assert outcomes[name]["verdict"] == "over budget" and outcomes[name]["compiles"] == 1, name
    # 4: a child that could not write: the budgeted test fails saying so; the other gets a warning
    result.stdout.re_match_lines([
        r".*pytest-nocompile cannot watch a process of test_children.py::test_folder_is_a_file: "
        r"the test's processes could not report to \S+: ENOTDIR: Not a directory",
        r".*pytest-nocompile cannot watch a process of test_children.py::test_disk_full: pid \d+: "
        r"could not write its report to \S+ \(ENOSPC\)",
    ], consecutive=False)
    result.stdout.re_match_lines([
        r"test_children.py::test_disk_full_without_budget",
        r".*ChildReportWarning: pytest-nocompile could not hear from every process of this test, "
        r"so their compiles are not counted: "
        r"pid \d+: could not write its report to \S+ \(ENOSPC\)",
    ])
    # 9: a FIFO is not read, and nothing hangs; a folder the test removed is no more reports
    result.stdout.re_match_lines([
        r"test_children.py::test_fifo_in_the_folder",
        r".*ChildReportWarning: pytest-nocompile skipped part of a child process's report "
        r"\S+/1.jsonl \(.*\): a FIFO, not a regular file: not read",
    ])
    assert outcomes["test_fifo_in_the_folder"]["verdict"] == "within budget"
    assert outcomes["test_removes_its_folder"]["verdict"] == "within budget"
    # 10: a child's exit status and output are its own (asserted in the child's test); its recompile
    # still counts
    for name in ("test_odd_child[odd_rank]", "test_odd_child[no_pytest]"):
        assert (outcomes[name]["verdict"] == "over budget"
                and outcomes[name]["recompiles"] == 1), name
    # 11: the user's file got none of the plugin's lines (asserted in the test), and the recompile
    # counted
    assert outcomes["test_fork_that_takes_every_descriptor"]["recompiles"] == 1
    result.assert_outcomes(passed=3, failed=8)


def test_a_command_line_is_shortened_as_a_shell_reads_it() -> None:
    from pytest_nocompile.features.child_startup.command_line import (
        LONGEST,
        shortened,
        this_process,
    )

    assert (shortened(["/venv/bin/python", "-u", "train.py", "--lr=0.1"])
            == "python -u train.py --lr=0.1")
    assert (shortened(["/venv/bin/python", "-c", "import torch\nprint('hi')"])
            == "python -c 'import torch print('\\''hi'\\'')'")
    long = shortened(["python", "x" * 100])
    assert len(long) == LONGEST and long.endswith("…")
    assert shortened([]) == "?"
    # a fork that ran no exec: its command line is its parent's
    assert this_process(forked_from=5) == "fork of pid 5"
