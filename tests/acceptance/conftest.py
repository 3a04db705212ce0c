"""CUDA acceptance: the examples' scenarios at the tutorials' size.

Every test here is marked ``cuda`` and skipped, with the reason, where torch sees
no GPU. The scenarios are imported from ``examples``, which lives at the
repository root: that root is put on ``sys.path`` here, so this directory runs
the same way whatever pytest's rootdir, import mode or working directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

REPOSITORY_ROOT = str(Path(__file__).resolve().parents[2])
if REPOSITORY_ROOT not in sys.path:
    sys.path.insert(0, REPOSITORY_ROOT)

from examples.workload import Workload, tutorial_workload  # noqa: E402  (needs the path above)

NO_GPU = "needs a CUDA GPU: torch.cuda.is_available() is False"


def pytest_configure(config: pytest.Config) -> None:
    # pyproject.toml registers it too; registering here keeps this directory self-contained.
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU; skipped without one")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_GPU))


@pytest.fixture
def workload() -> Workload:
    """The tutorials' model, 10 x Linear(1024, 1024, bias=False), on the GPU."""
    return tutorial_workload("cuda")
