"""``same_across_ranks`` with NCCL on two GPUs: ranks under torchrun that compile alike pass, a rank
that recompiles fails.

The worker is ``ranks_compile.py`` beside this file; its ranks are child
processes of the test, each reporting its rank and world size. Skipped, with
the reason, without two CUDA GPUs. (The same contract under
``torch.multiprocessing.spawn`` with gloo on CPU: tests/test_same_across_ranks.py.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

WORKER = Path(__file__).with_name("ranks_compile.py")
RANKS = 2

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(torch.cuda.device_count() < RANKS,
                       reason=f"needs {RANKS} CUDA GPUs: torch.cuda.device_count() is "
                              f"{torch.cuda.device_count()}"),
]


def torchrun(*arguments: str) -> None:
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    f"--nproc-per-node={RANKS}", str(WORKER), *arguments], check=True, timeout=900)


@pytest.mark.same_across_ranks
def test_nccl_ranks_that_compile_alike_pass() -> None:
    torchrun()


@pytest.mark.xfail(strict=True,
                   reason="rank 1's second batch has 24 rows: only rank 1 recompiles, and "
                          "same_across_ranks names it")
@pytest.mark.same_across_ranks
def test_nccl_rank_that_recompiles_fails() -> None:
    torchrun("--odd-rank=1")


def test_the_failure_names_the_rank_that_recompiled(pytester: pytest.Pytester) -> None:
    """The failure's text, from an inner run of the xfailed test above."""
    pytester.makepyfile(test_inner=f'''
import subprocess, sys, pytest

@pytest.mark.same_across_ranks
def test_odd_rank():
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node={RANKS}",
                    {str(WORKER)!r}, "--odd-rank=1"], check=True, timeout=900)
''')  # noqa: E501
    result = pytester.runpytest_subprocess("-p", "nocompile")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([
        r"same_across_ranks broken \(marker on the test\): rank 1 \(pid \d+, .*\) compiled unlike "
        r"rank 0 \(pid \d+, .*\)",
        r"    step \(.*ranks_compile\.py:\d+\): 2 compiles \(1 recompile\) in rank 1, 1 compile "
        r"\(0 recompiles\) in rank 0",
    ], consecutive=True)
