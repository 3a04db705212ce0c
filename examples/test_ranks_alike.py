"""Scenario 5 under pytest-nocompile: the ranks a test spawns compile alike, and one that does not
is named.

Spawned ranks compile with the eager backend here (dynamo's guards and
recompiles are the same as with inductor): each rank is a fresh interpreter.
"""

from pathlib import Path

import pytest

from examples.ranks_alike import spawn_ranks

BACKEND = "eager"


@pytest.mark.spawns_ranks
@pytest.mark.same_across_ranks
def test_ranks_on_even_batches_compile_alike(tmp_path: Path) -> None:
    spawn_ranks(str(tmp_path), backend=BACKEND)


@pytest.mark.xfail(strict=True,
                   reason="rank 1's last batch is uneven: it alone recompiles, and "
                          "same_across_ranks names it")
@pytest.mark.same_across_ranks
def test_an_uneven_batch_on_one_rank_fails(tmp_path: Path) -> None:
    spawn_ranks(str(tmp_path), uneven_rank=1, backend=BACKEND)
