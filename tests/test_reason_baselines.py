"""Baselines gate on why: a new reason with the same count fails, per torch version, across shards
(issue 30)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nocompile_testing import PRINT_BREAK_REASON, TORCH, RunPytest, expect_lines

MINOR = f"{TORCH[0]}.{TORCH[1]}"
# Another torch's minor release, never the running one: what a CI job on another torch saved.
OTHER_MINOR = f"{TORCH[0]}.{TORCH[1] + 1}"
# Set by scripts/torch_matrix.py --baseline PATH: one file that every torch of the matrix saves into
# and compares with.
MATRIX_BASELINE = "NOCOMPILE_MATRIX_BASELINE"

STEP = '''
import torch

def scale(x, n):
    return x * n

def test_step():
    f = torch.compile(scale, backend="eager")
    for n in ({first}, {second}):
        f(torch.ones(2), n)

def test_quiet():
    torch.compile(scale, backend="eager")(torch.ones(2), 2)
'''


def _saved(pytester: pytest.Pytester, name: str = "baseline.json") -> Any:
    return json.loads((pytester.path / name).read_text())


def test_a_new_guard_class_with_the_same_count_fails_and_saving_again_clears_it(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_step=STEP.format(first=2, second=3))
    run("--nocompile-save=baseline.json").assert_outcomes(passed=2)
    assert _saved(pytester)["torch"][MINOR]["test_step.py::test_step"]["reasons"] == [
        "recompile scale (test_step.py): python int n"]
    # The same one recompile, now of a float: the count stays 1, the reason is new.
    pytester.makepyfile(test_step=STEP.format(first=0.5, second=0.25))
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    expect_lines(result, [
        "*= nocompile baseline baseline.json =*",
        f"compared with the entries for torch {MINOR}",
        "test_step.py::test_step: new reason: recompile scale (test_step.py): python float n",
        "    recompiled scale (test_step.py:3): guard failed: 0/0: n == 0.5",
        "        triggered by: test_step.py:9 in test_step: f(torch.ones(2), n)",
        "        usual fix: n is a Python float that changes (a scheduled learning rate): "
        "hold it in a tensor, e.g. torch.tensor(0.01)",
        "test_step.py::test_step: reason gone: recompile scale (test_step.py): python int n",
    ])
    assert result.outlines[-1] == ("nocompile: run FAILED (exit code 1) though every test passed: "
                                   "1 new reason against the baseline baseline.json, "
                                   "in 1 test (listed above)")
    # Saving again is the update: the same code then compares clean.
    run("--nocompile-save=baseline.json").assert_outcomes(passed=2)
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    assert result.ret == pytest.ExitCode.OK
    expect_lines(result, ["*= nocompile baseline baseline.json =*",
                          f"compared with the entries for torch {MINOR}",
                          "no change against the baseline"])


def test_a_moved_line_and_a_new_value_make_no_reason_new(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_step=STEP.format(first=0.5, second=0.25))
    run("--nocompile-save=baseline.json").assert_outcomes(passed=2)
    # Three lines pushed down, other floats: the same function recompiles on the same class of
    # guard.
    pytester.makepyfile(
        test_step="# moved\n# down\n# by three\n" + STEP.format(first=0.125, second=0.75))
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    assert result.ret == pytest.ExitCode.OK
    expect_lines(result, [f"compared with the entries for torch {MINOR}",
                          "no change against the baseline"])

BREAKING = '''
import torch

def step(x):
    x = x + 1
    {breaker}
    return x * 2

def test_breaks():
    torch.compile(step, backend="eager")(torch.ones(2))
'''


@pytest.mark.skipif(TORCH < (2, 6), reason="torch 2.4 and 2.5 log a graph break without its "
                                           "reason: every kind reads the same")
def test_a_graph_break_of_another_kind_with_the_same_count_is_new(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_breaks=BREAKING.format(breaker='print("side effect")'))
    run("--nocompile-save=baseline.json").assert_outcomes(passed=1)
    pytester.makepyfile(test_breaks=BREAKING.format(breaker="torch._dynamo.graph_break()"))
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "test_breaks.py::test_breaks: new reason: graph break in step (test_breaks.py): *",
        "    graph break at test_breaks.py:5: *",
        "        user code: test_breaks.py:5 in step: torch._dynamo.graph_break()",
        "test_breaks.py::test_breaks: reason gone: graph break in step (test_breaks.py): *",
    ])
    assert "graph breaks rose" not in result.stdout.str()  # one graph break, as before


def test_one_file_keeps_each_torch_versions_entries(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    """Saving on this torch adds its entries and keeps the other versions'; a compare reads its own.

    Run through ``scripts/torch_matrix.py --baseline PATH``, every torch of the matrix saves into
    and reads the one file at PATH.
    """
    shared = os.environ.get(MATRIX_BASELINE)
    path = Path(shared) if shared else pytester.path / "baseline.json"
    if not shared:  # an entry as another torch wrote it
        path.write_text(json.dumps({"format": "pytest-nocompile-baseline/2", "torch": {"2.99": {
            "test_step.py::test_step": {
                "compiles": 5, "recompiles": 4, "graph_breaks": 0,
                "reasons": ["recompile scale (test_step.py): python bool n"]},
        }}}))
    before = json.loads(path.read_text())["torch"] if path.exists() else {}
    pytester.makepyfile(test_step=STEP.format(first=2, second=3))
    run(f"--nocompile-save={path}").assert_outcomes(passed=2)
    after = json.loads(path.read_text())["torch"]
    assert {minor: entries for minor, entries in after.items() if minor != MINOR} == {
        minor: entries for minor, entries in before.items() if minor != MINOR}
    assert after[MINOR]["test_step.py::test_step"]["reasons"] == [
        "recompile scale (test_step.py): python int n"]
    result = run("-p", "no:logging", f"--nocompile-compare={path}")
    assert result.ret == pytest.ExitCode.OK
    expect_lines(result, [f"compared with the entries for torch {MINOR}",
                          "no change against the baseline"])


def test_a_torch_without_entries_compares_with_the_nearest_older(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    older, newer = f"{TORCH[0]}.{TORCH[1] - 1}", f"{TORCH[0]}.{TORCH[1] + 1}"
    entry = {"compiles": 2, "recompiles": 1, "graph_breaks": 0,
             "reasons": ["recompile scale (test_step.py): python int n"]}
    (pytester.path / "baseline.json").write_text(json.dumps({
        "format": "pytest-nocompile-baseline/2", "torch": {
        older: {"test_step.py::test_step": entry, "test_step.py::test_quiet": {
            **entry, "compiles": 1, "recompiles": 0, "reasons": []}},
        newer: {"test_step.py::test_step": {
            **entry, "reasons": ["recompile scale (test_step.py): python float n"]}},
    }}))
    pytester.makepyfile(test_step=STEP.format(first=2, second=3))
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    assert result.ret == pytest.ExitCode.OK
    expect_lines(result, [
        f"no entries for torch {MINOR}: compared with torch {older}'s, the nearest older",
        "no change against the baseline"])
    (pytester.path / "baseline.json").write_text(json.dumps({
        "format": "pytest-nocompile-baseline/2", "torch": {
        newer: {"test_step.py::test_step": entry}}}))
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    expect_lines(result, [
        f"no entries for torch {MINOR} or older: compared with torch {newer}'s, the nearest newer"])


def _merge(pytester: pytest.Pytester, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_nocompile", "merge", *arguments],
                          cwd=pytester.path, capture_output=True, text=True, timeout=120)


def test_shards_merge_into_one_baseline_and_each_compares_clean(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_step=STEP.format(first=2, second=3))
    run("--nocompile-save=shard-1.json",
        "-k", "not test_quiet").assert_outcomes(passed=1, deselected=1)
    run("--nocompile-save=shard-2.json", "-k", "test_quiet").assert_outcomes(passed=1, deselected=1)
    merged = _merge(pytester, "baseline.json", "shard-1.json", "shard-2.json")
    assert (merged.returncode, merged.stdout, merged.stderr) == (
        0, f"merged 2 files into baseline.json (torch {MINOR}: 2 tests)\n", "")
    assert sorted(_saved(pytester)["torch"][MINOR]) == ["test_step.py::test_quiet",
                                                        "test_step.py::test_step"]
    for shard in ("not test_quiet", "test_quiet"):
        result = run("-p", "no:logging", "--nocompile-compare=baseline.json", "-k", shard)
        assert result.ret == pytest.ExitCode.OK
        # The other shard's test is one count, nothing more.
        expect_lines(result, [
            f"compared with the entries for torch {MINOR}",
            "1 test of the baseline did not run here (deselected, not collected, "
            "run by another shard, or removed): not compared",
        ])


def test_shards_that_disagree_on_a_test_fail_the_merge_naming_it(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_step=STEP.format(first=2, second=3))
    run("--nocompile-save=shard-1.json").assert_outcomes(passed=2)
    run("--nocompile-json=report-1.json").assert_outcomes(passed=2)
    pytester.makepyfile(test_step=STEP.format(first=2, second=2))
    run("--nocompile-save=shard-2.json").assert_outcomes(passed=2)
    run("--nocompile-json=report-2.json").assert_outcomes(passed=2)
    merged = _merge(pytester, "baseline.json", "shard-1.json", "shard-2.json")
    assert merged.returncode == 1
    assert merged.stderr == ("pytest-nocompile merge: test_step.py::test_step: "
                             f"shards disagree on torch {MINOR}: shard-1.json has compiles 2, "
                             "recompiles 1, graph breaks 0, cudagraph rerecords 0, "
                             "cudagraph skips 0; reasons: recompile scale (test_step.py): "
                             "python int n, shard-2.json has compiles 1, recompiles 0, "
                             "graph breaks 0, cudagraph rerecords 0, cudagraph skips 0; "
                             "no reasons\n")
    assert not (pytester.path / "baseline.json").exists()
    merged = _merge(pytester, "report.json", "report-1.json", "report-2.json")
    assert merged.returncode == 1
    assert merged.stderr.startswith("pytest-nocompile merge: test_step.py::test_step: "
                                    "shards disagree: report-1.json has compiles 2, ")
    # Reports of shards that agree merge into one report.
    merged = _merge(pytester, "report.json", "report-1.json", "report-1.json")
    assert (merged.returncode, merged.stdout) == (0, "merged 2 files into report.json (2 tests)\n")
    assert [test["nodeid"] for test in _saved(pytester, "report.json")["tests"]] == [
        "test_step.py::test_quiet", "test_step.py::test_step"]


def test_merge_refuses_what_it_cannot_merge(pytester: pytest.Pytester) -> None:
    (pytester.path / "base.json").write_text(
        json.dumps({"format": "pytest-nocompile-baseline/2", "torch": {}}))
    (pytester.path / "report.json").write_text(
        json.dumps({"format": "pytest-nocompile-report/1", "tests": []}))
    (pytester.path / "other.json").write_text(json.dumps({"format": "something-else"}))
    mixed = _merge(pytester, "out.json", "base.json", "report.json")
    assert (mixed.returncode, mixed.stderr) == (
        1, "pytest-nocompile merge: cannot merge files of different formats "
           "(pytest-nocompile-baseline/2, pytest-nocompile-report/1): "
           "give baselines or reports, not both\n")
    other = _merge(pytester, "out.json", "other.json")
    assert (other.returncode == 1
            and "other.json is neither a pytest-nocompile baseline" in other.stderr)
    missing = _merge(pytester, "out.json", "missing.json")
    assert (missing.returncode == 1
            and missing.stderr.startswith("pytest-nocompile merge: cannot read missing.json: "))
    usage = _merge(pytester, "out.json")
    assert usage.returncode == 2 and "the following arguments are required: IN" in usage.stderr


# -- a save never loses an entry without saying so (issue 42) ---------------------------------

MODEL_TESTS = '''
import pytest
import torch


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 8)
        self.head = torch.nn.Linear(8, 64)

    def forward(self, idx):
        return self.head(self.embed(idx))


@pytest.mark.parametrize("seq", [8, 16])
def test_forward(seq):
    model = torch.compile(TinyLM(), backend="eager")
    model(torch.randint(0, 64, (2, seq)))


@pytest.mark.max_recompiles(0)
def test_generate():
    model = torch.compile(TinyLM(), backend="eager", dynamic={dynamic})
    for seq in (8, 9, 10):
        model(torch.randint(0, 64, (2, seq)))
'''

OPTIM_TESTS = '''
import torch


def scaled(grad, lr):
    return grad * lr


def test_step():
    step = torch.compile(scaled, backend="eager")
    for lr in (2, 3):
        step(torch.ones(2), lr)


def test_quiet():
    pass
'''


def _project(pytester: pytest.Pytester, dynamic: bool = True) -> None:
    """A user's project: a tiny LM's tests beside an optimiser's, in tests/."""
    tests = pytester.path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_model.py").write_text(MODEL_TESTS.format(dynamic=dynamic))
    (tests / "test_optim.py").write_text(OPTIM_TESTS)


