"""The run's folders for children's reports: made per user, kept while their run lives, removed only
when provably ours.

Most cases here call the folder code directly with a temporary ``TMPDIR``;
the end-to-end ones run pytest on a user's test file, whose child processes
write their reports the way the start-up hook does (no torch: what is tested
is where a report lands and how it counts, not how dynamo logs it).
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from nocompile_testing import RunPytest
from pytest_nocompile.features.child_events.tree_removal import Budget, remove_tree
from pytest_nocompile.features.children import run_folders
from pytest_nocompile.features.children.run_folders import (
    LOCK,
    MARKER,
    PARENT_PREFIX,
    RunFolder,
    remove_dead_runs,
)

ENV_VAR = "PYTEST_NOCOMPILE_EVENTS"


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh TMPDIR, for this process (tempfile caches it) and for the processes it starts."""
    import tempfile

    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def short_temp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh TMPDIR with a short path: a fork server's socket lives there, and AF_UNIX paths end
    at 107 bytes (a pytester folder under xdist is longer)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="nc-"))
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def parent_of(temp: Path) -> Path:
    return temp / (PARENT_PREFIX + run_folders.user_name())


def dead_pid() -> int:
    """The pid of a process that has ended (in this pid namespace)."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    return int(finished.stdout)


def marked_run(parent: Path, name: str, files: int = 1) -> Path:
    """A run's folder as the plugin makes it (marker and lock file), with reports in it, its lock
    held by nobody."""
    parent.mkdir(mode=0o700, exist_ok=True)
    folder = parent / name
    (folder / "1-call").mkdir(parents=True)
    (folder / LOCK).touch()
    (folder / MARKER).touch()
    for index in range(files):
        (folder / "1-call" / f"{index}.jsonl").write_text("{}\n")
    return folder


@pytest.fixture
def lock_holder() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes holding a lock for the test: each is ended afterwards."""
    holders: list[subprocess.Popen[str]] = []
    yield holders
    for holder in holders:
        holder.kill()
        holder.wait()


HOLD_LOCK = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
             "fcntl.flock(fd, fcntl.LOCK_EX); print(os.getpid(), flush=True); sys.stdin.read()")


