"""A torchrun worker: a compiled model wrapped in DistributedDataParallel, three training steps on
each rank.

    torchrun --standalone --nproc-per-node=2 tests/acceptance/ddp_compiled_model.py

The tutorials' model (10 x Linear(1024, 1024)) is compiled, then wrapped in DDP
(nanoGPT's order: ``torch.compile(DDP(model))`` compiles no graph), on its own
GPU with NCCL. DDP's reducer and its communication hook sync in torch's C++
code, where no Python called them: torch's sync debug mode warns of those
through c10's logger, on stderr, not as Python warnings. ``--device cpu``
(gloo, a small model) checks the script without GPUs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `examples.*`

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from examples.workload import build_model, small_workload, tutorial_workload

STEPS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device, backend, workload, device_ids = (torch.device("cuda", local_rank), "nccl",
                                                 tutorial_workload("cuda"), [local_rank])
    else:
        device, backend, workload, device_ids = (torch.device("cpu"), "gloo", small_workload("cpu"),
                                                 None)
    dist.init_process_group(backend)
    model = build_model(workload).to(device)
    ddp = DistributedDataParallel(torch.compile(model), device_ids=device_ids)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # each rank its own batches
    generator = torch.Generator(device="cpu").manual_seed(dist.get_rank())
    for _ in range(STEPS):
        batch = torch.randn(8, workload.width, generator=generator).to(device)
        ddp(batch).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
