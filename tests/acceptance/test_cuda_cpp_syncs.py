"""Syncs in torch's C++ code under DDP with NCCL on two GPUs: counted against max_syncs in each
rank, never printed.

DDP's reducer and communication hook sync where no Python called them, and
torch's sync debug mode warns of those on stderr through c10's logger
(``[rank0]:[W...] CUDAFunctions.cpp:162] Warning: called a synchronizing CUDA
operation (function warn_or_error_on_sync)``), not as Python warnings. The
worker is ``ddp_compiled_model.py`` beside this file, under torchrun; its ranks
are child processes of the test; a third test runs one rank in the test's
own process. Skipped, with the reason, without the GPUs each needs. (The same on CPU, c10's line
written by a stand-in: tests/test_cpp_syncs.py and tests/test_child_syncs.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

WORKER = Path(__file__).with_name("ddp_compiled_model.py")
RANKS = 2
SYNC_TEXT = "synchronizing CUDA operation"  # torch's warning; never in the plugin's own lines

pytestmark = pytest.mark.cuda
NEEDS_RANKS = pytest.mark.skipif(torch.cuda.device_count() < RANKS,
                                 reason=f"needs {RANKS} CUDA GPUs: torch.cuda.device_count() is "
                                        f"{torch.cuda.device_count()}")
NEEDS_A_GPU = pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU: torch.cuda.is_available() is False")

INNER = f'''
import subprocess, sys, pytest


def torchrun():
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node={RANKS}", {str(WORKER)!r}],
                   check=True, timeout=900)


@pytest.mark.max_syncs(0)
def test_ddp_syncs():
    torchrun()


@pytest.mark.same_across_ranks
def test_ddp_alike():
    torchrun()
'''  # noqa: E501


@NEEDS_RANKS
@pytest.mark.parametrize("capture", ["fd", "no"])
def test_ddp_ranks_fail_a_zero_sync_budget_with_their_cpp_syncs_listed_and_nothing_printed(
        pytester: pytest.Pytester, capture: str) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "nocompile", f"--capture={capture}",
                                           "test_inner.py::test_ddp_syncs")
    result.assert_outcomes(failed=1)
    # Each rank's syncs, against the budget on its own; where some cannot be seen, the count says it
    # is a lower bound.
    result.stdout.re_match_lines(
        [r"rank \d \(pid \d+, .*\): \d+ syncs? > max_syncs\(0\) \(marker on the test\)"])
    result.stdout.re_match_lines([r"\d+ × in torch's C\+\+ code outside Python \(DDP's reducer, a "
                                  r"communication hook\): no line of yours known|    a lower "
                                  r"bound: syncs in torch's C\+\+ code .*"])
    assert SYNC_TEXT not in result.stdout.str() + result.stderr.str()


@NEEDS_RANKS
def test_a_run_that_reads_no_syncs_leaves_torchs_sync_debug_mode_alone_in_every_rank(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "nocompile", "-s", "test_inner.py::test_ddp_alike")
    result.assert_outcomes(passed=1)
    assert SYNC_TEXT not in result.stdout.str() + result.stderr.str()


IN_PROCESS = '''
import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


@pytest.mark.max_syncs(0)
def test_one_rank_here(tmp_path):
    dist.init_process_group("nccl", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        model = DistributedDataParallel(torch.nn.Linear(64, 64).cuda(), device_ids=[0])
        for _ in range(3):
            model(torch.randn(8, 64).to("cuda")).square().mean().backward()
    finally:
        dist.destroy_process_group()
'''  # noqa: E501


@NEEDS_A_GPU
@pytest.mark.parametrize("capture", ["fd", "no"])
def test_ddp_in_the_test_process_counts_there_and_prints_nothing(pytester: pytest.Pytester,
                                                                 capture: str) -> None:
    """The test process's own relay, around pytest's fd capture, started as the test initialises
    CUDA."""
    pytester.makepyfile(test_here=IN_PROCESS)
    result = pytester.runpytest_subprocess("-p", "nocompile", f"--capture={capture}")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([r"\d+ syncs > max_syncs\(0\) \(marker on the test\)"])
    result.stdout.re_match_lines([r"3 × test_here\.py:\d+ in test_one_rank_here: "
                                  r"model\(torch\.randn\(8, 64\)\.to\(\"cuda\"\)\).*"])
    assert SYNC_TEXT not in result.stdout.str() + result.stderr.str()

