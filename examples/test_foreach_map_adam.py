"""Scenario 3 under pytest-nocompile: the foreach_map Adam is Adam, and compiles once."""

import pytest

from examples.foreach_map_adam import (
    FOREACH_MAP_MISSING,
    STEP_KERNELS,
    ForeachMapAdam,
    adam_state,
    foreach_map_available,
    optimizer_params,
    train_foreach_map_and_torch_adam,
)
from examples.workload import (
    Workload,
    assert_all_close,
    build_model,
    parameter_atol,
    parameters_of,
    train,
)

STEPS = 10


# A mark, not a module-level importorskip: tests/acceptance imports this test.
@pytest.mark.skipif(not foreach_map_available(), reason=FOREACH_MAP_MISSING)
@pytest.mark.max_recompiles(0)
def test_foreach_map_adam_matches_torch_adam_without_recompiling(workload: Workload) -> None:
    ours, reference = train_foreach_map_and_torch_adam(workload, STEPS)

    lr = ours.hyperparameters.lr
    assert_all_close(ours.params, optimizer_params(reference), "param",
                     atol=parameter_atol(STEPS, lr))
    assert_all_close(ours.exp_avgs, adam_state(reference, "exp_avg"), "exp_avg")
    assert_all_close(ours.exp_avg_sqs, adam_state(reference, "exp_avg_sq"), "exp_avg_sq")
    assert float(ours.step_count) == STEPS
    assert [float(step) for step in adam_state(reference, "step")] == [STEPS] * len(ours.params)


@pytest.mark.skipif(not foreach_map_available(), reason=FOREACH_MAP_MISSING)
def test_foreach_map_adam_step_is_fused_into_few_kernels(workload: Workload,
                                                         nocompile_assert_max_kernels) -> None:
    """A graph break or a lost fusion in the step would add kernels: the budget is what inductor
    makes of it now."""
    optimizer = ForeachMapAdam(parameters_of(build_model(workload)))
    with nocompile_assert_max_kernels(STEP_KERNELS[workload.device]):
        train(optimizer.params, optimizer.step, STEPS)
