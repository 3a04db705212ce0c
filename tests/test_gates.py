"""Gates a project adds from its conftest (``pytest_nocompile_kinds``): each kind gets the built-in
kinds' marker, option, ini key and column, counts in the processes a test starts, and leaves the
kind table when its run ends."""

from __future__ import annotations

import pytest

from nocompile_testing import RunPytest
from pytest_nocompile.vocabulary.kinds import KINDS

# A gate on a torch counter of its own: no source needed, every increment counts.
WIDGET_GATE = '''
from pytest_nocompile import BudgetKind

WIDGETS = BudgetKind(
    key="widgets", marker="max_widgets", events="health", noun="widget",
    counts="widgets the library made", column="widgets", short="widgets",
    signals=("widget_library.widgets",))


def pytest_nocompile_kinds():
    return (WIDGETS,)
'''

MAKES_WIDGETS = '''
import subprocess
import sys

import pytest
import torch._dynamo
from torch._dynamo.utils import counters


@pytest.mark.max_widgets(1)
def test_makes_two():
    counters["widget_library"]["widgets"] += 1
    counters.clear()  # user code clears torch's counters: nothing counted is lost
    counters["widget_library"]["widgets"] += 1


def test_a_child_makes_three():
    subprocess.run([sys.executable, "-c", "import torch._dynamo\\n"
                    "from torch._dynamo.utils import counters\\n"
                    "counters['widget_library']['widgets'] += 3"], check=True)
'''


def test_a_conftest_gates_kind_fails_a_test_over_its_marker_ini_key_and_in_children(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(WIDGET_GATE)
    pytester.makepyfile(test_widgets=MAKES_WIDGETS)
    pytester.makeini("[pytest]\nmax_widgets = 2\n")
    result = run("-p", "no:randomly")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*test_makes_two*",
        "2 widgets > max_widgets(1) (marker on the test)",
        "*test_a_child_makes_three*",
        "pid * (python -c *): 3 widgets > max_widgets(2) (from nocompile ini key max_widgets in "
        "tox.ini)",
    ])
    result.stdout.fnmatch_lines(["compiles  recompiles  graph breaks  widgets  budget  *"])


def test_a_gates_option_is_in_the_help_with_the_built_in_ones(pytester: pytest.Pytester,
                                                              run: RunPytest) -> None:
    pytester.makeconftest(WIDGET_GATE)
    result = run("--help")
    result.stdout.fnmatch_lines(["*--max-widgets=N*nocompile: default widget budget for every*"])


def test_a_runs_gate_kinds_leave_the_table_when_the_run_ends(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(WIDGET_GATE)
    config = pytester.parseconfigure("-p", "nocompile")
    assert KINDS[-1].key == "widgets"
    config._ensure_unconfigure()
    assert "widgets" not in [kind.key for kind in KINDS]


def test_a_gate_whose_marker_is_taken_is_a_usage_error(pytester: pytest.Pytester,
                                                       run: RunPytest) -> None:
    pytester.makeconftest(WIDGET_GATE.replace('marker="max_widgets"', 'marker="max_kernels"'))
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: [pytest-nocompile] a budget kind with the key 'widgets' or the "
        "marker 'max_kernels' is already there"])
