"""assert_max_recompiles (and its siblings) without fixtures: TestCase methods, helpers, decorators,
no pytest at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from nocompile_testing import RECOMPILE_ONCE, RunPytest

UNITTEST_CASES = '''
import unittest
import torch
from pytest_nocompile import RecompileBudgetExceeded, assert_max_recompiles

def scale(x, n):
    return x * n

class CompiledScale(unittest.TestCase):
    def setUp(self):
        # unwatched tests share dynamo's caches: the plugin resets only the tests it watches
        torch._dynamo.reset()
        self.f = torch.compile(scale, backend="eager")
        self.f(torch.ones(2), 2)

    def test_block_within(self):
        with assert_max_recompiles(1) as block:
            self.f(torch.ones(2), 3)
        self.assertEqual(len(block), 1)
        self.assertIn("n", block[0].guards[0])

    def test_block_over(self):
        with assert_max_recompiles(0):
            self.f(torch.ones(2), 3)

    def test_block_raises_the_budget_error(self):
        with self.assertRaises(RecompileBudgetExceeded):
            with assert_max_recompiles(0):
                self.f(torch.ones(2), 3)

    @assert_max_recompiles(0)
    def test_decorated_over(self):
        self.f(torch.ones(2), 3)

    @assert_max_recompiles(1, exact=True)
    def test_decorated_exact(self):
        self.f(torch.ones(2), 3)
'''


EXCEEDED = ("E       pytest_nocompile.exceptions.RecompileBudgetExceeded: 1 recompile > "
            "assert_max_recompiles(0)")


def _check_failures(result: pytest.RunResult, *names: str) -> None:
    """Each named test failed, and the failures are the budget's, with the function that
    recompiled."""
    lines = result.stdout.lines
    for name in names:
        result.stdout.fnmatch_lines([f"FAILED *::{name}*"])
    assert lines.count(EXCEEDED) == len(names), result.stdout.str()
    assert sum(line.startswith("E       [1/1] recompiled scale (") for line in lines) == len(names)


def _check_unittest_outcomes(result: pytest.RunResult) -> None:
    result.assert_outcomes(passed=3, failed=2)
    _check_failures(result, "CompiledScale::test_block_over", "CompiledScale::test_decorated_over")


def test_testcase_methods(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_unittest_user=UNITTEST_CASES)
    _check_unittest_outcomes(run("-rf"))


def test_testcase_methods_under_xdist(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_unittest_user=UNITTEST_CASES)
    result = run("-p", "xdist", "-n", "2", "-rf")
    _check_unittest_outcomes(result)
    result.stdout.fnmatch_lines(["*2 workers*"])


def test_testcase_methods_without_the_plugin_loaded(pytester: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_unittest_user=UNITTEST_CASES)
    _check_unittest_outcomes(pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf"))


def test_in_a_helper_and_inside_a_watched_test(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_helper_user=RECOMPILE_ONCE + '''
from pytest_nocompile import assert_max_compiles, assert_max_recompiles

def compile_then_recompile_within(allowed):
    with assert_max_recompiles(allowed):
        recompile_once()

def test_helper_unwatched():
    compile_then_recompile_within(0)

@pytest.mark.max_recompiles(1)
def test_helper_in_a_watched_test(nocompile_recompiles):
    compile_then_recompile_within(1)
    assert len(nocompile_recompiles) == 1  # the block counted from the test's own record

@pytest.mark.max_recompiles(5)
def test_block_over_in_a_watched_test():
    compile_then_recompile_within(0)

def test_compiles_block():
    with assert_max_compiles(2, exact=True):
        recompile_once()
''')
    result = run("-rf", "--nocompile-report")
    result.assert_outcomes(passed=2, failed=2)
    _check_failures(result, "test_helper_unwatched", "test_block_over_in_a_watched_test")


def test_usage_errors_name_the_accepted_form(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_usage_user='''
from pytest_nocompile import assert_max_recompiles

def test_negative():
    with assert_max_recompiles(-1):
        pass
''')
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert_max_recompiles(-1)*assert_max_recompiles(N) or "
                                 "assert_max_recompiles(N, exact=True)*"])


def test_outside_pytest_captures_on_its_own_and_restores_logging(
        tmp_path: pytest.TempPathFactory) -> None:
    script = textwrap.dedent('''
        import logging
        import torch
        import torch._logging._internal as torch_logging
        from pytest_nocompile import RecompileBudgetExceeded, assert_max_recompiles

        def scale(x, n):
            return x * n

        logger = logging.getLogger("torch._dynamo.guards.__recompiles")
        before = (logger.level, logger.propagate, logger.filters[:],
                  sorted(torch_logging.log_state.artifact_names))
        f = torch.compile(scale, backend="eager")
        with assert_max_recompiles(1) as block:
            f(torch.ones(2), 2)
            f(torch.ones(2), 3)
        print("within:", len(block))
        try:
            with assert_max_recompiles(0):
                with assert_max_recompiles(5) as inner:
                    # a new dtype (n may be dynamic by now)
                    f(torch.ones(2, dtype=torch.float64), 3)
        except RecompileBudgetExceeded as error:
            print("over:", str(error).splitlines()[0], "inner:", len(inner))
        after = (logger.level, logger.propagate, logger.filters[:],
                 sorted(torch_logging.log_state.artifact_names))
        print("restored:", before == after)
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "within: 1",
        "over: 1 recompile > assert_max_recompiles(0) inner: 1",
        "restored: True",
    ]
    assert result.stderr == ""


SEQUENCE_LENGTHS = '''
import pytest
import torch
from pytest_nocompile import assert_max_recompiles


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=64, width=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, idx):
        return self.head(self.embed(idx))


def batch(seq):
    return torch.randint(0, 64, (3, seq))  # (batch, seq)


def test_fixture_block(nocompile_assert_max_recompiles):
    model = torch.compile(TinyLM(), backend="eager", dynamic=False)
    model(batch(8))
    model(batch(8).float().long()[:2])  # a smaller batch, before the block
    with nocompile_assert_max_recompiles(0):
        model(batch(12))  # a new sequence length


@pytest.mark.max_recompiles(5)  # watched: the block counts from the test's record
def test_plain_block():
    model = torch.compile(TinyLM(), backend="eager", dynamic=False)
    model(batch(8))
    with assert_max_recompiles(0):
        model(batch(12))  # a new sequence length
'''


def test_a_failed_blocks_recompiles_are_printed_once(pytester: pytest.Pytester,
                                                     run: RunPytest) -> None:
    pytester.makepyfile(test_lengths=SEQUENCE_LENGTHS)
    result = run("-p", "no:randomly", "-p", "no:logging")
    result.assert_outcomes(failed=2)
    # Up to pytest's short summary: with CI set, it repeats each failure's whole message.
    output = result.stdout.str().partition("short test summary info")[0]
    new_length = [line for line in output.splitlines() if "# a new sequence length" in line]
    # Each block's recompile once, in its failure: its source line, and its "triggered by" line.
    assert len([line for line in new_length if "triggered by:" in line]) == 2, output
    # The two blocks', and the one before a block (in the section).
    assert output.count("recompiled TinyLM.forward") == 3, output
    result.stdout.fnmatch_lines([
        "*- nocompile recompiles -*",
        "1 recompile recorded besides those in the failure above",
        "(call) ?1/1? recompiled TinyLM.forward*",  # (fnmatch reads [] as a set)
    ])
