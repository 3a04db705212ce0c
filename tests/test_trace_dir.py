"""``--nocompile-trace-dir``: a failing watched test keeps torch's structured trace, per process and
rank; a passing one nothing."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from test_capture import STATE_CHECK_CONFTEST

from nocompile_testing import RECOMPILE_ONCE, RunPytest
from pytest_nocompile.features.traces.folders import folder_name

# What a trace file of torch's holds at each graph dynamo starts compiling.
DYNAMO_RECORD = '"dynamo_start"'

# A stand-in for tlparse, on the inner run's PATH: writes the index it was asked for, holding its
# arguments.
FAKE_TLPARSE = '''#!{python}
import json, os, sys
arguments = sys.argv[1:]
out = arguments[arguments.index("-o") + 1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "index.html"), "w") as index:
    json.dump(arguments, index)
'''

# The torch state check, and TORCH_TRACE as each test leaves it (the outermost wrapper, after the
# plugin's).
CONFTEST = STATE_CHECK_CONFTEST + '''
import os
os.environ["PATH"] = (os.path.join(os.path.dirname(__file__), "bin") + os.pathsep
                      + os.environ["PATH"])

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        with open("variable-after.txt", "a") as out:
            out.write(f"{item.name}: {os.environ.get('TORCH_TRACE')}\\n")
'''

TRACED = RECOMPILE_ONCE + '''
import subprocess, sys

CHILD = ("import torch\\ndef child_function(x):\\n    return x + 1\\n"
         "torch.compile(child_function, backend='eager')(torch.ones(2))\\n")

@pytest.mark.max_recompiles(0)
def test_over_budget():
    recompile_once()

@pytest.mark.max_recompiles(1)
def test_within_budget():
    recompile_once()

@pytest.mark.max_recompiles(1)
def test_error_after_compiling():
    recompile_once()
    raise RuntimeError("boom")

@pytest.mark.max_recompiles(1)
def test_child_and_own_process():
    subprocess.run([sys.executable, "-c", CHILD], check=True)
    recompile_once()
    assert False

@pytest.fixture
def failing_teardown():
    yield
    raise RuntimeError("teardown boom")

@pytest.mark.max_recompiles(1)
def test_teardown_error(failing_teardown):
    recompile_once()

@pytest.mark.max_recompiles(1)
def test_fails_without_compiling():
    assert False
'''


def kept_folders(traces: Path) -> dict[str, list[str]]:
    """Each folder under ``traces``, hidden ones too, with its trace files."""
    return {folder.name: sorted(path.name for path in folder.glob("*.log"))
            for folder in traces.iterdir()}


def test_a_failing_test_keeps_its_trace_a_passing_one_nothing(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_traced=TRACED)
    tlparse = pytester.path / "bin" / "tlparse"
    tlparse.parent.mkdir()
    tlparse.write_text(FAKE_TLPARSE.format(python=sys.executable))
    tlparse.chmod(0o755)
    result = run("-p", "no:logging", "--nocompile-trace-dir=traces", "--nocompile-json=report.json",
                 "--junitxml=junit.xml")
    result.assert_outcomes(passed=2, failed=4, errors=1)
    traces = pytester.path / "traces"
    folders = kept_folders(traces)
    failed = ["test_over_budget", "test_error_after_compiling", "test_child_and_own_process",
              "test_teardown_error"]
    # Kept: the failures that compiled, nothing else (no scratch folder left either).
    assert sorted(folders) == sorted(f"test_traced.py_{name}" for name in failed), folders
    for name in failed:
        files = folders[f"test_traced.py_{name}"]
        # one per process that compiled
        assert len(files) == (2 if name == "test_child_and_own_process" else 1), files
        for file_name in files:
            text = (traces / f"test_traced.py_{name}" / file_name).read_text()
            assert DYNAMO_RECORD in text
            index = (traces / f"test_traced.py_{name}" / file_name.removesuffix(".log")
                     / "index.html")
            assert json.loads(index.read_text())[1:] == ["-o", str(index.parent), "--overwrite",
                                                         "--no-browser"]
    # A file per process: the child's compiled its function, the test's own process its own.
    both = traces / "test_traced.py_test_child_and_own_process"
    compiled = sorted(sorted(set(re.findall(r'"co_name": "(\w+)"', (both / name).read_text())))
                      for name in folders[both.name])
    assert compiled == [["child_function"], ["scale"]]

    # The failure says where, with tlparse's index (one trace file: its own index).
    kept = traces / "test_traced.py_test_over_budget"
    (log,) = folders[kept.name]
    result.stdout.fnmatch_lines([
        "*- nocompile trace -*",
        f"trace: {kept} (tlparse: {kept / log.removesuffix('.log') / 'index.html'})",
    ])
    result.stdout.fnmatch_lines(
        [f"trace: {both} (tlparse: {both}/*/index.html, one per trace file)"])
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_teardown_error*", "*teardown boom*",
                                 "*- nocompile trace -*",
                                 f"trace: {traces / 'test_traced.py_test_teardown_error'}"])
    assert result.stdout.str().count("trace: ") == 4  # not for the failure that compiled nothing

    tests = {test["nodeid"].partition("::")[2]: test
             for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    assert {name: test["trace"] for name, test in tests.items()} == {
        name: str(traces / f"test_traced.py_{name}") if name in failed else None for name in tests
    }
    junit = ElementTree.parse(pytester.path / "junit.xml")
    properties = {case.get("name"): [p.get("value") for p in case.iter("property")
                                     if p.get("name") == "nocompile_trace"]
                  for case in junit.iter("testcase")}
    assert properties["test_over_budget"] == [str(kept)] and properties["test_within_budget"] == []

    # torch's logging and the environment as each test found them.
    assert set((pytester.path / "state-differences.txt").read_text().splitlines()) == {
        f"{name}: []" for name in tests}
    assert set((pytester.path / "variable-after.txt").read_text().splitlines()) == {
        f"{name}: None" for name in tests}


SPAWNED_RANKS = '''
import pytest, torch.multiprocessing as mp

def worker(rank, store):
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    f = torch.compile(lambda x, n: x * n, backend="eager")
    f(torch.ones(2), 1)
    f(torch.ones(2), 2)
    dist.barrier()
    dist.destroy_process_group()

@pytest.mark.max_recompiles(0)
def test_ranks(tmp_path):
    mp.spawn(worker, args=(str(tmp_path / "store"),), nprocs=2)
'''


def test_each_rank_keeps_its_own_trace(run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ranks=SPAWNED_RANKS)
    result = run("--nocompile-trace-dir=traces")
    result.assert_outcomes(failed=1)
    folder = pytester.path / "traces" / "test_ranks.py_test_ranks"
    files = kept_folders(folder.parent)[folder.name]
    assert [re.sub(r"_rank_(\d)_.*", r"_rank_\1", name) for name in files] == [
        # torch's own names
        "dedicated_log_torch_trace_rank_0", "dedicated_log_torch_trace_rank_1"], files
    assert all(DYNAMO_RECORD in (folder / name).read_text() for name in files)
    result.stdout.fnmatch_lines([f"trace: {folder}"])


TORCH_IMPORTED_IN_A_TEST = '''
import pytest

@pytest.mark.max_recompiles(0)
def test_imports_torch():
    import torch  # reads TORCH_TRACE, as the plugin set it for the test's processes
    def scale(x, n):
        return x * n
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)

def test_later():
    import torch, torch._logging._internal as internal
    folders = [handler.root_dir for handler in internal.trace_log.handlers
               if isinstance(handler, internal.LazyTraceHandler)]
    assert folders in ([], [None])  # torch's own handler, as it would be without the variable
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    assert not any(isinstance(handler, internal.LazyTraceHandler)
                   for handler in internal.trace_log.handlers)
'''


@pytest.mark.fresh_interpreter  # torch first imported inside a test
def test_torch_imported_in_a_test_writes_there_then_is_given_back(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_import=TORCH_IMPORTED_IN_A_TEST)
    result = run("--nocompile-trace-dir=traces")
    result.assert_outcomes(passed=1, failed=1)
    traces = pytester.path / "traces"
    (log,) = kept_folders(traces)["test_import.py_test_imports_torch"]
    # a compile, a recompile
    assert ((traces / "test_import.py_test_imports_torch" / log).read_text().count(DYNAMO_RECORD)
            == 2)
    assert sorted(path.name for path in traces.iterdir()) == ["test_import.py_test_imports_torch"]


CHILD_SAYS_ITS_VARIABLE = '''
import os, subprocess, sys, pytest

@pytest.mark.max_recompiles(0)
def test_child():
    code = "import os; print('child sees', os.environ.get('TORCH_TRACE'))"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert False
'''


def test_off_by_default_no_trace_and_no_variable(run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_child=CHILD_SAYS_ITS_VARIABLE)
    result = run("-rA")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["child sees None"])
    assert "trace: " not in result.stdout.str()
    # On, the child is pointed at a folder of the test's, in DIR's scratch folder.
    result = run("-rA", "--nocompile-trace-dir=traces")
    result.stdout.fnmatch_lines([f"child sees {pytester.path / 'traces'}/.nocompile-*/running"])
    # nothing compiled: nothing kept, scratch removed
    assert list((pytester.path / "traces").iterdir()) == []


def test_a_folder_that_cannot_be_written_is_a_usage_error(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    (pytester.path / "a_file").write_text("")
    result = run("--nocompile-trace-dir=a_file/traces")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --nocompile-trace-dir: "
                                 f"cannot keep traces in {pytester.path / 'a_file' / 'traces'}: *"])


def test_the_users_torch_trace_wins_and_is_said_once(
        run: RunPytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_child=CHILD_SAYS_ITS_VARIABLE)
    mine = pytester.path / "my-traces"
    monkeypatch.setenv("TORCH_TRACE", str(mine))
    result = run("-rA", "--nocompile-trace-dir=traces")
    result.stdout.fnmatch_lines([f"child sees {mine}"])
    assert result.stdout.lines.count("nocompile: --nocompile-trace-dir is not used: "
                                     "TORCH_TRACE is set, and torch writes every "
                                     f"process's structured trace to {mine}") == 1
    assert not (pytester.path / "traces").exists()


def test_xdist_workers_keep_their_tests_traces_from_the_ini_key(
        run: RunPytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    pytester.makeini("[pytest]\nnocompile_trace_dir = out/traces\n")
    pytester.makepyfile(test_traced=TRACED)
    # the ini key's folder is the ini file's, not the working one's
    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    result = run("-p", "xdist", "-n", "2", "--nocompile-json=report.json", str(pytester.path))
    result.assert_outcomes(passed=2, failed=4, errors=1)
    traces = pytester.path / "out" / "traces"
    assert len(kept_folders(traces)) == 4
    tests = {test["nodeid"].partition("::")[2]: test for test in json.loads(
        (pytester.path / "elsewhere" / "report.json").read_text())["tests"]}
    # carried from the worker
    assert tests["test_over_budget"]["trace"] == str(traces / "test_traced.py_test_over_budget")


@pytest.mark.parametrize(("nodeid", "name"), [
    ("test_a.py::test_b", "test_a.py_test_b"),
    ("tests/test_a.py::Test::test_b[1-x/y]", "tests_test_a.py_Test_test_b_1-x_y"),
    ("test_a.py::test_b[ü]", "test_a.py_test_b"),
])
def test_folder_names(nodeid: str, name: str) -> None:
    assert folder_name(nodeid) == name


def test_a_long_node_id_is_cut_and_told_apart() -> None:
    first, second = (folder_name("test_a.py::test_b[" + "x" * 300 + "1]"),
                     folder_name("test_a.py::test_b[" + "x" * 300 + "2]"))
    assert len(first) == len(second) == 120 and first != second


AGAINST_THE_BASELINE = RECOMPILE_ONCE + '''
def test_rises():
    recompile_once()

def test_steady():
    torch.compile(scale, backend="eager")(torch.ones(2), 2)
'''
# Counts only (any torch): test_rises compiled once and never recompiled when it was saved.
RISING_BASELINE = {"format": "pytest-nocompile-baseline/1", "tests": {
    "test_base.py::test_rises": {"compiles": 1, "recompiles": 0, "graph_breaks": 0},
    "test_base.py::test_steady": {"compiles": 1, "recompiles": 0, "graph_breaks": 0},
}}


@pytest.mark.parametrize("workers", [(), ("-p", "xdist", "-n", "2")], ids=["one process", "xdist"])
def test_a_passing_test_that_rose_against_the_baseline_keeps_its_trace(
        run: RunPytest, pytester: pytest.Pytester, workers: tuple[str, ...]) -> None:
    if workers:
        # a worker decides for its own tests, with the baseline it loads itself
        pytest.importorskip("xdist")
    pytester.makepyfile(test_base=AGAINST_THE_BASELINE)
    (pytester.path / "baseline.json").write_text(json.dumps(RISING_BASELINE))
    result = run("-p", "no:logging", *workers, "--nocompile-trace-dir=traces",
                 "--nocompile-compare=baseline.json", "--nocompile-json=report.json")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    traces = pytester.path / "traces"
    kept = traces / "test_base.py_test_rises"
    # not the steady test's, and no scratch folder left
    assert list(kept_folders(traces)) == [kept.name]
    (log,) = kept_folders(traces)[kept.name]
    assert (kept / log).read_text().count(DYNAMO_RECORD) == 2  # its compile and its recompile
    # Named where the baseline failure names the test, and in the JSON report.
    result.stdout.fnmatch_lines([
        "test_base.py::test_rises: compiles rose 1 -> 2, recompiles rose 0 -> 1",
        "    recompiled scale (test_base.py:3): guard failed: *",
        "        triggered by: test_base.py:9 in recompile_once: f(torch.ones(2), 3)",
        f"    trace: {kept}",
    ])
    assert result.stdout.str().count("trace: ") == 1
    tests = {test["nodeid"]: test["trace"]
             for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    assert tests == {"test_base.py::test_rises": str(kept), "test_base.py::test_steady": None}


CHILD_STARTED_WITH_ITS_OWN_ENVIRONMENT = '''
import os, subprocess, sys, pytest
from pytest_nocompile import child_env

CHILD = ("import torch\\ndef child_function(x):\\n    return x + 1\\n"
         "torch.compile(child_function, backend='eager')(torch.ones(2))\\n")

@pytest.mark.max_compiles(0)
def test_child():
    env = child_env({"PATH": os.environ["PATH"]})
    assert env["TORCH_TRACE"] == os.environ["TORCH_TRACE"]  # the test's folder
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=True)
'''


def test_a_child_started_with_child_env_writes_its_trace_in_the_tests_folder(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_child=CHILD_STARTED_WITH_ITS_OWN_ENVIRONMENT)
    result = run("--nocompile-trace-dir=traces")
    result.assert_outcomes(failed=1)
    # watched, through child_env
    result.stdout.fnmatch_lines(["pid * (*): 1 compile > max_compiles(0) (marker on the test)"])
    folder = pytester.path / "traces" / "test_child.py_test_child"
    # the child's: the test's own process compiled nothing
    (log,) = kept_folders(folder.parent)[folder.name]
    assert re.findall(r'"co_name": "(\w+)"', (folder / log).read_text())[:1] == ["child_function"]


FAILING_TLPARSE = '''#!{python}
import sys
print("cannot parse this", file=sys.stderr)
sys.exit(2)
'''


def test_a_trace_kept_for_the_baseline_that_tlparse_fails_on_is_a_warning_not_an_error(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    # The test has passed when its result is compared: -W error cannot fail it any more, nor may it
    # end the run.
    pytester.makepyfile(test_base=AGAINST_THE_BASELINE)
    (pytester.path / "baseline.json").write_text(json.dumps(RISING_BASELINE))
    tlparse = pytester.path / "bin" / "tlparse"
    tlparse.parent.mkdir()
    tlparse.write_text(FAILING_TLPARSE.format(python=sys.executable))
    tlparse.chmod(0o755)
    pytester.makeconftest("import os\n"
                          f"os.environ['PATH'] = {str(tlparse.parent)!r} + os.pathsep + "
                          "os.environ['PATH']\n")
    result = run("-p", "no:logging", "-W", "error::pytest.PytestWarning",
                 "--nocompile-trace-dir=traces", "--nocompile-compare=baseline.json")
    result.assert_outcomes(passed=2, warnings=1)
    kept = pytester.path / "traces" / "test_base.py_test_rises"
    result.stdout.fnmatch_lines([
        "*= warnings summary =*", "test_base.py::test_rises",
        f"  test_base.py:*: TraceWarning: tlparse failed on {kept}/dedicated_log_torch_trace_*.log "
        "(exit code 2): cannot parse this", f"    trace: {kept}"], consecutive=False)
    assert "INTERNALERROR" not in result.stdout.str()
