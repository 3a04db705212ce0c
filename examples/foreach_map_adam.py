"""Scenario 3: Adam written with ``foreach_map``, compiled into one fused update.

``torch._higher_order_ops.foreach_map(fn, *lists)`` applies a pointwise ``fn``
to every tensor of some lists; under ``torch.compile`` inductor fuses ``fn``
vertically and the lists horizontally, so one Adam step can be one kernel launch
over all parameters. This version differs from the tutorial's on purpose; each
point was measured on an H100 with torch 2.11 (``examples/benchmark.py``):

- Three ``foreach_map`` calls, one per result (param, exp_avg, exp_avg_sq), each
  computed from the *old* state, written back with ``torch._foreach_copy_``.
  Inductor pairs the three 10-tensor groups and the three copy groups member by
  member into one kernel that reads param, grad, exp_avg and exp_avg_sq once and
  writes param, exp_avg and exp_avg_sq in place: the seven accesses any Adam
  needs. For the tutorial's model that kernel takes 100.6 µs, 1.03x the
  copy-bandwidth floor of 97.8 µs. The obvious alternative, one call returning
  all three results, is worse: inductor makes its 30 outputs one group that
  matches none of the 10-long copy groups, so exp_avg and exp_avg_sq go to
  temporaries and three extra copy kernels follow (110.6 + 85.7 µs).
- The step count is one 0-dim float32 tensor on the parameters' device, shared
  by all parameters (they are always stepped together). The bias corrections
  ``1 - beta**step`` are computed from it inside the kernel: no Python number
  that changes every step for dynamo to specialise on, no host sync, no
  per-parameter CPU step tensors (the tutorial borrows ``torch.optim.Adam``'s,
  which live on the CPU). Its cold warm-up measured 67.5 s; this one's 4-6 s.
- The hyperparameters are Python floats fixed at construction (a frozen
  dataclass): dynamo folds them into the kernel as constants behind one guard.
- With the kernel that close to the floor, a step is bound by host work per
  call: dynamo's guards on the 41 input tensors, inductor's wrapper and the
  kernel launch took 146-269 µs per step on the H100's host, more than the
  kernel. Two cheap cuts: inductor's ``size_asserts`` are off (they re-check the
  sizes and strides dynamo's guards have just checked), and the step enters the
  compiled frame with grad mode already off. Together they saved 42 and 117 µs
  a step in two runs (host timings there were noisy). Removing the rest would
  take CUDA graphs, with static addresses for every input, gradients included
  (not done here).

It supports what the scenarios use: no weight decay, no amsgrad, one parameter group.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

# run as `python examples/foreach_map_adam.py`: resolve `examples.*` as pytest does
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from examples.compiled_optimizer import LEARNING_RATE
from examples.workload import (
    Workload,
    add_workload_arguments,
    build_model,
    clone_model,
    max_abs_difference,
    parameters_of,
    train,
    workload_from_arguments,
)

try:
    from torch._higher_order_ops.foreach_map import foreach_map
except ImportError:  # torch < 2.7
    foreach_map = None

FOREACH_MAP_MISSING = (
    f"torch {torch.__version__} has no torch._higher_order_ops.foreach_map (added in torch 2.7)")

# The kernels inductor generates for the compiled step, by device (pytest-nocompile's max_kernels,
# measured): on an H100 (torch 2.11, the tutorials' model) the fused update and the step count's; on
# CPU (torch 2.13, the small model) inductor's C++ backend makes 4.
STEP_KERNELS = {"cuda": 2, "cpu": 4}


def foreach_map_available() -> bool:
    return foreach_map is not None


@dataclass(frozen=True)
class AdamHyperparameters:
    lr: float = LEARNING_RATE
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8


def foreach_map_adam_step(
    params: Sequence[torch.Tensor],
    exp_avgs: Sequence[torch.Tensor],
    exp_avg_sqs: Sequence[torch.Tensor],
    step: torch.Tensor,
    hyper: AdamHyperparameters,
) -> None:
    """One Adam step over ``params`` (using their ``.grad``), updating everything in place.

    Meant to run under ``torch.compile`` (see :data:`compiled_foreach_map_adam_step`).
    The formula is ``torch.optim.Adam``'s (without weight decay or amsgrad).
    """
    beta1, beta2, eps = hyper.beta1, hyper.beta2, hyper.eps

    def new_exp_avg(exp_avg, grad):
        return torch.lerp(exp_avg, grad, 1 - beta1)

    def new_exp_avg_sq(exp_avg_sq, grad):
        return exp_avg_sq * beta2 + (1 - beta2) * grad * grad

    def new_param(param, grad, exp_avg, exp_avg_sq, step_size, bias_correction2_sqrt):
        # From the old states, not from the two results above: then no call
        # depends on another's output and inductor fuses all three per tensor.
        denom = new_exp_avg_sq(exp_avg_sq, grad).sqrt() / bias_correction2_sqrt + eps
        return param - step_size * (new_exp_avg(exp_avg, grad) / denom)

    # a `with`, not the decorator: dynamo then reports this function by its name
    with torch.no_grad():
        grads = [p.grad for p in params]
        step.add_(1)
        # 0-dim device tensors, shared by every element.
        step_size = hyper.lr / (1 - beta1**step)
        bias_correction2_sqrt = (1 - beta2**step).sqrt()

        params_updated = foreach_map(new_param, params, grads, exp_avgs, exp_avg_sqs, step_size,
                                     bias_correction2_sqrt)
        exp_avgs_updated = foreach_map(new_exp_avg, exp_avgs, grads)
        exp_avg_sqs_updated = foreach_map(new_exp_avg_sq, exp_avg_sqs, grads)
        # A higher-order op may not mutate its inputs; these copies become the
        # kernel's own in-place stores (TORCH_LOGS=output_code shows no copy kernel).
        torch._foreach_copy_(params, params_updated)
        torch._foreach_copy_(exp_avgs, exp_avgs_updated)
        torch._foreach_copy_(exp_avg_sqs, exp_avg_sqs_updated)


# One compiled function for every instance: optimizers with the same
# hyperparameters and parameter shapes share its compiled code. size_asserts
# off: dynamo's guards already check every input's size and stride.
compiled_foreach_map_adam_step = torch.compile(foreach_map_adam_step, fullgraph=True,
                                               options={"size_asserts": False})


class ForeachMapAdam:
    """Adam whose step is :func:`foreach_map_adam_step`, compiled.

    Attributes mirror ``torch.optim.Adam``'s state: ``exp_avgs[i]`` and
    ``exp_avg_sqs[i]`` belong to ``params[i]``; ``step_count`` is every
    parameter's ``state["step"]``.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = LEARNING_RATE,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        if foreach_map is None:
            raise RuntimeError(FOREACH_MAP_MISSING)
        self.params = list(params)
        if not self.params:
            raise ValueError("ForeachMapAdam got no parameters")
        self.hyperparameters = AdamHyperparameters(lr=float(lr), beta1=float(betas[0]),
                                                   beta2=float(betas[1]), eps=float(eps))
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format)
                         for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format)
                            for p in self.params]
        self.step_count = torch.zeros((), dtype=torch.float32, device=self.params[0].device)

    def step(self) -> None:
        # enter the compiled frame with grad mode off already: less to do per call
        with torch.no_grad():
            compiled_foreach_map_adam_step(self.params, self.exp_avgs, self.exp_avg_sqs,
                                           self.step_count, self.hyperparameters)


