"""max_cudagraph_rerecords and max_cudagraph_skips for users, on CPU: usage errors, the skip without
CUDA, the failure lines.

No GPU here: the failure lines are fed by torch 2.11's recorded messages
(tests/data/torch-2.11-cudagraphs.txt), logged by the user's test on the very
loggers torch logs them on, so they go the whole way: filter, reader, health
event, record, failure. tests/acceptance has the same gates on a real GPU.
"""

from __future__ import annotations

import os
import sys

import pytest

from nocompile_testing import RunPytest, docs_snippet, expect_lines

# Imported here, not in a test: pytester drops the modules a test imported, and torch does not
# survive a second import.
torch = pytest.importorskip("torch")
# Where there is a GPU the markers count (tests/acceptance), and these tests of their skip cannot
# run.
SKIP_ON_A_GPU = pytest.mark.skipif(
    torch.cuda.is_available(), reason="this machine has a GPU: tests/acceptance runs these there")

REPLAY = '''
import logging
import pytest
import torch
import torch._dynamo

TREES = logging.getLogger("torch._inductor.cudagraph_trees.__cudagraphs")
UTILS = logging.getLogger("torch._inductor.cudagraph_utils.__cudagraphs")
RECORDING = ("[0/0] Recording function=partition_0, cuda_graph_id={}, inputs: [0]: "
             "Tensor(size=[8], stride=(1,))")
CHANGED = ("[0/0] Re-recording function=partition_0, reason=static input data pointer changed.\\n"
           "input name: arg0_1. data pointer changed from 139987410485248 to 139987410486784. "
           "input stack trace: None\\n")
MUTATED = ('skipping cudagraphs due to mutated inputs (1 instances). Found from : \\n'
           '   File "b.py", line 3, in count_calls\\n    calls.add_(1)\\n')


def record_twice():
    TREES.debug(RECORDING.format(0))
    TREES.debug(CHANGED)
    TREES.debug(RECORDING.format(1))


def test_rerecord():
    record_twice()


def test_recorded_once():
    TREES.info("Recording cudagraph tree for graph without symints")
    TREES.debug(RECORDING.format(0))


def test_skip():
    UTILS.warning(MUTATED)
'''


def test_a_re_record_fails_a_zero_budget_with_torchs_reason_and_the_users_line(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_cg=REPLAY)
    result = run("--max-cg-rerecords=0", "-k", "rerecord or once")
    result.assert_outcomes(passed=1, failed=1)
    expect_lines(result, [
        "1 CUDA-graph re-record > max_cudagraph_rerecords(0) (from --max-cg-rerecords)",
        "[1/1] cudagraph_rerecord",
        "    reason: partition_0 of compile 0/0 recorded again: static input data pointer changed "
        "(input arg0_1)",
        "    triggered by: test_cg.py:20 in record_twice: TREES.debug(RECORDING.format(1))",
    ])


def test_a_skip_fails_a_zero_budget_naming_the_mutation_and_its_line(pytester: pytest.Pytester,
                                                                     run: RunPytest) -> None:
    pytester.makepyfile(test_cg=REPLAY)
    result = run("--max-cg-skips=0", "-k", "skip or once")
    result.assert_outcomes(passed=1, failed=1)
    expect_lines(result, [
        "1 CUDA-graph skip > max_cudagraph_skips(0) (from --max-cg-skips)",
        "[1/1] cudagraph_skip",
        "    reason: mutated inputs (1 instances)",
        "            at b.py:3 in count_calls: calls.add_(1)",
        "    triggered by: test_cg.py:33 in test_skip: UTILS.warning(MUTATED)",
    ])


def test_the_debug_records_read_print_nothing_and_torchs_skip_warning_still_shows(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_cg=REPLAY)
    result = run("--max-cg-rerecords=5", "--max-cg-skips=5", "-s")
    result.assert_outcomes(passed=3)
    output = result.stdout.str() + result.stderr.str()
    assert "Recording function" not in output and "Re-recording" not in output
    # as torch prints it without the plugin
    assert "skipping cudagraphs due to mutated inputs" in output


def test_a_block_assertion_counts_re_records(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_cg=REPLAY + '''

def test_block(nocompile_assert_max_cudagraph_rerecords):
    with nocompile_assert_max_cudagraph_rerecords(0):
        record_twice()
''')
    result = run("-k", "block")
    result.assert_outcomes(failed=1)
    expect_lines(result, ["*1 CUDA-graph re-record > nocompile_assert_max_cudagraph_rerecords(0)*"])


@SKIP_ON_A_GPU
def test_a_marker_skips_the_test_where_cuda_graphs_cannot_be_recorded(pytester: pytest.Pytester,
                                                                      run: RunPytest) -> None:
    pytester.makepyfile(test_cg='''
import pytest

@pytest.mark.max_cudagraph_rerecords(0)
def test_rerecords():
    pass

@pytest.mark.max_cudagraph_skips(2)
def test_skips():
    pass

@pytest.mark.max_cudagraph_skips(None)
def test_opted_out():
    pass

def test_unmarked():
    pass
''')
    result = run("-rs", "--max-cg-skips=0")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] test_cg.py:3: max_cudagraph_rerecords(0) needs CUDA graphs: "
        "torch.cuda.is_available() is False",
        "SKIPPED [[]1[]] test_cg.py:7: max_cudagraph_skips(2) needs CUDA graphs: "
        "torch.cuda.is_available() is False",
    ])


ACCEPTED = "use @pytest.mark.max_cudagraph_rerecords(N), N an int >= 0 or None"


