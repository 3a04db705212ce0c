"""The seeds' scenarios on CUDA, gated on why: a reason-level baseline saved, then compared, on the
GPU machine.

Two runs of ``test_cuda_scenarios.py`` in fresh pytest processes: the first
saves a baseline, the second compares with it. The baseline must hold the
float-LR recompile as a Python float guard on ``param_groups[0]['lr']`` (the
tutorial's reason to hold the LR in a tensor) and no recompile reason for the
tensor-LR, compiled-Adam and foreach_map scenarios (their graph breaks, the
optimizer's own, are reasons too, and stay); the compare must find no change.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nocompile_testing import TORCH

pytestmark = pytest.mark.cuda

SCENARIOS = Path(__file__).with_name("test_cuda_scenarios.py")
FLOAT_LR = "python float self.param_groups[0]['lr']"


def _pytest(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "nocompile", "-p", "no:cacheprovider", "-p",
               "no:randomly", "-q", str(SCENARIOS), *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=1200,
                          cwd=SCENARIOS.parents[2])


def test_the_seeds_scenarios_save_their_reasons_and_compare_clean(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    saved = _pytest(f"--nocompile-save={baseline}")
    assert saved.returncode == 0, saved.stdout[-3000:]
    entries = json.loads(baseline.read_text())["torch"][f"{TORCH[0]}.{TORCH[1]}"]
    by_name = {nodeid.rpartition("::")[2]: entry for nodeid, entry in entries.items()}
    float_lr = by_name["test_float_lr_fails_a_zero_recompile_budget"]
    assert float_lr["recompiles"] >= 1
    assert any(reason.startswith("recompile ") and reason.endswith(f": {FLOAT_LR}")
               for reason in float_lr["reasons"]), float_lr["reasons"]
    for clean in ("test_tensor_lr_follows_the_schedule_without_recompiling",
                  "test_compiled_adam_steps_without_recompiling_and_matches_eager",
                  "test_foreach_map_adam_matches_torch_adam_without_recompiling"):
        assert not [reason for reason in by_name[clean]["reasons"]
                    if reason.startswith("recompile ")], (clean, by_name[clean]["reasons"])
    compared = _pytest(f"--nocompile-compare={baseline}")
    assert compared.returncode == 0, compared.stdout[-3000:]
    assert "no change against the baseline" in compared.stdout
    print(json.dumps({name: entry["reasons"] for name, entry in by_name.items()}, indent=1))
