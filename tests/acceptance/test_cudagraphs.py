"""CUDA graphs (mode="reduce-overhead") under max_cudagraph_rerecords and max_cudagraph_skips, on a
real GPU.

What torch 2.11 does on an H100 (measured, tests/data/torch-2.11-cudagraphs.txt):
the foreach_map Adam step with its states marked static records once and
replays; with plain state tensors it is skipped ("mutated inputs"); a module
whose weight is a new tensor at each call is re-recorded ("static input data
pointer changed"); a float LR recompiles at each change, and each recompile's
graph is a new tree, recorded once: it is the recompile gate that catches it.
The failing scenarios run as a user's test file (the ``run`` fixture) so that
their failure lines are checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest
import torch

from examples.compiled_lr_scheduler import LR_GUARD, linear_warmup
from examples.compiled_optimizer import make_adam
from examples.foreach_map_adam import (
    FOREACH_MAP_MISSING,
    AdamHyperparameters,
    foreach_map_adam_step,
    foreach_map_available,
)
from examples.workload import Workload, build_model, parameters_of, train
from nocompile_testing import RunPytest, docs_snippet

pytestmark = pytest.mark.cuda
STEPS = 10


@pytest.mark.skipif(not foreach_map_available(), reason=FOREACH_MAP_MISSING)
@pytest.mark.max_cudagraph_rerecords(0)
@pytest.mark.max_cudagraph_skips(0)
@pytest.mark.max_recompiles(0)
def test_foreach_map_adam_under_cuda_graphs_is_recorded_once(workload: Workload) -> None:
    params = parameters_of(build_model(workload))
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    step_count = torch.zeros((), device=params[0].device)
    for state in (*exp_avgs, *exp_avg_sqs, step_count):
        # as torch.optim does for its compiled step: else a mutated input, a skip
        torch._dynamo.mark_static_address(state)
    compiled = torch.compile(foreach_map_adam_step, fullgraph=True, mode="reduce-overhead")
    hyper = AdamHyperparameters()

    def step() -> None:
        with torch.no_grad():
            compiled(params, exp_avgs, exp_avg_sqs, step_count, hyper)

    train(params, step, STEPS)
    assert float(step_count) == STEPS


def float_lr_steps_under_cuda_graphs(workload: Workload) -> None:
    model = build_model(workload)
    optimizer = make_adam(model)  # a float LR
    scheduler = linear_warmup(optimizer)

    @torch.compile(mode="reduce-overhead")
    def step() -> None:
        optimizer.step()

    def step_and_schedule() -> None:
        step()
        scheduler.step()

    train(parameters_of(model), step_and_schedule, 8)


@pytest.mark.xfail(strict=True,
                   reason="float LR: the step guards on param_groups[0]['lr'] and recompiles "
                          "at each change")
@pytest.mark.max_recompiles(0)
def test_a_float_lr_under_cuda_graphs_fails_a_zero_recompile_budget(workload: Workload) -> None:
    float_lr_steps_under_cuda_graphs(workload)


def test_a_float_lr_under_cuda_graphs_recompiles_on_the_lr_guard(nocompile_recompiles: Sequence,
                                                                 workload: Workload) -> None:
    float_lr_steps_under_cuda_graphs(workload)
    assert any(LR_GUARD in reason.guard for event in nocompile_recompiles
               for reason in event.reasons), list(nocompile_recompiles)


# the page's example, run as written
NEW_WEIGHT_EACH_CALL = docs_snippet("cudagraphs.md", "test_rerecord.py")


def test_a_static_input_whose_address_changes_fails_a_zero_re_record_budget_with_torchs_reason(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_rerecord=NEW_WEIGHT_EACH_CALL)
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "* CUDA-graph re-record* > max_cudagraph_rerecords(0) (marker on the test)",
        "[[]1/*[]] cudagraph_rerecord*",
        "    reason: * recorded again: static input data pointer changed (input *)",
        "    triggered by: test_rerecord.py:16 in test_new_weight_each_call: compiled(x)",
    ])


MUTATED_INPUT = '''
import pytest
import torch


def count_calls(x, calls):
    calls.add_(1)
    return x * 2


@pytest.mark.max_cudagraph_skips(0)
def test_mutated_input():
    compiled = torch.compile(count_calls, mode="reduce-overhead")
    calls = torch.zeros(1, device="cuda")
    for _ in range(3):
        compiled(torch.randn(4, device="cuda"), calls)
'''


def test_a_mutated_input_fails_a_zero_skip_budget_naming_the_mutation(pytester: pytest.Pytester,
                                                                      run: RunPytest) -> None:
    pytester.makepyfile(test_skip=MUTATED_INPUT)
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "1 CUDA-graph skip > max_cudagraph_skips(0) (marker on the test)",
        "[[]1/1[]] cudagraph_skip*",
        "    reason: mutated inputs (1 instances)",
        "            at test_skip.py:6 in count_calls: calls.add_(1)",
        # the compiled count_calls' own frame or the test's call: both user code
        "    triggered by: test_skip.py:*",
    ])


FOREACH_MAP_ADAM_WITH_PLAIN_STATE = f'''
import sys

sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})  # the repository root: examples.*

import pytest
import torch

from examples.foreach_map_adam import AdamHyperparameters, foreach_map_adam_step
from examples.workload import build_model, parameters_of, train, tutorial_workload


@pytest.mark.max_cudagraph_skips(0)
def test_plain_state():
    params = parameters_of(build_model(tutorial_workload("cuda")))
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    step_count = torch.zeros((), device="cuda")
    compiled = torch.compile(foreach_map_adam_step, fullgraph=True, mode="reduce-overhead")
    hyper = AdamHyperparameters()

    def step():
        with torch.no_grad():
            compiled(params, exp_avgs, exp_avg_sqs, step_count, hyper)

    train(params, step, 3)
'''


@pytest.mark.skipif(not foreach_map_available(), reason=FOREACH_MAP_MISSING)
def test_the_foreach_map_adam_step_with_plain_state_tensors_fails_a_zero_skip_budget(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    # The companion of test_foreach_map_adam_under_cuda_graphs_is_recorded_once: without its static
    # addresses, a skip.
    pytester.makepyfile(test_plain_state=FOREACH_MAP_ADAM_WITH_PLAIN_STATE)
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "1 CUDA-graph skip > max_cudagraph_skips(0) (marker on the test)",
        "[[]1/1[]] cudagraph_skip*",
        "    reason: mutated inputs (* instances)",
        "            at *examples/foreach_map_adam.py:* in foreach_map_adam_step: *",
    ])