def _save_line(result: pytest.RunResult) -> str:
    """The run's one line on what its save wrote."""
    lines = [line for line in result.outlines if line.startswith("nocompile: baseline ")]
    assert len(lines) == 1, result.stdout.str()
    return lines[0]


def test_saving_from_one_file_keeps_the_other_files_entries_and_says_so(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    _project(pytester)
    result = run("--nocompile-save=baseline.json")
    result.assert_outcomes(passed=5)
    assert _save_line(result) == f"nocompile: baseline baseline.json (torch {MINOR}): 5 tests saved"
    full = _saved(pytester)["torch"][MINOR]
    result = run("tests/test_model.py", "--nocompile-save=baseline.json")
    result.assert_outcomes(passed=3)
    assert _save_line(result) == (f"nocompile: baseline baseline.json (torch {MINOR}): "
                                  "3 tests saved, 2 kept (not run)")
    assert _saved(pytester)["torch"][MINOR] == full
    # The optimiser's tests are still gated: a full compare finds every test in the baseline.
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    assert result.ret == pytest.ExitCode.OK
    expect_lines(result, [f"compared with the entries for torch {MINOR}",
                          "no change against the baseline"])


def test_the_replace_option_saves_only_the_tests_that_ran_and_says_how_many_it_dropped(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    _project(pytester)
    run("--nocompile-save=baseline.json").assert_outcomes(passed=5)
    document = _saved(pytester)
    older = {"tests/test_optim.py::test_step": {"compiles": 2, "recompiles": 1, "graph_breaks": 0,
                                                "reasons": []}}
    document["torch"][OTHER_MINOR] = older
    (pytester.path / "baseline.json").write_text(json.dumps(document))
    result = run("tests/test_model.py", "--nocompile-save=baseline.json",
                 "--nocompile-save-replace")
    result.assert_outcomes(passed=3)
    assert _save_line(result) == (f"nocompile: baseline baseline.json (torch {MINOR}): "
                                  "3 tests saved, 2 dropped (not run)")
    after = _saved(pytester)["torch"]
    assert sorted(after[MINOR]) == ["tests/test_model.py::test_forward[16]",
                                    "tests/test_model.py::test_forward[8]",
                                    "tests/test_model.py::test_generate"]
    assert after[OTHER_MINOR] == older


def test_a_failing_test_keeps_its_entry_unless_asked_and_the_save_says_so(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    _project(pytester)
    run("--nocompile-save=baseline.json").assert_outcomes(passed=5)
    generate = _saved(pytester)["torch"][MINOR]["tests/test_model.py::test_generate"]
    assert (generate["compiles"], generate["recompiles"]) == (1, 0)
    _project(pytester, dynamic=False)  # every new length recompiles: over its budget
    result = run("-p", "no:logging", "--nocompile-save=baseline.json")
    result.assert_outcomes(passed=4, failed=1)
    assert _save_line(result) == (f"nocompile: baseline baseline.json (torch {MINOR}): "
                                  "4 tests saved, 1 not saved (failed)")
    assert _saved(pytester)["torch"][MINOR]["tests/test_model.py::test_generate"] == generate
    # The baseline still gates it.
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    expect_lines(result, ["tests/test_model.py::test_generate: "
                          "compiles rose 1 -> 3, recompiles rose 0 -> 2"])
    # Saved when asked.
    result = run("-p", "no:logging", "--nocompile-save=baseline.json", "--nocompile-save-failed")
    result.assert_outcomes(passed=4, failed=1)
    assert _save_line(result) == f"nocompile: baseline baseline.json (torch {MINOR}): 5 tests saved"
    assert _saved(pytester)["torch"][MINOR]["tests/test_model.py::test_generate"]["recompiles"] == 2


GPU_TESTS = '''
import pytest
import torch

{skip}
def test_fused_step():
    step = torch.compile(lambda x, lr: x * lr, backend="eager")
    for lr in (2, 3):
        step(torch.ones(2), lr)
'''


def test_a_skipped_test_keeps_the_entry_a_run_that_ran_it_saved(pytester: pytest.Pytester,
                                                                run: RunPytest) -> None:
    pytester.makepyfile(test_gpu=GPU_TESTS.format(skip=""))
    run("--nocompile-save=baseline.json").assert_outcomes(passed=1)
    ran = _saved(pytester)["torch"][MINOR]["test_gpu.py::test_fused_step"]
    assert ran["recompiles"] == 1
    # On a runner without the GPU, the same torch: the test is skipped, and its entry stays.
    pytester.makepyfile(test_gpu=GPU_TESTS.format(skip='@pytest.mark.skip(reason="no GPU")'))
    result = run("--nocompile-save=baseline.json")
    result.assert_outcomes(skipped=1)
    assert _save_line(result) == (f"nocompile: baseline baseline.json (torch {MINOR}): "
                                  "0 tests saved, 1 kept (not run)")
    assert _saved(pytester)["torch"][MINOR]["test_gpu.py::test_fused_step"] == ran


@pytest.mark.parametrize("option", ["--nocompile-save-replace", "--nocompile-save-failed"])
def test_a_save_option_without_a_save_is_a_usage_error(
        pytester: pytest.Pytester, run: RunPytest, option: str) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = run(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option} needs --nocompile-save=PATH"])


GRAPH_BREAKING_MODEL = '''
import torch


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 8)

    def forward(self, idx):
        {debug}
        return self.embed(idx)


def test_forward():
    model = torch.compile(TinyLM(), backend="eager")
    model(torch.randint(0, 64, (2, 8)))
'''


def test_a_graph_break_against_the_baseline_names_the_module_as_the_failure_does(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_model=GRAPH_BREAKING_MODEL.format(debug="pass"))
    run("--nocompile-save=baseline.json").assert_outcomes(passed=1)
    pytester.makepyfile(test_model=GRAPH_BREAKING_MODEL.format(debug='print("debug")'))
    result = run("-p", "no:logging", "--max-graph-breaks=0", "--nocompile-compare=baseline.json")
    result.assert_outcomes(failed=1)
    expect_lines(result, [  # the failure
        "    compiling: TinyLM.forward (compiled at test_model.py:15)",
        "    user code: test_model.py:10 in forward: print(\"debug\")",
    ])
    expect_lines(result, [  # the baseline's comparison
        "test_model.py::test_forward: new reason: graph break in forward (test_model.py): *",
        f"    graph break at test_model.py:10: {PRINT_BREAK_REASON}",
        "        compiling: TinyLM.forward (compiled at test_model.py:15)",
        "        user code: test_model.py:10 in forward: print(\"debug\")",
    ])
