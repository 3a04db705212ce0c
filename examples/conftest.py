"""The examples' tests run the scenarios small, on CPU: what CI can afford."""

import pytest

from examples.workload import Workload, small_workload


@pytest.fixture
def workload() -> Workload:
    """What the scenarios train here; ``tests/acceptance`` overrides it with the tutorials' size on
    CUDA."""
    return small_workload("cpu")
