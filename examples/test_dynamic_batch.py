"""Scenario 4 under pytest-nocompile: a dynamic batch dim kept, and a branch on its size caught.

The functions are compiled with the eager backend here: dynamo's guards and
recompiles are the same as with inductor, at a fraction of the compile time.
"""

import pytest
import torch

from examples.dynamic_batch import (
    BATCH_SIZES,
    FEATURES,
    batch,
    compiled,
    layer_norm_then_project,
    with_pair_shortcut,
)
from pytest_nocompile import sweep_sizes

BACKEND = "eager"
# torch 2.4 names no line of the user's in a size guard; 2.6 on do (2.5 not recorded).
NAMES_THE_BRANCH = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 6)


@pytest.fixture
def weight() -> torch.Tensor:
    return torch.randn(FEATURES, FEATURES)


# The budget markers below count the sweeps' recompiles, and isolate the tests: the functions' code
# is shared by every test here, and dynamo keeps its cache entries on the code (a test nothing
# watches starts from another's).
@pytest.mark.max_recompiles(2)  # dynamo's own, at sizes 0 and 1
def test_the_sweep_passes_a_dynamic_batch_dim(weight: torch.Tensor) -> None:
    swept = sweep_sizes(compiled(layer_norm_then_project, BACKEND),
                        lambda rows: batch(rows, weight), BATCH_SIZES)
    # dynamo's own specialisation: listed, not failed
    assert [step.size for step in swept if step.recompiles] == [0, 1]


@pytest.mark.max_recompiles(3)  # 0 and 1, and the branch at 2
def test_the_sweep_names_the_branch_on_a_batch_of_2(weight: torch.Tensor) -> None:
    with pytest.raises(AssertionError) as failure:
        sweep_sizes(compiled(with_pair_shortcut, BACKEND), lambda rows: batch(rows, weight),
                    BATCH_SIZES)
    assert "1 size recompiled, not by dynamo's own 0/1 specialisation: 2 " in str(failure.value)
    if NAMES_THE_BRANCH:
        assert "in with_pair_shortcut: if x.shape[0] == 2:" in str(failure.value)


@pytest.mark.dynamic_dims(x=0)
def test_serving_any_batch_keeps_dim_0_dynamic(weight: torch.Tensor) -> None:
    model = compiled(layer_norm_then_project, BACKEND)
    # 1: dynamo's own 0/1 specialisation, which the contract leaves to dynamo
    for rows in (*BATCH_SIZES, 1, 2, 5):
        model(*batch(rows, weight))


@pytest.mark.xfail(strict=True,
                   reason="a batch of 2 takes the shortcut: dynamo specialises x dim 0 at 2, and "
                          "dynamic_dims fails the test")
@pytest.mark.dynamic_dims(x=0)
def test_the_pair_shortcut_breaks_the_contract(weight: torch.Tensor) -> None:
    model = compiled(with_pair_shortcut, BACKEND)
    for rows in (*BATCH_SIZES, 2):
        model(*batch(rows, weight))
