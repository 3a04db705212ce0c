"""``sweep_sizes``: a compiled function over sizes and the edge sizes; a recompile not of dynamo's
own 0/1 rule fails."""

from __future__ import annotations

import re

import pytest

from nocompile_testing import TORCH, RunPytest

# Each test compiles a function of its own (its own code object): tests that nothing watches share
# dynamo's caches.
SWEEPS = '''
import pytest, torch
from pytest_nocompile import sweep_sizes

def test_catches_a_branch_on_size_2():
    def branchy(x):
        if x.shape[0] == 2:
            return x + 1
        return x * 2
    sweep_sizes(torch.compile(branchy, backend="eager", dynamic=True),
                lambda n: (torch.ones(n),), [4, 8, 16])

def steps(swept):
    return [(step.size, len(step.recompiles), step.by_dynamo) for step in swept]

# 0 and 1 each recompile by dynamo's own rule: listed by the sweep, never failed.
DYNAMIC = [(4, 0, True), (8, 0, True), (16, 0, True), (0, 1, True), (1, 1, True), (2, 0, True),
           (4, 0, True)]

def test_passes_a_truly_dynamic_function():
    def plain(x, y):
        return x * 2 + y.sum()
    assert steps(sweep_sizes(torch.compile(plain, backend="eager", dynamic=True),
                             lambda n: (torch.ones(n), torch.ones(3)), [4, 8, 16])) == DYNAMIC

@pytest.mark.max_recompiles(2)
def test_counts_the_same_in_a_watched_test(nocompile_recompiles):
    def plain(x, y):
        return x * 2 + y.sum()
    assert steps(sweep_sizes(torch.compile(plain, backend="eager", dynamic=True),
                             lambda n: (torch.ones(n), torch.ones(3)), [4, 8, 16])) == DYNAMIC
    assert len(nocompile_recompiles) == 2  # the test's record heard them too

def test_fails_a_dim_compiled_static():
    def doubled(x):
        return x * 2
    sweep_sizes(torch.compile(doubled, backend="eager"), lambda n: (torch.ones(n),),
                [4, 8], edges=())

class TinyLM(torch.nn.Module):
    """A decoder LM's shape: token ids of shape (batch, seq) in, logits out."""
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.head = torch.nn.Linear(16, 64)

    def forward(self, idx):
        return self.head(self.embed(idx))

def tokens(n):
    return (torch.randint(1, 64, (3, n)),)

def test_passes_an_lm_over_sequence_lengths():
    # At seq 0 dynamo's own stride guard (idx.stride()[0] == idx.size()[1]) fails: a contiguous
    # (3, 0) tensor has strides (1, 1). That is its 0/1 specialisation, not the model's.
    model = torch.compile(TinyLM().eval(), backend="eager", dynamic=True)
    swept = sweep_sizes(model, tokens, [8, 16, 24])
    assert [step.size for step in swept if step.recompiles] == [0, 1]
    assert all(step.by_dynamo for step in swept)

class PairedLM(TinyLM):
    def forward(self, idx):
        if idx.shape[1] == 2:
            idx = idx.flip(1)
        return self.head(self.embed(idx))

def test_names_the_module_and_points_at_the_edges():
    model = torch.compile(PairedLM().eval(), backend="eager", dynamic=True)
    sweep_sizes(model, tokens, [8, 16, 24])

def test_bad_arguments():
    f = torch.compile(lambda x: x, backend="eager")
    with pytest.raises(ValueError,
                       match=r"sweep_sizes: sizes=\\[\\] must be one or more ints >= 0; use "
                             r"sweep_sizes\\(fn, make_args, sizes\\)"):
        sweep_sizes(f, lambda n: (torch.ones(n),), [])
    with pytest.raises(ValueError, match=r"sizes=\\[4, -1\\] must be"):
        sweep_sizes(f, lambda n: (torch.ones(n),), [4, -1])
    with pytest.raises(TypeError,
                       match=r"make_args\\(4\\) returned Tensor, not a tuple of fn's arguments "
                             r"\\(return \\(x,\\) for one\\)"):
        sweep_sizes(f, lambda n: torch.ones(n), [4])
'''


def literal(*lines: str) -> list[str]:
    """Regexes for output lines, '*' the only wildcard."""
    return [".*".join(map(re.escape, line.split("*"))) + r"\Z" for line in lines]