def optimizer_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every parameter of ``optimizer``, in order."""
    return [p for group in optimizer.param_groups for p in group["params"]]


def adam_state(optimizer: torch.optim.Adam, key: str) -> list[torch.Tensor]:
    """``optimizer.state[p][key]`` for every parameter, in parameter order."""
    return [optimizer.state[p][key] for p in optimizer_params(optimizer)]


def train_foreach_map_and_torch_adam(workload: Workload,
                                     steps: int) -> tuple[ForeachMapAdam, torch.optim.Adam]:
    """Both optimizers after ``steps`` steps from the same weights on the same gradients."""
    model = build_model(workload)
    reference_model = clone_model(model)
    ours = ForeachMapAdam(parameters_of(model))
    hyper = ours.hyperparameters
    reference = torch.optim.Adam(
        reference_model.parameters(), lr=hyper.lr, betas=(hyper.beta1, hyper.beta2), eps=hyper.eps
    )
    train(ours.params, ours.step, steps)
    train(parameters_of(reference_model), reference.step, steps)
    return ours, reference


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    if not foreach_map_available():
        sys.exit(FOREACH_MAP_MISSING)
    workload = workload_from_arguments(args)

    ours, reference = train_foreach_map_and_torch_adam(workload, args.steps)
    print(f"{workload.describe()}: {args.steps} steps, foreach_map Adam vs torch.optim.Adam")
    for what, mine, theirs in [
        ("params", ours.params, optimizer_params(reference)),
        ("exp_avg", ours.exp_avgs, adam_state(reference, "exp_avg")),
        ("exp_avg_sq", ours.exp_avg_sqs, adam_state(reference, "exp_avg_sq")),
    ]:
        print(f"largest {what} difference: {max_abs_difference(mine, theirs):.2e}")
    print(f"step: {float(ours.step_count):g} (torch.optim.Adam: "
          f"{sorted({float(s) for s in adam_state(reference, 'step')})})")


if __name__ == "__main__":
    main()
