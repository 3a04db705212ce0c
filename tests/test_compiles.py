"""max_compiles(N): graphs compiled in the call phase, checked against dynamo's CompileCounter
backend."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree

import pytest

from nocompile_testing import (
    PRINT_BREAK_REASON,
    RunPytest,
    expect_lines,
    line_regex,
    with_health_counts,
)

# Each test compiles with a CompileCounter backend (the counter PyTorch's own
# tests assert on) and writes its frame_count, the number of graphs the backend
# was given, for the outer test to compare with the plugin's count.
COUNTED = '''
import pytest, torch
from torch._dynamo.testing import CompileCounter

def scale(x, n):
    return x * n

def broken(x):
    x = x + 1
    print("side effect")
    return x * 2

def counted(name):
    counter = CompileCounter()
    yield counter
    with open(f"{name}.count", "w") as out:
        out.write(str(counter.frame_count))

@pytest.fixture
def counter(request):
    yield from counted(request.node.name)

@pytest.mark.max_compiles(1)
def test_one_compile(counter):
    f = torch.compile(scale, backend=counter)
    for _ in range(3):
        f(torch.ones(2), 2)

@pytest.mark.max_compiles(1)
def test_a_recompile_is_a_compile(counter):
    f = torch.compile(scale, backend=counter)
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)

@pytest.mark.max_compiles(1)
def test_each_graph_break_piece_is_a_graph(counter):
    torch.compile(broken, backend=counter)(torch.ones(2))

@pytest.mark.max_compiles(2)
def test_two_functions(counter):
    torch.compile(scale, backend=counter)(torch.ones(2), 2)
    torch.compile(lambda x: x - 1, backend=counter)(torch.ones(2))

@pytest.mark.max_compiles(1)
def test_fullgraph(counter):
    torch.compile(scale, backend=counter, fullgraph=True)(torch.ones(2), 2)

@pytest.fixture
def warmed():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)
    return f

@pytest.mark.max_compiles(0)
def test_setup_compiles_are_not_counted(warmed, counter):
    warmed(torch.ones(2), 3)
'''


def test_compile_budget_counts_what_a_compile_counter_counts(pytester: pytest.Pytester,
                                                             run: RunPytest) -> None:
    pytester.makepyfile(test_counted=COUNTED)
    result = run("-p", "no:logging", "--nocompile-json=report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=4, failed=2)
    expect_lines(result, [
        "*_ test_a_recompile_is_a_compile _*",
        "2 compiles > max_compiles(1) (marker on the test)",
        "[1/1] recompiled scale (test_counted.py:4)",
        "    guard failed: 0/0: n == 2",
        "      guarded at: test_counted.py:5 in scale: return x * n",
        "      usual fix: n is a Python int that changes*",
        "    triggered by: test_counted.py:* in test_a_recompile_is_a_compile: f(torch.ones(2), 3)",
    ])
    expect_lines(result, [
        "*_ test_each_graph_break_piece_is_a_graph _*",
        "2 compiles > max_compiles(1) (marker on the test)",
        "[1/1] graph break at test_counted.py:9",
        f"    reason: {PRINT_BREAK_REASON}",
    ])
    tests = {entry["nodeid"].split("::")[1]: entry
             for entry in json.loads((pytester.path / "report.json").read_text())["tests"]}
    independent = {path.stem: int(path.read_text()) for path in pytester.path.glob("*.count")}
    assert {name: entry["compiles"] for name, entry in tests.items()} == independent == {
        "test_one_compile": 1,
        "test_a_recompile_is_a_compile": 2,
        "test_each_graph_break_piece_is_a_graph": 2,
        "test_two_functions": 2,
        "test_fullgraph": 1,
        "test_setup_compiles_are_not_counted": 0,
    }
    over = tests["test_a_recompile_is_a_compile"]
    assert ((over["max_compiles"], over["verdict"], over["over_budget"])
            == (1, "over budget", ["compiles"]))
    assert re.fullmatch(line_regex("scale recompiled: 0/0: n == 2"), over["cause"])
    assert re.fullmatch(line_regex(f"graph break: {PRINT_BREAK_REASON}"),
                        tests["test_each_graph_break_piece_is_a_graph"]["cause"])
    cases = {case.get("name"): case
             for case in ElementTree.parse(pytester.path / "junit.xml").iter("testcase")}
    properties = {prop.get("name"): prop.get("value")
                  for prop in cases["test_two_functions"].iter("property")}
    assert properties == with_health_counts({"compiles": 2, "recompiles": 0, "graph_breaks": 0},
                                            "nocompile_", as_text=True)
    result.stdout.fnmatch_lines([
        "*= nocompile =*",
        "compiles  recompiles  graph breaks  budget       verdict        test",
        "       2           1             0  compiles<=1  over budget    "
        "test_counted.py::test_a_recompile_is_a_compile",
        "       2           0             1  compiles<=1  over budget    "
        "test_counted.py::test_each_graph_break_piece_is_a_graph",
    ], consecutive=True)


RUN_WIDE = '''
import pytest, torch

def test_default():
    f = torch.compile(lambda x: x + 1, backend="eager")
    f(torch.ones(2))
    f(torch.ones(3))  # a recompile: 2 graphs

@pytest.mark.max_compiles(None)
def test_opted_out():
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
'''


@pytest.mark.parametrize("ini, cli, failed",
                         [(None, "1", 1), ("1", None, 1), ("0", "2", 0), (None, None, 0)],
                         ids=["cli", "ini", "cli-over-ini", "none"])
def test_compile_budget_from_cli_and_ini(pytester: pytest.Pytester, run: RunPytest, ini: str | None,
                                         cli: str | None, failed: int) -> None:
    source = ("from --max-compiles" if cli is not None
              else "from nocompile ini key max_compiles in tox.ini")
    pytester.makepyfile(test_run_wide=RUN_WIDE)
    if ini is not None:
        pytester.makeini(f"[pytest]\nmax_compiles = {ini}\n")
    result = run("-p", "no:logging", *([f"--max-compiles={cli}"] if cli is not None else []))
    result.assert_outcomes(passed=2 - failed, failed=failed)
    if failed:
        expect_lines(result, ["*_ test_default _*", f"2 compiles > max_compiles(1) ({source})"])


def test_compile_budget_usage_errors_and_help(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile('''
        import pytest

        @pytest.mark.max_compiles(-1)
        def test_negative():
            pass

        @pytest.mark.max_compiles(0, exact=True)
        def test_keyword():
            pass
    ''')
    result = run("--strict-markers")
    result.assert_outcomes(errors=2)
    accepted = "use @pytest.mark.max_compiles(N), N an int >= 0 or None"
    result.stdout.fnmatch_lines([
        "invalid max_compiles marker on "
        "test_compile_budget_usage_errors_and_help.py::test_negative: "
        f"max_compiles(-1): expected an int >= 0, got -1; {accepted}",
    ])
    result.stdout.fnmatch_lines(
        [f"*max_compiles(0, exact=True): unknown keyword exact; {accepted}"])
    result = run("--max-compiles=-2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*: error: argument --max-compiles: expected an int >= 0, got -2"])
    result = run("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.max_compiles(N): fail the test when its call phase "
                                 "has more than N graphs compiled*"])
    result = run("--help")
    result.stdout.fnmatch_lines(
        ["  --max-compiles=N      nocompile: default compile budget for every test (ini:",
         "*max_compiles); a marker overrides it"])


BLOCKS = '''
import pytest, torch

def scale(x, n):
    return x * n

def test_exact_within(nocompile_assert_max_compiles):
    f = torch.compile(scale, backend="eager")
    with nocompile_assert_max_compiles(1, exact=True) as block:
        f(torch.ones(2), 2)
        f(torch.ones(2), 2)
    assert block.counted == 1 and list(block) == []
    with nocompile_assert_max_compiles(0):
        f(torch.ones(2), 2)
    with nocompile_assert_max_compiles(1) as block:
        f(torch.ones(2), 3)
    assert block.counted == 1 and [event.function for event in block] == ["scale"]

def test_exact_fails(nocompile_assert_max_compiles):
    f = torch.compile(scale, backend="eager")
    with nocompile_assert_max_compiles(2, exact=True):
        f(torch.ones(2), 2)

def test_over(nocompile_assert_max_compiles):
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    with nocompile_assert_max_compiles(0):
        f(torch.ones(2), 3)

def test_graph_break_block(nocompile_assert_max_graph_breaks):
    def chatty(x):
        print("side effect")
        return x + 1
    with nocompile_assert_max_graph_breaks(0) as block:
        torch.compile(chatty, backend="eager")(torch.ones(2))
'''


def test_block_assertions_for_compiles_and_graph_breaks(pytester: pytest.Pytester,
                                                        run: RunPytest) -> None:
    pytester.makepyfile(test_blocks=BLOCKS)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1, failed=3)
    expect_lines(result, ["E       pytest_nocompile.exceptions.CompileBudgetExceeded: "
                          "1 compile != nocompile_assert_max_compiles(2, exact=True)"])
    expect_lines(result, [
        "E       pytest_nocompile.exceptions.CompileBudgetExceeded: "
        "1 compile > nocompile_assert_max_compiles(0)",
        "E       [1/1] recompiled scale (test_blocks.py:3)",
        "E           guard failed: 0/0: n == 2",
    ])
    expect_lines(result, [
        "E       pytest_nocompile.exceptions.GraphBreakBudgetExceeded: 1 graph break > "
        "nocompile_assert_max_graph_breaks(0)",
        "E       [1/1] graph break at test_blocks.py:*",
        f"E           reason: {PRINT_BREAK_REASON}",
    ])


def test_a_baseline_without_compile_counts_still_compares(pytester: pytest.Pytester,
                                                          run: RunPytest) -> None:
    # Baselines written before max_compiles existed hold recompiles and graph breaks only.
    (pytester.path / "baseline.json").write_text(json.dumps({
        "format": "pytest-nocompile-baseline/1",
        "tests": {"test_old.py::test_a": {"recompiles": 0, "graph_breaks": 0}},
    }))
    pytester.makepyfile(test_old=RUN_WIDE.replace("test_default", "test_a"))
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json")
    result.assert_outcomes(passed=2)
    expect_lines(result, [
        "*= nocompile baseline baseline.json =*",
        "counts only (a baseline of format 1, for any torch): reasons are not compared; "
        "save it again to gate on reasons",
        "test_old.py::test_a: recompiles rose 0 -> 1",
        "    recompiled <lambda> (test_old.py:4): guard failed: "
        "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
        "        triggered by: test_old.py:6 in test_a: f(torch.ones(3))  # a recompile: 2 graphs",
        "        usual fix: compile with dynamic=True, or call torch._dynamo.mark_dynamic(x, 0) "
        "before the first call",
        "new test (not in baseline): test_old.py::test_opted_out",
    ])
    assert result.outlines[-1] == ("nocompile: run FAILED (exit code 1) though every test passed: "
                                   "1 count rose against the baseline baseline.json, in 1 test "
                                   "(listed above)")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
