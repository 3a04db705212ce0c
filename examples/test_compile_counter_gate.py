"""The gate of ``compile_counter_gate.py`` in a user's run: a library's own counter gets a marker,
option, block assertion, table column and JSON count like the plugin's own kinds, and a test over
its budget fails naming the user's lines that counted."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

USER_TESTS = """
import pytest
from examples.compile_counter_gate import COUNTER

@pytest.mark.max_library_graphs(1)
def test_two_graphs():
    COUNTER.num_graphs_seen += 1
    COUNTER.num_graphs_seen += 1

def test_one_graph_in_a_block(nocompile_assert_max_library_graphs):
    with nocompile_assert_max_library_graphs(1):
        COUNTER.num_graphs_seen += 1
"""


@pytest.fixture
def user_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the gate's module, as a user's package
    pytester.makepyfile(test_user=USER_TESTS)
    return pytester


def test_a_test_over_the_gates_budget_fails_naming_the_lines_that_counted(
        user_run: pytest.Pytester) -> None:
    result = user_run.runpytest_subprocess(
        "-p", "nocompile", "-p", "examples.compile_counter_gate", "-p", "no:randomly",
        "-p", "no:cacheprovider", "--nocompile-json=report.json", "--nocompile-table=all")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "2 library graphs > max_library_graphs(1) (marker on the test)",
        "+1 at test_user.py:6 in test_two_graphs: COUNTER.num_graphs_seen += 1",
        "+1 at test_user.py:7 in test_two_graphs: COUNTER.num_graphs_seen += 1",
        "compiles  recompiles  graph breaks  lib graphs  budget         verdict      test",
        "       0           0             0           2  lib graphs<=1  over budget  "
        "test_user.py::test_two_graphs",
    ])
    counts = {entry["nodeid"]: (entry["library_graphs"], entry["max_library_graphs"])
              for entry in json.loads((user_run.path / "report.json").read_text())["tests"]}
    assert counts == {"test_user.py::test_two_graphs": (2, 1),
                      "test_user.py::test_one_graph_in_a_block": (1, None)}


def test_the_gates_option_budgets_every_test(user_run: pytest.Pytester) -> None:
    result = user_run.runpytest_subprocess(
        "-p", "nocompile", "-p", "examples.compile_counter_gate", "-p", "no:randomly",
        "-p", "no:cacheprovider", "--max-library-graphs=0")
    result.assert_outcomes(failed=2)  # the marker's 1 wins for test_two_graphs: 2 > 1
    result.stdout.fnmatch_lines(
        ["1 library graph > max_library_graphs(0) (from --max-library-graphs)"])
