"""Scenario 3 under pytest-nocompile: the foreach_map Adam is Adam, and compiles once."""

import pytest

from examples.foreach_map_adam import (
    FOREACH_MAP_MISSING,
    adam_state,
    foreach_map_available,
    optimizer_params,
    train_foreach_map_and_torch_adam,
)
from examples.workload import Workload, assert_all_close, parameter_atol

STEPS = 10


# A mark, not a module-level importorskip: tests/acceptance imports this test.
@pytest.mark.skipif(not foreach_map_available(), reason=FOREACH_MAP_MISSING)
@pytest.mark.max_recompiles(0)
def test_foreach_map_adam_matches_torch_adam_without_recompiling(workload: Workload) -> None:
    ours, reference = train_foreach_map_and_torch_adam(workload, STEPS)

    lr = ours.hyperparameters.lr
    assert_all_close(ours.params, optimizer_params(reference), "param", atol=parameter_atol(STEPS, lr))
    assert_all_close(ours.exp_avgs, adam_state(reference, "exp_avg"), "exp_avg")
    assert_all_close(ours.exp_avg_sqs, adam_state(reference, "exp_avg_sq"), "exp_avg_sq")
    assert float(ours.step_count) == STEPS
    assert [float(step) for step in adam_state(reference, "step")] == [STEPS] * len(ours.params)
