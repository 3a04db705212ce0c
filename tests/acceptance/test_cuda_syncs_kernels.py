"""max_syncs and max_kernels on a real GPU: the seeds' claims, and a scheduler's ``.item()`` caught
with its line.

What was measured on an H100 with torch 2.11 (shared/DESIGN.md, section 7): in
"warn" mode torch warns once per synchronizing operation (``.item()`` 1,
``nonzero`` 1, ``torch.tensor([...], device="cuda")[0].item()`` 2); the compiled
capturable Adam step with a tensor LR made 0 syncs; the foreach_map Adam step
compiled into 2 kernels. The examples' tests claim the last two (imported
unchanged, at the tutorials' size); the failing scenarios run as a user's test
file (the ``run`` fixture) so that their failure lines are checked.
"""

from __future__ import annotations

import pytest

from examples.test_compiled_lr_scheduler import (  # noqa: F401  (collected here)
    test_tensor_lr_steps_make_no_device_to_host_sync,
)
from examples.test_foreach_map_adam import (  # noqa: F401
    test_foreach_map_adam_step_is_fused_into_few_kernels,
)
from nocompile_testing import RunPytest, docs_snippet

pytestmark = pytest.mark.cuda

SCHEDULER = docs_snippet("syncs.md", "test_sched.py")  # the page's example, run as written


def test_a_schedulers_item_fails_a_zero_sync_budget_naming_its_line(pytester: pytest.Pytester,
                                                                    run: RunPytest) -> None:
    pytester.makepyfile(test_sched=SCHEDULER)
    # the syncs' warnings are the plugin's: no error, no output
    result = run("-W", "error::UserWarning")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "3 syncs > max_syncs(0) (marker on the test)",
        "3 × test_sched.py:11 in step: t = self.timesteps[i].item()",  # as the page shows it
    ])
    assert "warnings summary" not in result.stdout.str()


USERS_OWN_MODE = '''
import pytest
import torch


@pytest.mark.max_syncs(5)
def test_counted_with_the_users_mode_kept():
    assert torch.cuda.get_sync_debug_mode() == 0
    torch.ones(2, device="cuda").sum().item()


def test_after():
    assert torch.cuda.get_sync_debug_mode() == 0
    torch.cuda.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="called a synchronizing CUDA operation"):
        torch.ones(2, device="cuda").sum().item()
    torch.cuda.set_sync_debug_mode("default")
'''


def test_the_users_sync_debug_mode_is_left_as_it_was(pytester: pytest.Pytester,
                                                     run: RunPytest) -> None:
    pytester.makepyfile(test_mode=USERS_OWN_MODE)
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(passed=2)
    assert '"syncs": 1' in (pytester.path / "report.json").read_text()