def hold_lock(lock: Path, prefix: list[str]) -> subprocess.Popen[str]:
    holder = subprocess.Popen([*prefix, sys.executable, "-c", HOLD_LOCK, str(lock)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    if not holder.stdout.readline():  # it prints its pid once it holds the lock
        pytest.skip(f"{' '.join(prefix) or 'a helper'} could not hold a lock here: "
                    f"{holder.stderr.read() if holder.stderr else ''}")
    return holder


# -- 1. a run's folder is live while its lock is held, whatever its name's pid ---------------------

UNSHARE = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"]


@pytest.mark.parametrize("holder_prefix", [[], UNSHARE],
                         ids=["holder-in-this-pid-namespace", "holder-in-another-pid-namespace"])
def test_a_folder_named_for_a_dead_pid_is_kept_while_its_lock_is_held(
        temp: Path, lock_holder: list[subprocess.Popen[str]], holder_prefix: list[str]) -> None:
    # A run in another container sharing /tmp: its pid means nothing here (a dead one, say), but it
    # holds its lock.
    if holder_prefix:
        probe = subprocess.run([*holder_prefix, "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            pytest.skip(f"unshare is not allowed here: {probe.stderr.strip()}")
    foreign = marked_run(parent_of(temp), f"run-{dead_pid()}-live")
    lock_holder.append(hold_lock(foreign / LOCK, holder_prefix))

    # what a run's first watched test does: remove dead runs' folders, make its own
    ours = RunFolder.make(str(temp))
    assert foreign.is_dir() and (foreign / "1-call" / "0.jsonl").is_file()
    assert ours.remove()

    holder = lock_holder.pop()
    assert holder.stdin is not None
    # the foreign run ends (unshare waits for its child): its lock goes with it
    holder.stdin.close()
    holder.wait(timeout=30)
    later = RunFolder.make(str(temp))
    assert not foreign.exists()
    assert later.remove() and not parent_of(temp).exists()  # the last run leaves no trace


def test_a_live_runs_own_folder_is_never_taken_for_dead(temp: Path) -> None:
    # Two runs at once (xdist workers, or nested runs in one process): neither removes the other's
    # folder.
    first = RunFolder.make(str(temp))
    second = RunFolder.make(str(temp))
    assert Path(first.path).is_dir() and Path(second.path).is_dir() and first.path != second.path
    assert sorted(path.name for path in Path(first.path).iterdir()) == [LOCK, MARKER]
    assert second.remove() and Path(first.path).is_dir()
    assert first.remove() and not parent_of(temp).exists()


# -- 7. only folders the plugin made, of this user, in this user's parent --------------------------

def test_only_marked_folders_of_this_user_in_its_own_parent_are_removed(temp: Path) -> None:
    pid = dead_pid()
    # a user's, an old run's
    users_own = [temp / "pytest-nocompile-2024-report", temp / f"pytest-nocompile-{pid}-abc"]
    for folder in users_own:
        folder.mkdir()
        (folder / "data.txt").write_text("keep me")
    parent = parent_of(temp)
    unmarked = parent / f"run-{pid}-unmarked"  # not provably the plugin's (no marker)
    unmarked.mkdir(parents=True, mode=0o700)
    (unmarked / LOCK).touch()
    other_users = marked_run(parent, f"run-{pid}-other-user")
    for path in (other_users, other_users / MARKER):
        os.chown(path, 65534, 65534) if os.geteuid() == 0 else None
    dead = marked_run(parent, f"run-{pid}-dead")

    RunFolder.make(str(temp)).remove()

    assert not dead.exists()
    assert unmarked.is_dir()
    assert other_users.is_dir() or os.geteuid() != 0
    for folder in users_own:
        assert (folder / "data.txt").read_text() == "keep me"


def test_other_users_parents_and_a_parent_not_safely_ours_are_left_alone(temp: Path) -> None:
    outside = temp / "outside"
    # looks dead and marked, but is not in a parent of ours
    dead = marked_run(outside, f"run-{dead_pid()}-dead")
    parent_of(temp).symlink_to(outside)  # someone put a link where this user's parent goes
    other_parent = temp / f"{PARENT_PREFIX}someone-else"
    other_dead = marked_run(other_parent, f"run-{dead_pid()}-dead")

    run = RunFolder.make(str(temp))
    # a private folder instead
    assert Path(run.path).parent == temp and Path(run.path).name.startswith("pytest-nocompile-run-")
    assert dead.is_dir() and other_dead.is_dir() and parent_of(temp).is_symlink()
    assert run.remove() and not Path(run.path).exists()
    assert dead.is_dir() and other_dead.is_dir()


def test_this_users_parent_is_private(temp: Path) -> None:
    parent = parent_of(temp)
    parent.mkdir(mode=0o777)
    os.chmod(parent, 0o777)
    run = RunFolder.make(str(temp))
    assert Path(run.path).parent == parent
    assert (stat.S_IMODE(os.lstat(parent).st_mode) == 0o700
            and stat.S_IMODE(os.lstat(run.path).st_mode) == 0o700)
    run.remove()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root can make a folder another user owns")
def test_a_parent_another_user_owns_is_not_used_even_by_root(temp: Path) -> None:
    parent = parent_of(temp)
    dead = marked_run(parent, f"run-{dead_pid()}-dead")
    for path in (parent, dead, dead / MARKER, dead / LOCK):
        os.chown(path, 65534, 65534)
    run = RunFolder.make(str(temp))
    assert Path(run.path).parent == temp
    assert dead.is_dir()
    run.remove()


# -- 8. hostile names and trees never make a test error --------------------------------------------

def make_deep_tree(top: Path, depth: int) -> None:
    """``top/d/d/.../d/leaf`` ``depth`` folders deep: deeper than any path a single system call
    accepts."""
    top.mkdir(parents=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    os.close(fd)


def test_a_tree_deeper_than_the_recursion_limit_is_removed_without_following_links(
        tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "precious").write_text("keep me")
    tree = tmp_path / "tree"
    # A low recursion limit stands for a deep tree (a real 1,000-deep one takes seconds to remove on
    # some disks).
    frames = len(inspect.stack(0))
    make_deep_tree(tree / "deep", frames + 300)
    (tree / "link").symlink_to(kept, target_is_directory=True)
    (tree / "deep" / "d" / "link").symlink_to(kept / "precious")
    os.mkfifo(tree / "fifo")
    locked = tree / "unreadable"
    locked.mkdir()
    (locked / "file").touch()
    os.chmod(locked, 0)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(frames + 100)
    try:
        removed = remove_tree(str(tree), Budget(30.0, 1_000_000))
    finally:
        sys.setrecursionlimit(limit)
    assert removed and not tree.exists()
    assert (kept / "precious").read_text() == "keep me"


def test_a_removal_that_fails_never_raises_and_leaves_the_folder_for_a_later_run(
        temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = marked_run(parent_of(temp), f"run-{dead_pid()}-dead", files=3)
    real_unlink = os.unlink

    def refusing_unlink(path: str, *args: object, **kwargs: object) -> None:
        if str(path).endswith(".jsonl"):
            raise PermissionError(13, "Permission denied", path)
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", refusing_unlink)
    remove_dead_runs(str(parent_of(temp)))
    assert (dead / MARKER).is_file() and (dead / LOCK).is_file()  # still recognisably a dead run's
    monkeypatch.setattr(os, "unlink", real_unlink)
    remove_dead_runs(str(parent_of(temp)))
    assert not dead.exists()


HOSTILE_TEMP_RUN = '''
import os, subprocess, sys
import pytest

@pytest.mark.max_recompiles(0)
def test_watched_with_a_child():
    subprocess.run([sys.executable, "-c", "print('child')"], check=True)
    assert os.environ["PYTEST_NOCOMPILE_EVENTS"]
'''


def test_hostile_names_and_trees_in_tmpdir_never_make_a_watched_test_error(
        run: RunPytest, pytester: pytest.Pytester, temp: Path) -> None:
    huge = "99999999999999999999"
    outside = temp / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    (temp / f"pytest-nocompile-{huge}-x").mkdir()  # main's OverflowError
    make_deep_tree(temp / f"pytest-nocompile-{huge}-deep", 40)  # main's RecursionError, given depth
    parent = parent_of(temp)
    dead = marked_run(parent, f"run-{huge}-x")
    # deeper than the folders removal holds open at once
    make_deep_tree(dead / "1-call" / "deep", 80)
    (dead / "1-call" / "link").symlink_to(outside, target_is_directory=True)
    (parent / f"run-{huge}-file").write_text("a file where a folder is expected")
    (parent / f"run-{huge}-link").symlink_to(outside, target_is_directory=True)
    (parent / "run-").mkdir()
    unreadable = marked_run(parent, f"run-{huge}-unreadable")
    os.chmod(unreadable / "1-call", 0)

    pytester.makepyfile(test_hostile=HOSTILE_TEMP_RUN)
    result = run("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    # gone, or (clean-up is bounded in time) still marked for a later run
    for folder in (dead, unreadable):
        assert not folder.exists() or (folder / MARKER).is_file()
    remove_dead_runs(str(parent), Budget(30.0, 1_000_000))
    assert not dead.exists() and not unreadable.exists()
    assert (outside / "precious").read_text() == "keep me"
    assert ((parent / f"run-{huge}-file").is_file() and (parent / f"run-{huge}-link").is_symlink()
            and (parent / "run-").is_dir())
    assert ((temp / f"pytest-nocompile-{huge}-x").is_dir()
            and (temp / f"pytest-nocompile-{huge}-deep").is_dir())


# -- 12. a killed run's folder: where it is, and gone with the next run ----------------------------

KILLED_RUN = '''
import os, time
import pytest

@pytest.mark.max_recompiles(0)
def test_waits_to_be_killed():
    with open(os.environ["WHERE"] + ".tmp", "w") as file:
        file.write(os.environ["PYTEST_NOCOMPILE_EVENTS"])
    os.rename(os.environ["WHERE"] + ".tmp", os.environ["WHERE"])
    time.sleep(120)
'''


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_runs_folder_is_under_the_users_parent_and_removed_by_the_next_run(
        run: RunPytest, pytester: pytest.Pytester, temp: Path, how: signal.Signals) -> None:
    where = pytester.path / "where.txt"
    pytester.makepyfile(test_killed=KILLED_RUN)
    env = {**os.environ, "WHERE": str(where), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop(ENV_VAR, None)
    killed = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "nocompile",
                               "-p", "no:cacheprovider", "test_killed.py"],
                              cwd=pytester.path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not where.exists() and time.monotonic() < deadline and killed.poll() is None:
        time.sleep(0.05)
    killed.send_signal(how)
    killed.wait(timeout=60)
    run_folder = Path(where.read_text()).parent.parent  # <run>/<test>/<phase>
    # where it is said to be
    assert run_folder.parent == parent_of(temp) and run_folder.name.startswith(f"run-{killed.pid}-")
    assert (run_folder / MARKER).is_file()

    pytester.makepyfile(test_next=HOSTILE_TEMP_RUN)
    run("-p", "no:randomly", "test_next.py").assert_outcomes(passed=1)
    assert not run_folder.exists() and not parent_of(temp).exists()


def test_clean_up_is_bounded_and_a_later_run_resumes_it(temp: Path) -> None:
    parent = parent_of(temp)
    dead = [marked_run(parent, f"run-{dead_pid() if index == 0 else 0}-{index}", files=40)
            for index in range(5)]
    remove_dead_runs(str(parent), Budget(10.0, 60))  # 41 entries a folder: one folder and a half
    left = [folder for folder in dead if folder.exists()]
    assert len(left) == 4
    # one was cut short...
    assert sorted(len(list((folder / "1-call").iterdir())) for folder in left)[0] < 40
    # ...still recognisable
    assert all((folder / MARKER).is_file() and (folder / LOCK).is_file() for folder in left)
    for _ in range(4):
        remove_dead_runs(str(parent), Budget(10.0, 60))
    assert not any(folder.exists() for folder in dead)

    late = marked_run(parent, "run-0-late")
    # no time at all: nothing done, nothing raised
    remove_dead_runs(str(parent), Budget(0.0, 1_000_000))
    assert (late / "1-call" / "0.jsonl").is_file()


# -- 6. only processes started in the call count against the test ----------------------------------

# A child reports the way the start-up hook does: to the folder the variable named when it started.
FIXTURE_PROCESSES = '''
import json, os, subprocess, sys, time
import pytest

REPORTER = """
import os, sys, time
from pytest_nocompile.features.child_startup.event_writer import EventWriter
# read at start, as the start-up hook does
writer = EventWriter(os.environ["PYTEST_NOCOMPILE_EVENTS"])
def recompile(n):
    message = ("Recompiling function scale in /src/model.py:3\\\\n"
               "    triggered by the following guard failure(s):\\\\n"
               f"    - 0/0: n == {n}")
    writer.write({"t": time.time(), "pid": os.getpid(), "rank": None, "event": "recompile",
                  "message": message, "compile_id": f"0/{n}", "user_code": None, "thread": None})
"""

SERVER = REPORTER + """
folder = sys.argv[1]
for n in (1, 2):
    while not os.path.exists(os.path.join(folder, f"go-{n}")):
        time.sleep(0.01)
    recompile(n)
    open(os.path.join(folder, f"done-{n}"), "w").close()
sys.stdin.read()
"""

def ask(folder, n):
    open(os.path.join(folder, f"go-{n}"), "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(folder, f"done-{n}")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.path.exists(os.path.join(folder, f"done-{n}"))

@pytest.fixture(scope="session")
def server(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("server"))
    process = subprocess.Popen([sys.executable, "-c", SERVER, folder], stdin=subprocess.PIPE)
    yield folder
    process.stdin.close()
    process.wait()

@pytest.fixture
def recompiles_at_teardown():
    yield
    subprocess.run([sys.executable, "-c", REPORTER + "recompile(7)"], check=True)

@pytest.mark.max_recompiles(0)
def test_sets_up_the_server_which_recompiles_in_its_call(server, recompiles_at_teardown):
    ask(server, 1)

@pytest.mark.max_recompiles(0)
def test_the_server_recompiles_in_a_later_tests_call(server):
    ask(server, 2)

@pytest.mark.max_recompiles(0)
def test_a_process_started_in_the_call_counts():
    subprocess.run([sys.executable, "-c", REPORTER + "recompile(5)"], check=True)
'''


def test_only_processes_started_in_the_call_count_and_a_fixtures_are_shown_by_the_phase_that_started_them(  # noqa: E501
        run: RunPytest, pytester: pytest.Pytester, temp: Path) -> None:
    pytester.makepyfile(test_fixture_processes=FIXTURE_PROCESSES)
    result = run("-p", "no:randomly", "-rP", "--nocompile-json=report.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_a_process_started_in_the_call_counts _*",
        "pid *: 1 recompile > max_recompiles(0) (marker on the test)",
    ])
    output = result.stdout.str()
    passes = output.split("= PASSES =")[1].split("short test summary")[0]
    first = passes.split("test_the_server_recompiles_in_a_later_tests_call")[0]
    assert "nocompile recompiles (setup, teardown, not counted)" in first, output
    assert ("(setup) [1/2] recompiled scale (/src/model.py:3)" in first
            and "(teardown) [2/2] recompiled scale" in first), output

    tests = {test["nodeid"].split("::")[1]: test
             for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    first_test = tests["test_sets_up_the_server_which_recompiles_in_its_call"]
    assert first_test["verdict"] == "within budget" and first_test["recompiles"] == 0
    assert sorted(event["phase"]
                  for event in first_test["recompile_events"]) == ["setup", "teardown"]
    assert tests["test_the_server_recompiles_in_a_later_tests_call"]["recompiles"] == 0
    assert tests["test_a_process_started_in_the_call_counts"]["recompiles"] == 1
    # The session server went on compiling in the second test: said once, at the end, against no
    # test.
    result.stdout.fnmatch_lines(["pid * (started in the setup of test_fixture_processes.py::"
                                 "test_sets_up_the_server_which_recompiles_in_its_call): "
                                 "1 recompile after that test ended, not counted"])
    assert not parent_of(temp).exists()


FORKSERVER_OF_A_FIXTURE = '''
import multiprocessing, os, time
import pytest
from pytest_nocompile.features.child_startup.event_writer import EventWriter

def recompile():
    # What a forked child's reporter does: report where the variable it inherited points.
    message = ("Recompiling function scale in /src/model.py:3\\n"
               "    triggered by the following guard failure(s):\\n    - 0/0: n == 1")
    EventWriter(os.environ["PYTEST_NOCOMPILE_EVENTS"]).write(
        {"t": time.time(), "pid": os.getpid(), "rank": None, "event": "recompile",
         "message": message, "compile_id": "0/1", "user_code": None, "thread": None})

def nothing():
    pass

@pytest.fixture
def forkserver():
    context = multiprocessing.get_context("forkserver")
    process = context.Process(target=nothing)
    process.start()  # the fork server starts now, in setup, with setup's variable
    process.join()
    return context

@pytest.mark.max_recompiles(0)
def test_a_child_of_a_fork_server_a_fixture_started_counts_when_the_call_starts_it(forkserver):
    process = forkserver.Process(target=recompile)
    process.start()
    process.join()
    assert process.exitcode == 0
'''


def test_a_fork_server_started_in_setup_still_sends_the_calls_children_to_the_call(
        run: RunPytest, pytester: pytest.Pytester, short_temp: Path) -> None:
    pytester.makepyfile(test_forkserver=FORKSERVER_OF_A_FIXTURE)
    result = run("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["pid *: 1 recompile > max_recompiles(0) (marker on the test)"])
