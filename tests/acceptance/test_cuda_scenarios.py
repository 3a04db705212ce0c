"""The examples' three scenarios on CUDA at the tutorials' size (10 x Linear(1024, 1024)).

The tests are the examples' own, imported unchanged (marks included): only the
``workload`` fixture differs, this directory's conftest gives them the
tutorials' model on the GPU.
"""

import pytest

from examples.test_compiled_lr_scheduler import (  # noqa: F401  (collected from here)
    test_float_lr_fails_a_zero_recompile_budget,
    test_float_lr_recompile_names_the_lr_guard,
    test_one_cycle_lr_recompiles_on_beta1_even_with_a_tensor_lr,
    test_one_cycle_lr_without_momentum_cycling_does_not_recompile,
    test_tensor_lr_follows_the_schedule_without_recompiling,
)
from examples.test_compiled_optimizer import (  # noqa: F401
    test_compiled_adam_steps_without_recompiling_and_matches_eager,
)
from examples.test_foreach_map_adam import (  # noqa: F401
    test_foreach_map_adam_matches_torch_adam_without_recompiling,
)

pytestmark = pytest.mark.cuda
