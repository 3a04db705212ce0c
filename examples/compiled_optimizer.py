"""Scenario 1: ``torch.optim.Adam.step`` wrapped in ``torch.compile``.

The first call compiles the step; every later call must reuse that code, even
though each step brings new gradient tensors. Run as a script it trains a copy of
the model eagerly from the same start and prints how far the two ended apart;
``TORCH_LOGS=recompiles`` shows that nothing recompiles.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

# run as `python examples/compiled_optimizer.py`: resolve `examples.*` as pytest does
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from examples.workload import (
    Workload,
    add_workload_arguments,
    build_model,
    clone_model,
    max_abs_difference,
    parameter_atol,
    parameters_of,
    train,
    workload_from_arguments,
)

LEARNING_RATE = 0.01  # the tutorial's

StepFunction = Callable[[], None]


def make_adam(model: torch.nn.Module, lr: float | torch.Tensor = LEARNING_RATE,
              **options: object) -> torch.optim.Adam:
    """``torch.optim.Adam`` over ``model``'s parameters; ``options`` go to Adam (``foreach``,
    ``fused``...)."""
    return torch.optim.Adam(model.parameters(), lr=lr, **options)


def compile_optimizer_step(optimizer: torch.optim.Optimizer) -> StepFunction:
    """``optimizer.step()`` inside a function wrapped in ``torch.compile``, as the tutorial writes
    it."""

    @torch.compile
    def compiled_step() -> None:
        optimizer.step()

    return compiled_step


def train_compiled_and_eager(workload: Workload,
                             steps: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Train two identical models ``steps`` Adam steps on identical gradients.

    Returns the parameters after a compiled ``opt.step`` and after an eager one.
    """
    compiled_model = build_model(workload)
    eager_model = clone_model(compiled_model)

    train(parameters_of(compiled_model), compile_optimizer_step(make_adam(compiled_model)), steps)
    train(parameters_of(eager_model), make_adam(eager_model).step, steps)
    return parameters_of(compiled_model), parameters_of(eager_model)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    workload = workload_from_arguments(args)

    compiled, eager = train_compiled_and_eager(workload, args.steps)
    print(f"{workload.describe()}: {args.steps} Adam steps, compiled opt.step vs eager")
    print(
        f"largest parameter difference: {max_abs_difference(compiled, eager):.2e}"
        f" (tolerated: {parameter_atol(args.steps, LEARNING_RATE):.0e}, see examples/workload.py)"
    )
    print("(run with TORCH_LOGS=recompiles to see that the compiled step never recompiles)")


if __name__ == "__main__":
    main()
