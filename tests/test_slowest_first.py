"""The suite's own order: its slowest tests first, dealt to xdist's workers
(tests/slowest_first.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from slowest_first import SLOWEST_FIRST, first_batch_size

ROOT = Path(__file__).parent.parent


def test_every_slowest_test_listed_is_a_test_of_the_suite() -> None:
    """A renamed or removed test leaves the list: the test replacing it would run where it falls."""
    missing = []
    for name in SLOWEST_FIRST:
        path, _, function = name.partition("::")
        source = ROOT / path
        if not source.is_file() or f"\ndef {function}(" not in source.read_text():
            missing.append(name)
    assert missing == []


def test_each_worker_starts_with_its_share_of_the_slowest(request: pytest.FixtureRequest) -> None:
    """The slowest, slowest first, dealt in turn: worker w's first batch starts with every w-th."""
    names = [item.nodeid.partition("[")[0] for item in request.session.items]
    # A parametrized test once for each of its items.
    expected = [name for listed in SLOWEST_FIRST for name in names if name == listed]
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    batch = first_batch_size(len(names), workers)
    for worker in range(workers):
        share = expected[worker::workers][:batch]
        assert names[worker * batch:worker * batch + len(share)] == share, worker
