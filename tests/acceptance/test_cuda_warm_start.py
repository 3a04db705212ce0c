"""A warm start of the compiled Adam step (the tutorials' model, on the GPU) misses no cache entry
(issue 21).

Both runs are fresh processes (``nocompile_warm_start``): the cold one with
an empty private cache (inductor's FX graphs and AOT autograd's entries,
Triton's kernels), the warm one sharing it, as a restarted job would.
"""

import pytest

from examples.compiled_optimizer import compile_optimizer_step, make_adam
from examples.workload import build_model, parameters_of, train, tutorial_workload
from pytest_nocompile import WarmStartRunner

STEPS = 5


def compiled_adam_steps() -> None:
    """What a training job's start does: build the model, compile the Adam step, take a few
    steps."""
    model = build_model(tutorial_workload("cuda"))
    train(parameters_of(model), compile_optimizer_step(make_adam(model)), STEPS)


@pytest.mark.cuda
def test_a_warm_start_of_the_compiled_adam_step_misses_no_cache_entry(
        nocompile_warm_start: WarmStartRunner) -> None:
    cold, warm = nocompile_warm_start(compiled_adam_steps)
    print(cold, warm, sep="\n")  # the figures, for tests/acceptance/README.md (-rP)
    assert cold.recompiles == warm.recompiles == 0
    assert cold.cache_misses > 0 and cold.cache_hits == 0
    assert warm.cache_misses == 0 and warm.cache_hits == cold.cache_misses
    assert warm.compile_seconds is not None and cold.compile_seconds is not None
    assert warm.compile_seconds < cold.compile_seconds / 2
