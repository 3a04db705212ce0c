"""Processes a watched test starts report their recompiles to it, each budgeted on its own.

Each inner run here starts real Python processes (spawn, fork, forkserver,
subprocess, torchrun), so the scenarios share runs: one run, several tests,
outcomes asserted per test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from nocompile_testing import RunPytest, expect_lines, line_regex

ENV_VAR = "PYTEST_NOCOMPILE_EVENTS"

# What the children below run: compile once with n=1, and with RECOMPILE, again with n=2. A named
# function, not a lambda: torch 2.11 guards a lambda of exec'd code through its own wrapper
# (args[1]).
CHILD_CODE = '''
import torch
def scale(x, n):
    return x * n
f = torch.compile(scale, backend="eager")
f(torch.ones(2), 1)
if RECOMPILE:
    f(torch.ones(2), 2)
'''

HELPERS = f'''
import os, signal, subprocess, sys, tempfile
import pytest

CHILD_CODE = {CHILD_CODE!r}

def python(code, recompile=True, **kwargs):
    return subprocess.run([sys.executable, "-c", f"RECOMPILE = {{recompile}}\\n" + code], **kwargs)

def compile_in_process(recompile):
    # A module name: torch 2.4 wraps a function of no module in its own helper before compiling it.
    exec(f"RECOMPILE = {{recompile}}\\n" + CHILD_CODE, {{"__name__": __name__}})
'''



def two_rank_tests(target: str, over: str, within: str) -> str:
    """Two user tests spawning ``target(rank, store, odd_rank)`` on two gloo ranks: rank 1 is odd in
    ``over``, none in ``within``."""
    return f'''
@pytest.mark.max_recompiles(0)
def {over}(tmp_path):
    mp.spawn({target}, args=(str(tmp_path / "store"), 1), nprocs=2)

@pytest.mark.max_recompiles(0)
def {within}(tmp_path):
    mp.spawn({target}, args=(str(tmp_path / "store"), -1), nprocs=2)
'''


SPAWNED_RANKS = HELPERS + '''
import torch.multiprocessing as mp

def worker(rank, store, recompiling_rank):
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    f = torch.compile(lambda x, n: x * n, backend="eager")
    f(torch.ones(2), 1)
    if rank == recompiling_rank:
        f(torch.ones(2), 2)
    dist.barrier()
    dist.destroy_process_group()
''' + two_rank_tests("worker", "test_rank_1_recompiles", "test_both_ranks_clean")


def test_spawned_rank_that_recompiles_fails_the_test_naming_it(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ranks=SPAWNED_RANKS)
    result = run("--nocompile-json=report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    expect_lines(result, [
        "rank 1 (pid *, multiprocessing SpawnProcess-*): 1 recompile > max_recompiles(0) "
        "(marker on the test)",
        "[1/1] recompiled <lambda> (test_ranks.py:*)",
        "    guard failed: 0/0: n == 1",
    ])
    result.stdout.fnmatch_lines(
        ["    triggered by: test_ranks.py:* in worker: f(torch.ones(2), 2)"])
    assert "rank 0 (pid" not in result.stdout.str()  # within budget: not in the failure
    result.stdout.re_match_lines([line_regex(
        "test_ranks.py::test_rank_1_recompiles: rank 1 (pid *): <lambda> recompiled: 0/0: n == 1")])

    tests = {test["nodeid"]: test
             for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    failing = tests["test_ranks.py::test_rank_1_recompiles"]
    assert failing["recompiles"] == 1  # the worst process's
    by_rank = {process["rank"]: process for process in failing["processes"]
               if not process["test_process"]}
    assert by_rank[1]["recompiles"] == 1 and by_rank[1]["compiles"] == 2
    assert by_rank[1]["command"].startswith("multiprocessing SpawnProcess-")
    assert [event["process"]["rank"] for event in failing["recompile_events"]] == [1]
    clean = tests["test_ranks.py::test_both_ranks_clean"]
    assert clean["verdict"] == "within budget" and clean["recompiles"] == 0
    # the test's own, then two ranks
    assert sorted(process["compiles"] for process in clean["processes"]) == [0, 1, 1]

    junit = ElementTree.parse(pytester.path / "junit.xml")
    properties = [(p.get("name"), p.get("value")) for p in junit.iter("property")]
    assert any(name == "nocompile_process" and str(value).startswith("rank 1 (pid ")
               and "recompiles=1" in str(value) for name, value in properties)


CHILDREN_OF_EVERY_KIND = HELPERS + '''
import multiprocessing

def recompile_in_child():
    compile_in_process(True)

def run_in(method):
    child = multiprocessing.get_context(method).Process(target=recompile_in_child)
    child.start()
    child.join()
    assert child.exitcode == 0

@pytest.mark.max_recompiles(0)
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing(method):
    run_in(method)

@pytest.mark.max_recompiles(0)
def test_plain_subprocess(capfd):
    done = python(CHILD_CODE + "print('child says hi')")
    assert done.returncode == 0
    assert "child says hi" in capfd.readouterr().out  # the child's output is its own

@pytest.mark.max_recompiles(0)
def test_child_exits_hard_after_recompiling():
    assert python(CHILD_CODE + "import os; os._exit(3)").returncode == 3  # its exit code unchanged

@pytest.mark.max_recompiles(0)
def test_child_killed_after_recompiling():
    assert python(CHILD_CODE + "import os, signal; "
                  "os.kill(os.getpid(), signal.SIGKILL)").returncode == -signal.SIGKILL

@pytest.mark.max_recompiles(0)
def test_grandchild():
    inner = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
             f"{('RECOMPILE = True' + CHILD_CODE)!r}], check=True)")
    python(inner, check=True)

@pytest.mark.max_recompiles(0)
def test_child_that_compiles_once_passes():
    python(CHILD_CODE, recompile=False, check=True)

@pytest.mark.max_recompiles(1)
def test_children_within_their_own_budgets():
    python(CHILD_CODE, check=True)
    python(CHILD_CODE, check=True)  # one recompile each: a budget is per process
'''


def test_children_of_every_kind_report_to_their_test(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_children=CHILDREN_OF_EVERY_KIND)
    result = run("-rA")
    outcomes = {line.split()[1]: line.split()[0] for line in result.stdout.lines
                if line.startswith(("PASSED ", "FAILED "))}
    assert outcomes == {
        "test_children.py::test_multiprocessing[fork]": "FAILED",
        "test_children.py::test_multiprocessing[forkserver]": "FAILED",
        "test_children.py::test_multiprocessing[spawn]": "FAILED",
        "test_children.py::test_plain_subprocess": "FAILED",
        "test_children.py::test_child_exits_hard_after_recompiling": "FAILED",
        "test_children.py::test_child_killed_after_recompiling": "FAILED",
        "test_children.py::test_grandchild": "FAILED",
        "test_children.py::test_child_that_compiles_once_passes": "PASSED",
        "test_children.py::test_children_within_their_own_budgets": "PASSED",
    }, result.stdout.str()
    # Every failure names its child process and the guard (the test's own process never compiles).
    # Counted in the failure sections: with CI set, pytest repeats whole messages in its short
    # summary.
    failures = result.stdout.str().split("short test summary info")[0].splitlines()
    # Each child is named by what it runs: its multiprocessing name, else its command line
    # (shortened).
    headline = re.compile(
        r"pid \d+ \((?P<name>.*)\): 1 recompile > max_recompiles\(0\) \(marker on the test\)")
    names = [match["name"] for match in map(headline.fullmatch, failures) if match]
    python_c = (r"python -c 'RECOMPILE = True import torch def scale\(x, n\): r…"
                r"|python3 -c 'RECOMPILE = True import torch def scale\(x, n\): …")
    expected = [r"multiprocessing ForkProcess-\d+", r"multiprocessing ForkServerProcess-\d+",
                r"multiprocessing SpawnProcess-\d+", *[python_c] * 4]
    assert len(names) == 7 and all(re.fullmatch(pattern, name)
                                   for pattern, name in zip(expected, names)), names
    assert len([line for line in failures
                if re.fullmatch(r"    guard failed: (0/0: )?(n|L\['n'\]) == 1", line)]) == 7


FIXTURE_SERVER = HELPERS + '''
import time

@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A process that compiles and recompiles when told to, started by the first test that asks
    for it."""
    folder = tmp_path_factory.mktemp("server")
    code = ("import os, time\\n"
            f"while not os.path.exists({str(folder / 'go')!r}): time.sleep(0.05)\\n"
            f"RECOMPILE = True\\n{CHILD_CODE}\\nopen({str(folder / 'done')!r}, 'w').close()\\n")
    process = subprocess.Popen([sys.executable, "-c", code])
    yield folder
    process.wait(timeout=120)

