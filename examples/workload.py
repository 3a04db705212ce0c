"""What every scenario trains and how results are compared.

A workload is a stack of bias-free ``Linear(width, width)`` layers, as in the
tutorials. Gradients are synthetic and seeded per step rather than produced by a
forward/backward pass: two optimizers being compared then see bit-identical
gradients, and nothing about the model's forward pass (cuBLAS algorithm choice,
TF32) can leak into a comparison of optimizers.
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch

# Tolerances for comparing two correct Adam runs that started from the same state
# and saw the same gradients.
#
# Optimizer states (exp_avg, exp_avg_sq) depend only on the gradients, so they
# agree to rounding: compiled code fuses and reorders a few float32 operations
# per element. STATE_RTOL is ~80 float32 ulps; STATE_ATOL covers elements whose
# value is ~0 after cancellation, where the error is a few ulps of the
# gradients' magnitude (0.1 * randn, ulp ~1e-8), not of the result.
STATE_RTOL = 1e-5
STATE_ATOL = 1e-7

# Parameters drift further apart, for a reason that is not a bug: compiled
# (and capturable) Adam computes the bias correction 1 - beta2**step in float32
# on the device, eager Adam in Python doubles. At step 1 that is 1 - 0.999 =
# 1e-3 computed from a float32 0.999**1 that is off by up to 6e-8, i.e. ~6e-5
# relative; after the square root ~3e-5 relative in every element's update,
# shrinking as step grows (measured: 1.0e-6 absolute after 20 steps at lr 0.01,
# on CPU with torch 2.13 and on an H100 with torch 2.11). An Adam update is at
# most ~lr per element, hence the bound below. A real mistake (a wrong beta, a
# missing bias correction, a skipped or repeated step) moves parameters by ~lr
# per step, a thousand times more.
BIAS_CORRECTION_RELATIVE_ERROR = 1e-4  # 3e-5 with margin


def parameter_atol(steps: int, lr: float) -> float:
    """How far two correct Adam runs of ``steps`` steps at learning rate <= ``lr`` may drift
    apart."""
    return steps * lr * BIAS_CORRECTION_RELATIVE_ERROR


GRADIENT_SEED = 1234


@dataclass(frozen=True)
class Workload:
    """``depth`` bias-free ``Linear(width, width)`` layers, trained on ``device``."""

    width: int
    depth: int
    device: str

    @property
    def numel(self) -> int:
        """Number of parameter elements: what one optimizer step has to update."""
        return self.width * self.width * self.depth

    def describe(self) -> str:
        """E.g. ``10 x Linear(1024, 1024, bias=False) on cuda``."""
        return f"{self.depth} x Linear({self.width}, {self.width}, bias=False) on {self.device}"


def small_workload(device: str = "cpu") -> Workload:
    """Small enough that an inductor compile on CPU is the dominant cost."""
    return Workload(width=16, depth=3, device=device)


def tutorial_workload(device: str = "cuda") -> Workload:
    """The tutorials' model: 10 x Linear(1024, 1024, bias=False), ~10.5 M parameters."""
    return Workload(width=1024, depth=10, device=device)


def build_model(workload: Workload, seed: int = 0) -> torch.nn.Sequential:
    """The workload's model with weights drawn from ``seed``, identical on every device.

    Weights are initialised on the CPU under a forked RNG, then moved: the same
    seed gives the same weights on CPU and CUDA, and the caller's global RNG
    state is left alone.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = [torch.nn.Linear(workload.width, workload.width, bias=False)
                  for _ in range(workload.depth)]
    return torch.nn.Sequential(*layers).to(workload.device)


def clone_model(model: torch.nn.Module) -> torch.nn.Module:
    """An independent copy with identical weights, for an eager reference run."""
    return copy.deepcopy(model)


def parameters_of(model: torch.nn.Module) -> list[torch.Tensor]:
    """``model``'s parameters as a list, in registration order."""
    return list(model.parameters())


def set_synthetic_grads(params: Sequence[torch.Tensor], step: int,
                        seed: int = GRADIENT_SEED) -> None:
    """Give every parameter a fresh ``.grad`` drawn from (``seed``, ``step``).

    A new tensor each step, as ``zero_grad(set_to_none=True)`` followed by
    ``backward()`` would produce: a compiled optimizer must not recompile for it.
    """
    device = params[0].device
    generator = torch.Generator(device=device).manual_seed(seed * 100_003 + step)
    for param in params:
        param.grad = 0.1 * torch.randn(param.shape, generator=generator, device=device,
                                       dtype=param.dtype)


def train(params: Sequence[torch.Tensor], step: Callable[[], object], steps: int,
          first_step: int = 0) -> None:
    """Run ``steps`` optimizer steps, each on fresh synthetic gradients for ``params``."""
    for index in range(first_step, first_step + steps):
        set_synthetic_grads(params, index)
        step()


def assert_all_close(
    actual: Iterable[torch.Tensor],
    expected: Iterable[torch.Tensor],
    what: str,
    atol: float = STATE_ATOL,
    rtol: float = STATE_RTOL,
) -> None:
    """Assert two tensor sequences match elementwise, naming the first mismatch."""
    actual, expected = list(actual), list(expected)
    assert len(actual) == len(expected), f"{what}: {len(actual)} tensors, expected {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol,
                                   msg=lambda m, i=index: f"{what}[{i}]: {m}")


def max_abs_difference(actual: Iterable[torch.Tensor], expected: Iterable[torch.Tensor]) -> float:
    """Largest elementwise ``|actual - expected|``: for scripts to print."""
    return max(float((got.detach() - want.detach()).abs().max())
               for got, want in zip(actual, expected))


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--device`` / ``--small`` options every scenario script shares."""
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default_device,
                        help=f"where to run (default: {default_device})")
    parser.add_argument(
        "--small",
        action="store_true",
        help="3 x Linear(16, 16) instead of the tutorials' 10 x Linear(1024, 1024)",
    )


def workload_from_arguments(args: argparse.Namespace) -> Workload:
    """The workload the ``--device`` / ``--small`` options ask for."""
    if args.small:
        return small_workload(args.device)
    return tutorial_workload(args.device)
