"""A torchrun worker for ``same_across_ranks``: every rank compiles one small step on its own GPU
and all-reduces its loss.

    torchrun --standalone --nproc-per-node=2 tests/acceptance/ranks_compile.py
    torchrun --standalone --nproc-per-node=2 tests/acceptance/ranks_compile.py --odd-rank=1

The step is compiled with ``dynamic=False`` (inductor on the GPU), so a batch
of another size recompiles it. Every rank runs three steps on batches of 16;
with ``--odd-rank=N`` rank N's second batch has 24 rows, and only that rank
recompiles. ``--device cpu`` (gloo, the eager backend) checks the script
without GPUs.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

FEATURES = 64


def step(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ weight).sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--odd-rank", type=int, default=-1,
                        help="the rank whose second batch has another size")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    arguments = parser.parse_args()
    on_gpu = arguments.device == "cuda"
    dist.init_process_group("nccl" if on_gpu else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    compiled = torch.compile(step, dynamic=False, backend="inductor" if on_gpu else "eager")
    weight = torch.randn(FEATURES, FEATURES, device=device)
    for index in range(3):
        rows = 24 if rank == arguments.odd_rank and index == 1 else 16
        loss = compiled(torch.randn(rows, FEATURES, device=device), weight)
        dist.all_reduce(loss)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
