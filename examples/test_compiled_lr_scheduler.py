"""Scenario 2 under pytest-nocompile: compiled ``opt.step(); sched.step()``.

A tensor LR keeps the compiled step valid while the LR changes; a float LR makes
dynamo guard on ``param_groups[0]['lr']`` and recompile, which a zero budget
must catch. How many recompiles a float LR costs depends on the torch version
(2.11: one per LR change; 2.13: one, then the float is treated as dynamic), so
the tests assert what holds on all of them: at least one, naming that guard.
"""

from typing import Sequence

import pytest
import torch

from examples.compiled_lr_scheduler import (
    BETA1_GUARD,
    LINEAR_TOTAL_ITERS,
    LR_GUARD,
    compile_optimizer_and_scheduler_step,
    expected_linear_warmup_lrs,
    linear_warmup,
    one_cycle,
    run_scheduled_adam,
)
from examples.compiled_optimizer import LEARNING_RATE, make_adam
from examples.workload import (
    Workload,
    assert_all_close,
    build_model,
    parameter_atol,
    parameters_of,
    train,
)

STEPS = LINEAR_TOTAL_ITERS + 1  # the whole ramp, then one step on the plateau
FLOAT_LR_STEPS = 3  # the LR changes after every step, so the second call already meets a new one
ONE_CYCLE_TOTAL_STEPS = 10  # OneCycleLR refuses to step past its total
# each step moves beta1, so each compiled call after the first recompiles: keep it short
ONE_CYCLE_STEPS = 3
# a tensor LR is float32: ~6e-8 relative from the float schedule, with margin
FLOAT32_RELATIVE = 1e-6


def guards_naming(events: Sequence, text: str) -> list[str]:
    """The guard texts, over all recompile events, that contain ``text``."""
    return [reason.guard for event in events for reason in event.reasons if text in reason.guard]


@pytest.mark.max_recompiles(0)
def test_tensor_lr_follows_the_schedule_without_recompiling(workload: Workload) -> None:
    compiled = run_scheduled_adam(workload, linear_warmup, tensor_lr=True, steps=STEPS)
    eager = run_scheduled_adam(workload, linear_warmup, tensor_lr=False, steps=STEPS,
                               compiled=False)

    assert compiled.lrs == pytest.approx(expected_linear_warmup_lrs(STEPS), rel=FLOAT32_RELATIVE)
    assert len(set(compiled.lrs[:LINEAR_TOTAL_ITERS])) == LINEAR_TOTAL_ITERS, (
        "the LR must change at every ramp step")
    # The compiled step really uses the changing LR: it trains as eager Adam does with the float
    # schedule.
    assert_all_close(compiled.params, eager.params, "parameter",
                     atol=parameter_atol(STEPS, LEARNING_RATE))


def test_tensor_lr_steps_make_no_device_to_host_sync(workload: Workload,
                                                     nocompile_assert_max_syncs) -> None:
    """Compiled, Adam takes its capturable path: the LR and the step counts stay tensors, and no
    step reads one back.

    Only the steps are in the block: moving the weights to the device syncs, and so do the
    comparisons of the test above. Without CUDA torch warns of no sync and the block has nothing to
    count.
    """
    model = build_model(workload)
    optimizer = make_adam(model, lr=torch.tensor(LEARNING_RATE))
    step = compile_optimizer_and_scheduler_step(optimizer, linear_warmup(optimizer))
    with nocompile_assert_max_syncs(0):
        train(parameters_of(model), step, STEPS)


@pytest.mark.xfail(strict=True,
                   reason="float LR: dynamo guards on param_groups[0]['lr'] and recompiles")
@pytest.mark.max_recompiles(0)
def test_float_lr_fails_a_zero_recompile_budget(workload: Workload) -> None:
    run_scheduled_adam(workload, linear_warmup, tensor_lr=False, steps=FLOAT_LR_STEPS)


def test_float_lr_recompile_names_the_lr_guard(workload: Workload,
                                               nocompile_recompiles: Sequence) -> None:
    run_scheduled_adam(workload, linear_warmup, tensor_lr=False, steps=FLOAT_LR_STEPS)

    assert guards_naming(nocompile_recompiles, LR_GUARD), (
        f"no recompile names {LR_GUARD}: {list(nocompile_recompiles)}")


def test_one_cycle_lr_recompiles_on_beta1_even_with_a_tensor_lr(
        workload: Workload, nocompile_recompiles: Sequence) -> None:
    """OneCycleLR cycles beta1 too and writes it back as a float: the tensor LR does not help
    there."""
    run = run_scheduled_adam(workload, one_cycle(ONE_CYCLE_TOTAL_STEPS), tensor_lr=True,
                             steps=ONE_CYCLE_STEPS)

    assert len(set(run.beta1s)) == ONE_CYCLE_STEPS, "OneCycleLR should move beta1 at every step"
    assert guards_naming(nocompile_recompiles, BETA1_GUARD), (
        f"no recompile names {BETA1_GUARD}: {list(nocompile_recompiles)}")
    assert not guards_naming(nocompile_recompiles, LR_GUARD), (
        "the tensor LR itself should never be guarded on")


@pytest.mark.max_recompiles(0)
def test_one_cycle_lr_without_momentum_cycling_does_not_recompile(workload: Workload) -> None:
    schedule = one_cycle(ONE_CYCLE_TOTAL_STEPS, cycle_momentum=False)
    compiled = run_scheduled_adam(workload, schedule, tensor_lr=True, steps=STEPS)
    eager = run_scheduled_adam(workload, schedule, tensor_lr=False, steps=STEPS, compiled=False)

    assert compiled.lrs == pytest.approx(eager.lrs, rel=FLOAT32_RELATIVE)
    assert_all_close(compiled.params, eager.params, "parameter",
                     atol=parameter_atol(STEPS, LEARNING_RATE))
