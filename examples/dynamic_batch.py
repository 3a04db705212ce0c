"""Scenario 4: a batch dim meant to stay dynamic, and a branch on its size that specialises it.

A model compiled with ``dynamic=True`` serves batches of any size from one
graph, except sizes 0 and 1, which dynamo specialises by its own rule.
``layer_norm_then_project`` keeps the batch dim dynamic. ``with_pair_shortcut``
takes a "shortcut" for a batch of exactly 2 rows (``if x.shape[0] == 2:``):
dynamo guards the size with ``x.size()[0] != 2`` and compiles again when a
batch of 2 arrives. A zero-recompile budget catches that only if a test
happens to use a batch of 2; these catch it for any batch:

- ``pytest_nocompile.sweep_sizes(fn, make_args, sizes)`` calls the compiled
  function over the sizes, then 0, 1, 2 and the first size again, and fails
  on each size that recompiled for a reason not dynamo's own 0/1 rule,
  naming the branch's line;
- ``@pytest.mark.dynamic_dims(x=0)`` fails a test whose call specialised
  dim 0 of ``x``, whatever made it recompile.

Run as a script it sweeps both functions and prints what the sweep says.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

# run as `python examples/dynamic_batch.py`: resolve `examples.*` as pytest does
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

FEATURES = 16
BATCH_SIZES = [4, 8, 32]  # what the model serves; the sweep adds 0, 1 and 2


def layer_norm_then_project(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Every op is per row: nothing about the batch size is read, so dim 0 stays dynamic."""
    return torch.nn.functional.layer_norm(x, (FEATURES,)) @ weight


def with_pair_shortcut(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The same, with a Python branch on the batch size: dynamo specialises dim 0 at 2."""
    if x.shape[0] == 2:  # a "shortcut" for pairs: the branch the sweep names
        return (x - x.mean(0)) @ weight
    return torch.nn.functional.layer_norm(x, (FEATURES,)) @ weight


def compiled(function: Callable[..., torch.Tensor],
             backend: str = "inductor") -> Callable[..., torch.Tensor]:
    """``function`` compiled with a dynamic batch dim."""
    return torch.compile(function, backend=backend, dynamic=True)


def batch(rows: int, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``make_args`` for the sweep: a batch of ``rows`` rows, and the weight."""
    return torch.randn(rows, FEATURES), weight


def main() -> None:
    from pytest_nocompile import sweep_sizes

    weight = torch.randn(FEATURES, FEATURES)
    for function in (layer_norm_then_project, with_pair_shortcut):
        try:
            swept = sweep_sizes(compiled(function), lambda rows: batch(rows, weight), BATCH_SIZES)
        except AssertionError as failure:
            print(f"{function.__name__}: the sweep failed:\n{failure}\n")
        else:
            recompiled = [step.size for step in swept if step.recompiles]
            print(f"{function.__name__}: the sweep passed; dynamo's own 0/1 specialisation "
                  f"recompiled at sizes {recompiled}\n")


if __name__ == "__main__":
    main()
