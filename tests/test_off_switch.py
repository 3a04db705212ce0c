"""The off switch: ``-p no:nocompile`` keeps the markers, options and fixtures, checking nothing."""

from __future__ import annotations

import pytest

from nocompile_testing import OUTER_RUN_VARIABLES, RECOMPILE_ONCE, RunPytest

# A suite written for the plugin, whose budgets this code breaks.
SUITE = RECOMPILE_ONCE + '''
@pytest.mark.max_recompiles(0)
@pytest.mark.dynamic_dims(x=0)
def test_step():
    recompile_once()

@pytest.mark.max_graph_breaks(0)
class TestLoop:
    def test_blocks(self, nocompile_assert_max_recompiles, nocompile_assert_min_compiles,
                    nocompile_recompiles):
        with nocompile_assert_max_recompiles(0, exact=True) as block:
            recompile_once()
        assert list(block) == list(nocompile_recompiles) == []
        assert nocompile_recompiles.in_phase("call") == block.in_phase("call") == []
        assert block.graph_breaks == [] and block.counted is None

        @nocompile_assert_min_compiles(5)
        def step():
            recompile_once()
            return "ran"

        assert step() == "ran"

def test_warm_start(nocompile_warm_start):
    cold, warm = nocompile_warm_start(recompile_once)
    assert warm.cache_misses == 0
'''
# pytest's unknown-option warning is an error with -W error: the ini key must be known too.
INI = "[pytest]\nmax_compiles = 0\naddopts = --max-recompiles=0 --nocompile-report\n"
OFF_NOTE = "nocompile: off (-p no:nocompile): its markers, options and fixtures check nothing"
WARM_START_SKIP = ("SKIPPED [[]1] test_suite.py:*: nocompile_warm_start: pytest-nocompile is off "
                   "(-p no:nocompile), nothing is measured")


def expect_off(result: pytest.RunResult) -> None:
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines([WARM_START_SKIP])
    assert result.stdout.lines.count(OFF_NOTE) == 1
    assert "nocompile: pytest-nocompile" not in result.stdout.str()  # the plugin's header
    # No summary table, whose title is "nocompile".
    assert [line for line in result.stdout.lines if line.strip("= ") == "nocompile"] == []


def test_no_nocompile_keeps_markers_options_and_fixtures_doing_nothing(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # As a user runs it: the plugin autoloaded, switched off on the command line.
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    for name in OUTER_RUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(INI)
    off = ("-p", "no:nocompile", "-p", "no:randomly", "-p", "no:cacheprovider")
    expect_off(pytester.runpytest_subprocess(*off, "--strict-markers", "-W", "error", "-rs"))


def test_no_nocompile_after_p_nocompile_in_addopts(pytester: pytest.Pytester,
                                                   run: RunPytest) -> None:
    # Autoloading off, the plugin named in addopts (the `run` fixture's -p nocompile), then off.
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(INI)
    expect_off(run("-p", "no:nocompile", "--strict-markers", "-W", "error", "-rs"))
