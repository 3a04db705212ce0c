"""Scenario 2: a compiled ``opt.step(); sched.step()`` with LR schedulers.

``torch.compile`` guards on Python numbers it reads, so an LR scheduler that
writes a new float LR into ``param_groups`` after every step invalidates the
compiled step: torch 2.11 recompiles at every LR change, torch 2.13 once and then
treats the float as dynamic. Wrapping the LR in a tensor (``lr=torch.tensor(0.01)``)
fixes it: the scheduler updates the tensor in place and the compiled code reads
it as data.

``OneCycleLR`` (the extra scheduler recorded here) still recompiles with a tensor
LR: with ``cycle_momentum=True``, its default, it also cycles Adam's beta1 and
writes it back as a Python float (``group['betas'] = (momentum, beta2)``), so the
guard ``param_groups[0]['betas'][0] == ...`` fails at every step, on torch 2.13
(CPU) and 2.11 (CUDA) alike: 2 recompiles in 3 steps. Run long enough, it hits
``recompile_limit`` (8): after 7 recompiles dynamo refuses the 8th attempt and
then runs ``Adam.step`` uncompiled, silently. Under ``max_recompiles(0)``
pytest-nocompile reports, for 10 steps on torch 2.13::

    7 recompiles > max_recompiles(0) (marker on the test)
    [1/7] recompiled step (.../torch/optim/adam.py:214)
        guard failed: 2/0: self.param_groups[0]['betas'][0] == 0.95
          guarded at: .../torch/optim/adam.py:229 in step: for group in self.param_groups:
        triggered by: examples/compiled_lr_scheduler.py:... in compiled_step: optimizer.step()
    ... [2/7] to [7/7] alike, one new beta1 value each ...
    dynamo hit config.recompile_limit (8) for 'step' (.../torch/optim/adam.py:214): later calls
    run uncompiled and log no recompiles, so the count above is a lower bound

``cycle_momentum=False`` removes the recompiles. (``ReduceLROnPlateau`` with a
tensor LR, by contrast, measured 0 recompiles on torch 2.13.)

Run as a script it shows all three, with dynamo's recompile log switched on.
"""

from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# run as `python examples/compiled_lr_scheduler.py`: resolve `examples.*` as pytest does
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch.optim.lr_scheduler import LinearLR, LRScheduler, OneCycleLR

from examples.compiled_optimizer import LEARNING_RATE, StepFunction, make_adam
from examples.workload import (
    Workload,
    add_workload_arguments,
    build_model,
    parameters_of,
    train,
    workload_from_arguments,
)

# The tutorial's schedule: LinearLR's defaults ramp the LR from a third of the
# base LR up to the base LR over 5 steps, then hold it.
LINEAR_START_FACTOR = 1.0 / 3.0
LINEAR_TOTAL_ITERS = 5

# What dynamo's guard text contains when it specialised on the LR / on Adam's
# beta1. Every text seen (the tutorials' logs, torch 2.11 and 2.13) contains it,
# whatever surrounds it (``L['self'].``, ``___as_tensor(...).item()``, ``self.``).
LR_GUARD = "param_groups[0]['lr']"
BETA1_GUARD = "param_groups[0]['betas'][0]"

SchedulerFactory = Callable[[torch.optim.Optimizer], LRScheduler]


def linear_warmup(optimizer: torch.optim.Optimizer) -> LinearLR:
    """The tutorial's scheduler."""
    return LinearLR(optimizer, start_factor=LINEAR_START_FACTOR, total_iters=LINEAR_TOTAL_ITERS)


def one_cycle(total_steps: int, cycle_momentum: bool = True) -> SchedulerFactory:
    """``OneCycleLR`` up to the base LR over ``total_steps``; ``cycle_momentum`` also cycles
    beta1."""
    return functools.partial(OneCycleLR, max_lr=LEARNING_RATE, total_steps=total_steps,
                             cycle_momentum=cycle_momentum)


def expected_linear_warmup_lrs(steps: int) -> list[float]:
    """The LR after each of ``steps`` scheduler steps, from LinearLR's definition."""
    ramp = [min(k, LINEAR_TOTAL_ITERS) / LINEAR_TOTAL_ITERS for k in range(1, steps + 1)]
    return [LEARNING_RATE * (LINEAR_START_FACTOR + (1 - LINEAR_START_FACTOR) * r) for r in ramp]


def compile_optimizer_and_scheduler_step(optimizer: torch.optim.Optimizer,
                                         scheduler: LRScheduler) -> StepFunction:
    """Both steps inside one compiled function, as the tutorial writes it."""

    @torch.compile
    def compiled_step() -> None:
        optimizer.step()
        scheduler.step()

    return compiled_step


@dataclass
class ScheduledRun:
    """What a scheduled training run ended with."""

    params: list[torch.Tensor]
    lrs: list[float]  # param_groups[0]['lr'] after each step, as a Python float
    beta1s: list[float]  # param_groups[0]['betas'][0] after each step


def run_scheduled_adam(
    workload: Workload, make_scheduler: SchedulerFactory, tensor_lr: bool, steps: int,
    compiled: bool = True
) -> ScheduledRun:
    """Train the workload's model ``steps`` Adam steps under ``make_scheduler``'s schedule.

    ``tensor_lr`` gives Adam ``lr=torch.tensor(LEARNING_RATE)`` (a fresh tensor:
    the scheduler mutates it) instead of the float. ``compiled=False`` is the eager
    reference.
    """
    model = build_model(workload)
    optimizer = make_adam(model, lr=torch.tensor(LEARNING_RATE) if tensor_lr else LEARNING_RATE)
    scheduler = make_scheduler(optimizer)
    if compiled:
        one_step = compile_optimizer_and_scheduler_step(optimizer, scheduler)
    else:

        def one_step() -> None:
            optimizer.step()
            scheduler.step()

    group = optimizer.param_groups[0]
    run = ScheduledRun(params=parameters_of(model), lrs=[], beta1s=[])

    def step_and_record() -> None:
        one_step()
        run.lrs.append(float(group["lr"]))
        run.beta1s.append(float(group["betas"][0]))

    train(run.params, step_and_record, steps)
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args(argv)
    workload = workload_from_arguments(args)
    # a script may; the plugin must not (it would reset the user's logging)
    torch._logging.set_logs(recompiles=True)

    for title, make_scheduler, tensor_lr in [
        ("LinearLR, lr=torch.tensor(0.01): no recompiles", linear_warmup, True),
        ("LinearLR, lr=0.01 (float): recompiles on param_groups[0]['lr']", linear_warmup, False),
        ("OneCycleLR, tensor LR: recompiles on param_groups[0]['betas'][0]",
         one_cycle(args.steps + 1), True),
        ("OneCycleLR(cycle_momentum=False), tensor LR: no recompiles",
         one_cycle(args.steps + 1, False), True),
    ]:
        print(f"\n== {title}", flush=True)
        torch._dynamo.reset()  # each case starts from empty caches, as under the plugin
        run = run_scheduled_adam(workload, make_scheduler, tensor_lr, args.steps)
        print("lr after each step:   ", ", ".join(f"{lr:.5f}" for lr in run.lrs))
        print("beta1 after each step:", ", ".join(f"{b:.4f}" for b in run.beta1s), flush=True)


if __name__ == "__main__":
    main()