def test_sweep_sizes(run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sweep=SWEEPS)
    result = run("-rA")
    outcomes = {line.split()[1].partition("::")[2]: line.split()[0] for line in result.stdout.lines
                if line.startswith(("PASSED ", "FAILED "))}
    assert outcomes == {
        "test_catches_a_branch_on_size_2": "FAILED",
        "test_passes_a_truly_dynamic_function": "PASSED",
        "test_counts_the_same_in_a_watched_test": "PASSED",
        "test_fails_a_dim_compiled_static": "FAILED",
        "test_passes_an_lm_over_sequence_lengths": "PASSED",
        "test_names_the_module_and_points_at_the_edges": "FAILED",
        "test_bad_arguments": "PASSED",
    }, result.stdout.str()
    result.stdout.re_match_lines(literal(
        "E       AssertionError: sweep_sizes(branchy): 1 size recompiled, not by dynamo's own 0/1 "
        "specialisation: 2 (calls in order: sizes 4, 8, 16, 0, 1, 2, 4)",
        "E           size 2: branchy recompiled: x dim 0 at size 2: your code specialised it "
        "(guard failed: *x*.size()[0]*2*)",
        *(["E               at: test_sweep.py:6 in branchy: if x.shape[0] == 2:"]
          if TORCH >= (2, 6) else []),
        "E               triggered by: test_sweep.py:9 in test_catches_a_branch_on_size_2: "
        "sweep_sizes(*",
        "E               usual fix: your code branches on the size of x dim 0: *",
        "E           size 2 is one of the edges the sweep adds (edges=(0, 1, 2)), not of sizes: "
        "where branchy is never called at size 2, leave it out with edges=(0, 1)",
        "E       dynamo's own 0/1 specialisation, listed, not failed:",
        "E           size 0: branchy recompiled: x dim 0 at size 0 or 1: dynamo's own 0/1 "
        "specialisation (guard failed: *)",
        "E           size 1: branchy recompiled: x dim 0 at size 1: dynamo's own 0/1 "
        "specialisation (guard failed: *)",
    ), consecutive=True)
    result.stdout.re_match_lines(literal(
        "E       AssertionError: sweep_sizes(doubled): 1 size recompiled, not by dynamo's own 0/1 "
        "specialisation: 8 (calls in order: sizes 4, 8, 4)",
        "E           size 8: doubled recompiled: x dim 0 at size 8: it was compiled static (guard "
        "failed: *expected 4, actual 8)",
    ), consecutive=True)
    # A module is named as every failure names it, not by torch.compile's wrapper
    # (OptimizedModule); a size that only the edges add says how to leave it out.
    result.stdout.re_match_lines(literal(
        "E       AssertionError: sweep_sizes(PairedLM.forward): 1 size recompiled, not by dynamo's "
        "own 0/1 specialisation: 2 (calls in order: sizes 8, 16, 24, 0, 1, 2, 8)",
        "E           size 2: PairedLM.forward recompiled: idx dim 1 at size 2: your code "
        "specialised it (guard failed: *idx*.size()[1]*2*)",
    ), consecutive=True)
    result.stdout.re_match_lines(literal(
        "E           size 2 is one of the edges the sweep adds (edges=(0, 1, 2)), not of sizes: "
        "where PairedLM.forward is never called at size 2, leave it out with edges=(0, 1)",
        "E       dynamo's own 0/1 specialisation, listed, not failed:",
        "E           size 0: PairedLM.forward recompiled: idx dim 1 at size 0*: dynamo's own 0/1 "
        "specialisation *",
        "E           size 1: PairedLM.forward recompiled: idx dim 1 at size 1: dynamo's own 0/1 "
        "specialisation *",
    ), consecutive=True)


def test_a_compiled_module_is_named_by_its_class_and_method() -> None:
    pytest.importorskip("torch")
    import torch

    from pytest_nocompile.observe.compiled_modules import compiled_name

    class TinyLM(torch.nn.Module):
        def forward(self, idx: object) -> object:
            return idx

    model = TinyLM()
    optimized = torch.compile(model, backend="eager")  # an OptimizedModule
    assert compiled_name(optimized) == "TinyLM.forward"
    assert compiled_name(torch.compile(model.forward, backend="eager")) == "TinyLM.forward"
    assert compiled_name(model) == "TinyLM.forward"  # model.compile() compiles it in place
    assert compiled_name(torch.compile(lambda x: x, backend="eager")) is None  # named by __name__
