"""``@pytest.mark.same_across_ranks``: the ranks a test spawns (gloo, CPU) must compile alike; the
one that differs is named.

Spawning ranks takes seconds: the scenarios share one inner run, outcomes asserted per test.
"""

from __future__ import annotations

import re

import pytest

from nocompile_testing import TORCH, RunPytest, docs_snippet, expect_lines

RANKS = '''
import pytest
import torch.multiprocessing as mp

def scale(x, n):
    return x * n

def worker(rank, store, odd_rank, odd_compiles_nothing):
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    if not (rank == odd_rank and odd_compiles_nothing):
        f = torch.compile(scale, backend="eager")
        f(torch.ones(2), 1)
        if rank == odd_rank:
            f(torch.ones(2), 2)  # a Python int changed on this rank only: it recompiles
    dist.barrier()
    dist.destroy_process_group()

def spawn(tmp_path, odd_rank=-1, odd_compiles_nothing=False):
    mp.spawn(worker, args=(str(tmp_path / "store"), odd_rank, odd_compiles_nothing), nprocs=2)

@pytest.mark.same_across_ranks
def test_ranks_alike(tmp_path):
    spawn(tmp_path)

@pytest.mark.same_across_ranks
def test_rank_1_recompiles(tmp_path):
    spawn(tmp_path, odd_rank=1)

@pytest.mark.same_across_ranks
def test_rank_0_compiles_nothing(tmp_path):
    spawn(tmp_path, odd_rank=0, odd_compiles_nothing=True)
'''


def test_ranks_alike_pass_and_the_rank_that_differs_is_named(run: RunPytest,
                                                             pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ranks=RANKS)
    result = run("-rA")
    outcomes = {line.split()[1].partition("::")[2]: line.split()[0] for line in result.stdout.lines
                if line.startswith(("PASSED ", "FAILED "))}
    assert outcomes == {"test_ranks_alike": "PASSED", "test_rank_1_recompiles": "FAILED",
                        "test_rank_0_compiles_nothing": "FAILED"}, \
        result.stdout.str()
    expected = [
        r"same_across_ranks broken \(marker on the test\): rank 1 \(pid \d+, multiprocessing "
        r"SpawnProcess-\d+\) compiled unlike rank 0 \(pid \d+, multiprocessing SpawnProcess-\d+\)",
        re.escape("    scale (test_ranks.py:4): 2 compiles (1 recompile) in rank 1, 1 compile (0 "
                  "recompiles) in rank 0"),
        r"        first recompile \(rank 1\): guard failed: (0/0: )?(n|L\['n'\]) == 1",
        re.escape("        triggered by: test_ranks.py:14 in worker: f(torch.ones(2), 2)  # a "
                  "Python int changed on this rank only: it recompiles"),
        # rank 0 wrote nothing: the world size rank 1 reported says it was there
        re.escape("same_across_ranks broken (marker on the test): rank 0 compiled nothing in the "
                  "call, while rank 1 compiled"),
    ]
    result.stdout.re_match_lines(expected[:4], consecutive=True)
    result.stdout.re_match_lines(expected[4:])


@pytest.mark.skipif(TORCH < (2, 11),
                    reason="measured on torch 2.11 and 2.13 (docs/child-processes.md's note)")
def test_ddp_compiled_whole_compiles_no_graph_and_the_rank_that_recompiled_is_named(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    # torch.compile(DDP(model)): dynamo skips DDP's forward and compiles its frames to no graph;
    # rank 1's short batch recompiles one of them. Both ranks ran dynamo: the difference is that
    # recompile, not a rank that compiled nothing.
    pytester.makepyfile(test_ddp_ranks=docs_snippet("child-processes.md", "test_ddp_ranks.py"))
    result = run()
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "same_across_ranks broken (marker on the test): rank 1 (pid *, multiprocessing "
        "SpawnProcess-*) compiled unlike rank 0 (pid *, multiprocessing SpawnProcess-*)",
        "    DistributedDataParallel.forward (compiled at test_ddp_ranks.py:10): 2 compiles "
        "without a graph (1 recompile) in rank 1, 1 compile without a graph (0 "
        "recompiles) in rank 0",
        "        first recompile (rank 1): guard failed: 0/0: tensor 'args[0]' size mismatch at "
        "index 0. expected 8, actual 5",
        "        triggered by: test_ddp_ranks.py:12 in worker: model(torch.ones(batch, "
        "4)).sum().backward()",
    ])
    assert "compiled nothing" not in result.stdout.str()
    # The floor catches the missing graph on its own: no graph in either rank.
    expect_lines(result, ["0 compiles < min_compiles(1) (marker on the test)", "why:"])