@pytest.mark.max_recompiles(0)
def test_starts_the_server(server):
    assert os.environ["PYTEST_NOCOMPILE_EVENTS"]

@pytest.mark.max_recompiles(0)
def test_server_recompiles_during_a_later_test(server):
    (server / "go").write_text("go")
    deadline = time.monotonic() + 120
    # it recompiles now, in this test's call
    while not (server / "done").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (server / "done").exists()

def test_unwatched_test_has_no_variable():
    assert "PYTEST_NOCOMPILE_EVENTS" not in os.environ
'''


def test_a_process_started_by_an_earlier_test_does_not_count_against_a_later_one(
        run: RunPytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = pytester.mkdir("temp")
    monkeypatch.setenv("TMPDIR", str(temp))
    pytester.makepyfile(test_server=FIXTURE_SERVER)
    result = run("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["no test compiled in its call phase (2 watched)"])
    # nothing left behind
    assert [name for name in os.listdir(temp) if name.startswith("pytest-nocompile-")] == []


IDLE_RUN = HELPERS + '''
def test_only_a_child_compiles():
    python(CHILD_CODE, check=True)

def test_variable_is_set_for_the_test_only():
    assert os.environ.get("PYTEST_NOCOMPILE_EVENTS", "unset").startswith(EXPECTED)
