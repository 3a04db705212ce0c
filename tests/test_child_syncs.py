"""Syncs in a test's child processes: counted from the child's torch import, in torch's C++ code
too; nothing printed, nothing lost.

A spawned child has the stand-ins for CUDA (test_syncs' ``FAKE_CUDA``, test_cpp_syncs'
``FAKE_CPP_SYNCS``) as its torch imports, before the plugin's start-up hook sees torch: torch
itself loads them, as an out-of-tree device backend (its ``torch.backends`` entry points,
torch >= 2.5).
"""

from __future__ import annotations

import json

import pytest
from test_cpp_syncs import CPP_PLACE, FAKE_CPP_SYNCS, SYNC_TEXT
from test_syncs import FAKE_CUDA

from nocompile_testing import TORCH, RunPytest

pytest.importorskip("torch")

NEEDS_BACKEND_AUTOLOAD = pytest.mark.skipif(
    TORCH < (2, 5), reason="the stand-ins reach a spawned child through torch's backend autoload "
                           "(torch >= 2.5)")


# Where torch.cuda.is_available() says True, dynamo saves and restores the CUDA RNG state around a
# compile. From torch 2.14 on a CUDA build it asks the CUDA runtime too (no GPU here: "CUDA driver
# version is insufficient"): whether the current stream is capturing, the device's properties (to
# know whether it can run Triton: this one is too old), and torch.accelerator's current stream (this
# CUDA is no accelerator).
COMPILES_WITH_FAKE_CUDA = '''
import types

torch.cuda.get_rng_state = lambda *args, **kwargs: torch.zeros(1, dtype=torch.uint8)
torch.cuda.set_rng_state = lambda *args, **kwargs: None
torch.cuda.is_current_stream_capturing = lambda: False
torch.cuda.device_count = lambda: 1
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_properties = lambda *args, **kwargs: types.SimpleNamespace(
    name="fake", major=6, minor=0, total_memory=0, multi_processor_count=1)
if hasattr(torch, "accelerator"):
    torch.accelerator.is_available = lambda: False
'''


def give_spawned_children_fake_cuda(pytester: pytest.Pytester) -> None:
    """FAKE_CUDA and FAKE_CPP_SYNCS in the run's process, and in every process it starts as torch
    imports (before anything else sees torch): through torch's own autoload of out-of-tree device
    backends, an entry point of a distribution on the path (torch >= 2.5)."""
    pytester.makeconftest(FAKE_CUDA + FAKE_CPP_SYNCS)
    pytester.makepyfile(fake_cuda=FAKE_CUDA + COMPILES_WITH_FAKE_CUDA + FAKE_CPP_SYNCS
                        + "\n\ndef install():\n    pass  # importing the module did it\n")
    info = pytester.mkdir("fake_cuda-0.dist-info")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-cuda\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[torch.backends]\nfake_cuda = fake_cuda:install\n")


SPAWNED = '''
import multiprocessing

import pytest
import torch


def sync_compile_sync():
    for _ in range(3):
        torch.fake_sync(0)
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    for _ in range(3):
        torch.fake_sync(0)
    assert torch._C._cuda_get_sync_debug_mode() == MODE_EXPECTED


def run_child():
    child = multiprocessing.get_context("spawn").Process(target=sync_compile_sync)
    child.start()
    child.join(240)
    assert child.exitcode == 0


@pytest.mark.max_syncs(0)
def test_spawned():
    run_child()
'''