def test_a_bad_marker_is_a_usage_error_naming_the_test_and_the_form_not_a_skip(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_cg='''
import pytest

@pytest.mark.max_cudagraph_rerecords(-1)
def test_negative():
    pass

@pytest.mark.max_cudagraph_skips(0.5)
def test_float():
    pass
''')
    result = run()
    result.assert_outcomes(errors=2)
    expect_lines(result, ["*ERROR at setup of test_negative*",
                          "invalid max_cudagraph_rerecords marker on test_cg.py::test_negative: "
                          f"max_cudagraph_rerecords(-1): expected an int >= 0, got -1; {ACCEPTED}"])
    expect_lines(result, ["*ERROR at setup of test_float*",
                          "invalid max_cudagraph_skips marker on test_cg.py::test_float: "
                          "max_cudagraph_skips(0.5): expected an int >= 0, got 0.5 (float); "
                          "use @pytest.mark.max_cudagraph_skips(N), N an int >= 0 or None"])


def test_code_inductor_generated_is_not_the_users_line(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path) -> None:
    # A CUDA graph's recording runs inside the module inductor wrote (measured on 2.11:
    # ".../torchinductor_root/qf/cqf....py:68 in call"); the user's line is the call that ran it,
    # further out. Inductor's cache_dir() stands in here: importing inductor into this test process
    # costs seconds.
    import types

    from pytest_nocompile.observe import user_code

    def cache_dir() -> str:
        raise AssertionError(
            "inductor's cache_dir() sets TORCHINDUCTOR_CACHE_DIR: the plugin must not call it")

    cache_dir_utils = types.ModuleType("torch._inductor.runtime.cache_dir_utils")
    cache_dir_utils.cache_dir = cache_dir  # type: ignore[attr-defined]
    cache_dir_utils.default_cache_dir = (  # type: ignore[attr-defined]
        lambda: str(tmp_path / "default"))
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.cache_dir_utils", cache_dir_utils)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    generated = str(
        tmp_path / "inductor" / "qf" / "cqf4enm7sgtqedy6xn76aghyf7kndqdjdwg5wgvy6cmyt26zjwzo.py")
    # a folder whose name only starts the same
    beside = str(tmp_path / "inductor_notes" / "test_model.py")
    assert not user_code.is_user_file(generated)
    assert user_code.is_user_file(beside)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")  # then inductor's default folder
    assert not user_code.is_user_file(str(tmp_path / "default" / "ab" / "cab.py"))
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ


@SKIP_ON_A_GPU
def test_the_pages_example_is_skipped_here_as_the_page_says(pytester: pytest.Pytester,
                                                            run: RunPytest) -> None:
    pytester.makepyfile(test_rerecord=docs_snippet("cudagraphs.md", "test_rerecord.py"))
    result = run("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1[]] test_rerecord.py:6: max_cudagraph_rerecords(0) needs CUDA graphs: "
         "torch.cuda.is_available() is False"])


def test_a_users_torch_logs_cudagraphs_output_is_kept_and_still_counted(
    pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_LOGS", "cudagraphs")
    # torch's own trees module: its logger is then torch's artifact logger, at the level TORCH_LOGS
    # gives it.
    pytester.makepyfile(test_cg=REPLAY.replace(
        "import torch._dynamo\n", "import torch._dynamo\nimport torch._inductor.cudagraph_trees\n"))
    result = run("--max-cg-rerecords=0", "-k", "rerecord", "-s")
    result.assert_outcomes(failed=1)
    output = result.stdout.str() + result.stderr.str()
    # the user's own log, as torch prints it
    assert "[0/0] Recording function=partition_0, cuda_graph_id=1" in output
    expect_lines(result,
                 ["1 CUDA-graph re-record > max_cudagraph_rerecords(0) (from --max-cg-rerecords)"])


CHILD = '''
import subprocess
import sys

CHILD_CODE = """
import logging
import torch._dynamo
trees = logging.getLogger("torch._inductor.cudagraph_trees.__cudagraphs")
for graph_id in (0, 1):
    trees.debug(f"[0/0] Recording function=partition_0, cuda_graph_id={graph_id}, inputs: []")
"""


def test_child_rerecords():
    subprocess.run([sys.executable, "-c", CHILD_CODE], check=True)
'''


def test_a_child_processs_re_records_count_against_the_test(pytester: pytest.Pytester,
                                                            run: RunPytest) -> None:
    pytester.makepyfile(test_child=CHILD)
    result = run("--max-cg-rerecords=0")
    result.assert_outcomes(failed=1)
    expect_lines(result, ["pid * (python -c *): 1 CUDA-graph re-record > "
                          "max_cudagraph_rerecords(0) (from --max-cg-rerecords)",
                          "[1/1] cudagraph_rerecord",
                          "    reason: partition_0 of compile 0/0 recorded again: "
                          "torch gave no reason"])


LEVEL = '''
import logging
import torch._dynamo

def test_trees_logger_level():
    print("trees logger level:",
          logging.getLogger("torch._inductor.cudagraph_trees.__cudagraphs").level)
'''


@pytest.mark.parametrize(("options", "level"),
                         [(("--max-recompiles=0",), 0), (("--max-cg-skips=3",), 10),
                          (("--nocompile-report",), 10)])
def test_a_run_that_asks_no_test_for_cuda_graph_counts_leaves_their_loggers_alone(
        pytester: pytest.Pytester, run: RunPytest, options: tuple[str, ...], level: int) -> None:
    # Arming the reading costs some 13 µs per watched test: a run that never asks for it does not
    # pay.
    pytester.makepyfile(test_level=LEVEL)
    result = run("-s", *options)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*trees logger level: {level}"])