'''


def test_a_run_wide_budget_fails_a_test_whose_child_recompiles_though_its_own_process_never_compiles(  # noqa: E501
        run: RunPytest, pytester: pytest.Pytester) -> None:
    # The test's process never imports dynamo, so the run idles: the child must still be watched.
    pytester.makepyfile(test_idle=IDLE_RUN.replace("EXPECTED", "tempfile.gettempdir()"))
    result = run("--max-recompiles=0", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*_ test_only_a_child_compiles _*",
                                 "pid *: 1 recompile > max_recompiles(0) (from --max-recompiles)"])


def test_the_opt_out_watches_the_test_process_only(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_idle=IDLE_RUN.replace("EXPECTED", "'unset'"))
    run("--max-recompiles=0", "--nocompile-no-subprocess").assert_outcomes(passed=2)
    pytester.makeini("[pytest]\nnocompile_subprocess = false\n")
    run("--max-recompiles=0").assert_outcomes(passed=2)


FIXTURES_AND_LOGS = HELPERS + '''
from pytest_nocompile import RecompileBudgetExceeded

def test_recompiles_fixture_lists_children(nocompile_recompiles):
    python(CHILD_CODE, check=True, env={**os.environ, "RANK": "3"})
    assert len(nocompile_recompiles) == 1
    event = nocompile_recompiles[0]
    assert event.process.rank == 3 and event.process.pid != os.getpid()
    assert event.phase == "call" and event.function == "scale"

def test_block_counts_children(nocompile_assert_max_recompiles):
    with pytest.raises(RecompileBudgetExceeded,
                       match=r"pid \\d+ \\(python3? -c 'RECOMPILE = True import torch .*\\): "
                             r"1 recompile > nocompile_assert_max_recompiles\\(0\\)"):
        with nocompile_assert_max_recompiles(0):
            python(CHILD_CODE, check=True)
    with nocompile_assert_max_recompiles(1) as block:
        python(CHILD_CODE, check=True)
    assert block.counted == 1

@pytest.mark.max_recompiles(0)
def test_users_own_torch_logs_still_print_in_the_child():
    done = python(CHILD_CODE, env={**os.environ, "TORCH_LOGS": "recompiles"},
                  capture_output=True, text=True)
    assert "Recompiling function" in done.stderr
'''


def test_fixtures_see_children_and_a_childs_own_torch_logs_still_print(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fixtures=FIXTURES_AND_LOGS)
    result = run("-rA")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*_ test_users_own_torch_logs_still_print_in_the_child _*",
                                 "pid *: 1 recompile > max_recompiles(0) (marker on the test)"])


def test_xdist_workers_watch_their_tests_children(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_children=HELPERS + '''
@pytest.mark.max_recompiles(0)
def test_recompiling_child():
    python(CHILD_CODE, check=True)

