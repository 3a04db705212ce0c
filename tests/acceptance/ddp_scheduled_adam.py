"""A torchrun worker: the compiled optimizer-and-scheduler step of
``examples/compiled_lr_scheduler.py`` under DDP.

    torchrun --standalone --nproc-per-node=2 tests/acceptance/ddp_scheduled_adam.py --lr=tensor
    torchrun --standalone --nproc-per-node=2 tests/acceptance/ddp_scheduled_adam.py --lr=float

Each rank trains the tutorials' model (10 x Linear(1024, 1024)) wrapped in
DistributedDataParallel on its own GPU with NCCL: forward, backward (DDP's
all-reduce of the gradients), then one compiled ``optimizer.step();
scheduler.step()`` under LinearLR's warm-up, as the tutorial writes it. With a
float LR every rank's compiled step guards on ``param_groups[0]['lr']`` and
recompiles when the scheduler changes it; with a tensor LR it does not.
``--device cpu`` (gloo, a small model) checks the script without GPUs;
``--one-gpu`` puts every rank on GPU 0 with gloo (NCCL refuses two ranks on
one GPU), to try the CUDA path on a machine with one.
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

from examples.compiled_lr_scheduler import compile_optimizer_and_scheduler_step, linear_warmup
from examples.compiled_optimizer import LEARNING_RATE, make_adam
from examples.workload import build_model, small_workload, tutorial_workload

STEPS = 4  # LinearLR changes the LR after every one of them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", choices=("tensor", "float"), required=True)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--one-gpu", action="store_true")
    args = parser.parse_args()
    local_rank = 0 if args.one_gpu else int(os.environ["LOCAL_RANK"])
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        backend = "gloo" if args.one_gpu else "nccl"
        device, workload = torch.device("cuda", local_rank), tutorial_workload("cuda")
    else:
        device, backend, workload = torch.device("cpu"), "gloo", small_workload("cpu")
    dist.init_process_group(backend)
    model = build_model(workload).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if args.device == "cuda" else None)
    optimizer = make_adam(model, lr=torch.tensor(LEARNING_RATE) if args.lr == "tensor"
                          else LEARNING_RATE)
    step = compile_optimizer_and_scheduler_step(optimizer, linear_warmup(optimizer))
    # each rank its own batches
    generator = torch.Generator(device="cpu").manual_seed(dist.get_rank())
    features = model[0].in_features
    for _ in range(STEPS):
        batch = torch.randn(8, features, generator=generator).to(device)
        ddp(batch).square().mean().backward()
        step()
        optimizer.zero_grad(set_to_none=False)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
