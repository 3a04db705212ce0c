"""Two ranks under torchrun with NCCL: the compiled optimizer-and-scheduler step under DDP, each rank watched.

Needs two CUDA GPUs: skipped, with the reason, on fewer. The worker is
``ddp_scheduled_adam.py`` beside this file; the ranks are child processes of
the test, so the plugin counts each one's recompiles against its budget.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Sequence

import pytest
import torch

from examples.compiled_lr_scheduler import LR_GUARD

WORKER = Path(__file__).with_name("ddp_scheduled_adam.py")
RANKS = 2

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(torch.cuda.device_count() < RANKS,
                       reason=f"needs {RANKS} CUDA GPUs: torch.cuda.device_count() is {torch.cuda.device_count()}"),
]


def torchrun(lr: str) -> None:
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}",
                    str(WORKER), f"--lr={lr}"], check=True, timeout=900)


@pytest.mark.max_recompiles(0)
def test_ddp_ranks_with_a_tensor_lr_do_not_recompile() -> None:
    torchrun("tensor")


@pytest.mark.xfail(strict=True, reason="float LR: every rank guards on param_groups[0]['lr'] and recompiles")
@pytest.mark.max_recompiles(0)
def test_ddp_ranks_with_a_float_lr_fail_a_zero_budget() -> None:
    torchrun("float")


def test_every_rank_names_the_lr_guard(nocompile_recompiles: Sequence) -> None:
    torchrun("float")
    ranks = {event.process.rank for event in nocompile_recompiles
             if event.process is not None and any(LR_GUARD in reason.guard for reason in event.reasons)}
    assert ranks == set(range(RANKS)), list(nocompile_recompiles)