@pytest.mark.max_recompiles(0)
def test_clean_child():
    python(CHILD_CODE, recompile=False, check=True)
''')
    result = run("-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.re_match_lines([line_regex(
        "test_children.py::test_recompiling_child: pid *: scale recompiled: 0/0: n == 1")])


TORCHRUN_SCRIPT = '''
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
f = torch.compile(lambda x, n: x * n, backend="eager")
f(torch.ones(2), 1)
if rank == 1:
    f(torch.ones(2), 2)
dist.destroy_process_group()
'''


def test_torchrun_workers_report_with_their_rank(run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(train=TORCHRUN_SCRIPT)
    pytester.makepyfile(test_torchrun='''
import subprocess, sys
import pytest

@pytest.mark.max_recompiles(0)
def test_train_under_torchrun():
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node=2", "train.py"], check=True)
''')
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["rank 1 (pid *): 1 recompile > max_recompiles(0) (marker on the test)"])
    assert "rank 0 (pid" not in result.stdout.str().split("= nocompile =")[0]


DDP = '''
import pytest, torch
import torch.multiprocessing as mp

def train(rank, store, shape_changes_on_rank):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.compile(torch.nn.Linear(4, 1), backend="eager"))
    for step in range(3):
        # the batch shape depends on the rank
        rows = 8 if rank == shape_changes_on_rank and step == 2 else 4
        model(torch.randn(rows, 4)).sum().backward()
    # without it a rank could exit with gloo's work in flight and abort
    # (torch 2.13 CPU: 5 runs in 8)
    dist.barrier()
    dist.destroy_process_group()
''' + two_rank_tests("train", "test_rank_1_batch_shape_changes", "test_fixed_shapes")


def test_ddp_on_gloo_whose_batch_shape_depends_on_the_rank(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ddp=DDP)
    result = run()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_rank_1_batch_shape_changes _*",
        "rank 1 (pid *): 1 recompile > max_recompiles(0) (marker on the test)",
        "?1/1? recompiled *",
        "    guard failed: *size mismatch at index 0. expected 4, actual 8",
        "    triggered by: test_ddp.py:13 in train: model(torch.randn(rows, 4)).sum().backward()"])


# -- the start-up hook ------------------------------------------------------------------


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != ENV_VAR}
    return subprocess.run([sys.executable, "-c", code], env={**environment, **env},
                          capture_output=True, text=True, check=True)


def test_the_start_up_hook_is_installed_and_imports_nothing_unless_asked(tmp_path: Path) -> None:
    import site
    import sysconfig

    hook = Path(__file__).parent.parent / "pytest-nocompile.pth"
    folders = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    installed = [Path(folder) / hook.name for folder in folders
                 if (Path(folder) / hook.name).exists()]
    assert installed and installed[0].read_text() == hook.read_text()
    assert ENV_VAR in hook.read_text()

    probe = ("import sys; print(sorted(m for m in sys.modules if m.startswith(('pytest_nocompile', "
             "'torch', 'logging'))))")
    assert _python(probe).stdout.strip() == "[]"
    armed = _python(probe, **{ENV_VAR: str(tmp_path / "test")}).stdout
    assert ("pytest_nocompile.features.child_startup.startup" in armed and "torch" not in armed
            and "logging" not in armed)
    assert not (tmp_path / "test").exists()  # nothing compiled: nothing written


SKIPPED_THEN_PLAIN = '''
import os
import pytest

@pytest.mark.skip(reason="needs CUDA")
@pytest.mark.max_recompiles(0)
def test_skipped():
    pass

def test_after():
    assert "PYTEST_NOCOMPILE_EVENTS" not in os.environ, os.environ["PYTEST_NOCOMPILE_EVENTS"]
'''


def test_a_skipped_watched_test_leaves_no_folder_named_in_the_environment(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    # Its watch closes at its skipped setup: its teardown must not name a folder again.
    pytester.makepyfile(test_skips=SKIPPED_THEN_PLAIN)
    result = run("-p", "no:randomly")
    result.assert_outcomes(passed=1, skipped=1)