@NEEDS_BACKEND_AUTOLOAD
def test_a_spawned_child_counts_from_its_torch_import_and_leaves_the_mode_alone_where_the_run_reads_no_syncs(  # noqa: E501
        pytester: pytest.Pytester, run: RunPytest) -> None:
    give_spawned_children_fake_cuda(pytester)
    # warn: the plugin's, in a run that reads syncs
    pytester.makepyfile(test_spawned=SPAWNED.replace("MODE_EXPECTED", "1"))
    result = run("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "pid * (*): 6 syncs > max_syncs(0) (marker on the test)",
        # before the child's first compile too
        "3 × test_spawned.py:9 in sync_compile_sync: torch.fake_sync(0)",
        "3 × test_spawned.py:12 in sync_compile_sync: torch.fake_sync(0)",
    ])
    # A run that reads no syncs (a recompile budget only): the child leaves torch's sync debug mode
    # as it was.
    pytester.makepyfile(test_spawned=SPAWNED.replace("MODE_EXPECTED", "0").replace(
        "@pytest.mark.max_syncs(0)", "@pytest.mark.max_recompiles(0)"))
    result = run("-p", "no:randomly")
    result.assert_outcomes(passed=1)


CHILDREN = '''
import multiprocessing
import os
import subprocess
import sys

import pytest
import torch


def run_child(*args, **kwargs):
    return subprocess.run([sys.executable, "child.py", *args], **kwargs)


@pytest.mark.max_syncs(0)
def test_rank_one():
    assert run_child(env={**os.environ, "RANK": "1"}).returncode == 0


@pytest.mark.max_syncs(5)
def test_child_aborts():
    done = run_child("abort", stderr=subprocess.PIPE)
    assert done.returncode != 0
    # written just before it died: its relay passed it on all the same
    assert b"the child's last words" in done.stderr
    assert b"synchronizing" not in done.stderr


def cpp_sync_in_fork():
    torch.fake_cpp_sync(2)


@pytest.mark.max_syncs(0)
def test_forked():
    child = multiprocessing.get_context("fork").Process(target=cpp_sync_in_fork)
    child.start()
    child.join(120)
    assert child.exitcode == 0


@pytest.mark.max_syncs(5)
def test_child_warns_itself():
    assert run_child("warn").returncode == 0
'''

CHILD = '''
import os
import sys

import torch

torch.fake_cpp_sync(2)
os.write(2, b"the child's own line\\n")
if sys.argv[1:] == ["warn"]:
    torch.cuda.set_sync_debug_mode("warn")
    # shown, as the child's user asked: passed through its parent's relay uncounted there
    torch.fake_cpp_sync(1)
if sys.argv[1:] == ["abort"]:
    os.write(2, b"the child's last words\\n")
    os.abort()
'''


@NEEDS_BACKEND_AUTOLOAD
def test_a_childs_cpp_syncs_count_in_the_child_are_never_printed_and_its_last_output_survives_its_crash(  # noqa: E501
        pytester: pytest.Pytester, run: RunPytest) -> None:
    give_spawned_children_fake_cuda(pytester)
    pytester.makepyfile(test_children=CHILDREN, child=CHILD)
    result = run("-p", "no:randomly", "-rA", "test_children.py::test_rank_one",
                 "test_children.py::test_child_aborts", "test_children.py::test_forked")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(["rank 1 (pid *, python child.py): 2 syncs > max_syncs(0) "
                                 "(marker on the test)", f"2 × {CPP_PLACE}"])
    result.stdout.fnmatch_lines(["pid * (multiprocessing *): 2 syncs > max_syncs(0) "
                                 "(marker on the test)", f"2 × {CPP_PLACE}"])
    output = result.stdout.str() + result.stderr.str()
    assert SYNC_TEXT not in output
    # test_rank_one's child's, through its relay and the test process's
    assert output.count("the child's own line") == 1
    # A child that set "warn" itself sees its syncs: passed through the test process's relay,
    # counted in the child only.
    result = run("-p", "no:randomly", "-s", "--nocompile-json=report.json",
                 "test_children.py::test_child_warns_itself")
    result.assert_outcomes(passed=1)
    assert result.stderr.str().count(SYNC_TEXT) == 1
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert ([(process["test_process"], process["syncs"]) for process in test["processes"]]
            == [(True, 0), (False, 3)])
