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
from typing import Iterable, Sequence

import torch

# Adam's update is a handful of float32 operations per element. Compiled code
# computes the same formula in another order (fused multiply-adds, the bias
# corrections in float32 on the device instead of in Python doubles), so after a
# few steps results differ by a few ulps of the values involved: measured on CPU,
# torch 2.13, at most ~1e-7 relative for parameters and ~4e-7 for exp_avg_sq.
# rtol 1e-5 (about 80 ulps) leaves room for other backends while still catching
# any real mistake (a wrong beta, a missed bias correction or a skipped step
# changes values by 1e-3 relative or more). atol only covers elements whose
# expected value is (nearly) zero, where a relative bound means nothing; it sits
# far below the smallest state values that occur (exp_avg_sq ~ (1-beta2) * g**2
# ~ 1e-3 * 1e-2 for the seeded gradients).
ADAM_RTOL = 1e-5
ADAM_ATOL = 1e-9

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
        layers = [torch.nn.Linear(workload.width, workload.width, bias=False) for _ in range(workload.depth)]
    return torch.nn.Sequential(*layers).to(workload.device)


def clone_model(model: torch.nn.Module) -> torch.nn.Module:
    """An independent copy with identical weights, for an eager reference run."""
    return copy.deepcopy(model)


def parameters_of(model: torch.nn.Module) -> list[torch.Tensor]:
    return list(model.parameters())


def set_synthetic_grads(params: Sequence[torch.Tensor], step: int, seed: int = GRADIENT_SEED) -> None:
    """Give every parameter a fresh ``.grad`` drawn from (``seed``, ``step``).

    A new tensor each step, as ``zero_grad(set_to_none=True)`` followed by
    ``backward()`` would produce: a compiled optimizer must not recompile for it.
    """
    device = params[0].device
    generator = torch.Generator(device=device).manual_seed(seed * 100_003 + step)
    for param in params:
        param.grad = 0.1 * torch.randn(param.shape, generator=generator, device=device, dtype=param.dtype)


def assert_all_close(actual: Iterable[torch.Tensor], expected: Iterable[torch.Tensor], what: str) -> None:
    """Assert two tensor sequences match within the Adam tolerances, naming the first mismatch."""
    actual, expected = list(actual), list(expected)
    assert len(actual) == len(expected), f"{what}: {len(actual)} tensors, expected {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(
            got, want, rtol=ADAM_RTOL, atol=ADAM_ATOL, msg=lambda m, i=index: f"{what}[{i}]: {m}"
        )


def max_relative_difference(actual: Iterable[torch.Tensor], expected: Iterable[torch.Tensor]) -> float:
    """Largest ``|a - e| / max(|e|, tiny)`` over all elements: for scripts to print."""
    worst = 0.0
    for got, want in zip(actual, expected):
        scale = want.abs().clamp_min(torch.finfo(want.dtype).tiny)
        worst = max(worst, float(((got - want).abs() / scale).max()))
    return worst


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--device`` / ``--small`` options every scenario script shares."""
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default_device, help=f"where to run (default: {default_device})")
    parser.add_argument(
        "--small",
        action="store_true",
        help="3 x Linear(16, 16) instead of the tutorials' 10 x Linear(1024, 1024)",
    )


def workload_from_arguments(args: argparse.Namespace) -> Workload:
    if args.small:
        return small_workload(args.device)
    return tutorial_workload(args.device)

