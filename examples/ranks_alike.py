"""Scenario 5: ranks that must compile alike, or one waits for the other in a collective until
NCCL's watchdog ends the job.

Each rank of a ``torch.multiprocessing.spawn`` job (gloo here, so it runs on
CPU) compiles the same step and all-reduces its loss. When one rank sees a
batch of another size (an uneven last shard, a data-dependent filter), it
alone recompiles: on a real job it spends seconds compiling while the others
wait in the all-reduce. ``@pytest.mark.same_across_ranks`` fails a test
whose ranks did not compile the same functions the same number of times,
naming the rank that differs, the function and the guard that failed.

Run as a script it spawns two ranks, with rank 1 seeing an uneven batch.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# run as `python examples/ranks_alike.py`: resolve `examples.*` as pytest does
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

FEATURES = 16
RANKS = 2
STEPS = 3
BATCH = 8


def step(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ weight).sum()


def rank_main(rank: int, store: str, uneven_rank: int, backend: str) -> None:
    """One rank: ``STEPS`` compiled steps, each loss all-reduced; ``uneven_rank`` gets one batch of
    another size."""
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=RANKS)
    # every batch size is a graph of its own
    compiled = torch.compile(step, backend=backend, dynamic=False)
    weight = torch.ones(FEATURES, FEATURES)
    for index in range(STEPS):
        rows = BATCH - 3 if rank == uneven_rank and index == STEPS - 1 else BATCH
        loss = compiled(torch.randn(rows, FEATURES), weight)
        dist.all_reduce(loss)
    dist.barrier()
    dist.destroy_process_group()


def spawn_ranks(folder: str, uneven_rank: int = -1, backend: str = "inductor") -> None:
    """Run the job on ``RANKS`` spawned processes, their rendezvous file in ``folder``."""
    mp.spawn(rank_main, args=(os.path.join(folder, "store"), uneven_rank, backend), nprocs=RANKS)


if __name__ == "__main__":
    os.environ.setdefault("TORCH_LOGS", "recompiles")  # each rank prints its recompiles
    with tempfile.TemporaryDirectory() as folder:
        spawn_ranks(folder, uneven_rank=1)
