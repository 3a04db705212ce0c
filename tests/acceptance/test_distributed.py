"""Two ranks under torchrun: the compiled optimizer-and-scheduler step under DDP, each rank watched.

With NCCL on two CUDA GPUs, and with gloo with both ranks on one GPU; each
layout is skipped, with the reason, where the GPUs it needs are missing. The worker is
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

pytestmark = pytest.mark.cuda
# NCCL, one GPU per rank; or, where one GPU is all there is, every rank on it with gloo (NCCL
# refuses that): the ranks are still child processes of the test on the CUDA path.
LAYOUTS = [
    pytest.param([], marks=pytest.mark.skipif(torch.cuda.device_count() < RANKS, reason=(
        f"needs {RANKS} CUDA GPUs: torch.cuda.device_count() is {torch.cuda.device_count()}")),
                 id="nccl"),
    pytest.param(["--one-gpu"], marks=pytest.mark.skipif(not torch.cuda.is_available(), reason=(
        "needs a CUDA GPU: torch.cuda.is_available() is False")), id="gloo-one-gpu"),
]


def torchrun(lr: str, layout: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    f"--nproc-per-node={RANKS}",
                    str(WORKER), f"--lr={lr}", *layout], check=True, timeout=900)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.max_recompiles(0)
def test_ddp_ranks_with_a_tensor_lr_do_not_recompile(layout: list[str]) -> None:
    torchrun("tensor", layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.xfail(strict=True,
                   reason="float LR: every rank guards on param_groups[0]['lr'] and recompiles")
@pytest.mark.max_recompiles(0)
def test_ddp_ranks_with_a_float_lr_fail_a_zero_budget(layout: list[str]) -> None:
    torchrun("float", layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_rank_names_the_lr_guard(nocompile_recompiles: Sequence, layout: list[str]) -> None:
    torchrun("float", layout)
    ranks = {event.process.rank for event in nocompile_recompiles
             if event.process is not None and any(LR_GUARD in reason.guard
                                                  for reason in event.reasons)}
    assert ranks == set(range(RANKS)), list(nocompile_recompiles)
