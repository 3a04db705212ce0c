"""Scenario 1 under pytest-nocompile: a compiled Adam step reuses its first compile."""

import pytest

from examples.compiled_optimizer import LEARNING_RATE, train_compiled_and_eager
from examples.workload import Workload, assert_all_close, parameter_atol

STEPS = 20  # one compile, then 19 steps on new gradient tensors that must reuse it


@pytest.mark.max_recompiles(0)
def test_compiled_adam_steps_without_recompiling_and_matches_eager(workload: Workload) -> None:
    compiled, eager = train_compiled_and_eager(workload, STEPS)

    assert_all_close(compiled, eager, "parameter", atol=parameter_atol(STEPS, LEARNING_RATE))
