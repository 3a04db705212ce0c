"""The plugin never imports dynamo; it starts capture when dynamo arrives, and counts the test it
arrives in exactly."""

from __future__ import annotations

import json

import pytest

from nocompile_testing import RECOMPILE_ONCE, RunPytest, expect_lines

# RECOMPILE_ONCE imports torch at module level, never torch._dynamo: dynamo
# arrives with the first torch.compile call, in whichever test makes it.
DYNAMO_CHECK_CONFTEST = '''
import sys

def pytest_sessionfinish(session):
    with open("dynamo.txt", "w") as out:
        out.write(str("torch._dynamo" in sys.modules))
'''


def _entries(pytester: pytest.Pytester) -> dict[str, tuple[str, int, int]]:
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    return {
        entry["nodeid"].split("::")[1]: (entry["outcome"], entry["compiles"], entry["recompiles"])
        for entry in tests}


@pytest.mark.parametrize("marker", ["", "@pytest.mark.max_recompiles(0)"],
                         ids=["run-wide budget (idle until dynamo)", "marker"])
def test_the_test_dynamo_arrives_in_is_counted_exactly(pytester: pytest.Pytester, run: RunPytest,
                                                       marker: str) -> None:
    pytester.makepyfile(test_arrival=RECOMPILE_ONCE + f'''
def test_plain():
    pass

{marker}
def test_dynamo_arrives_and_recompiles():
    assert "torch._dynamo" not in __import__("sys").modules
    recompile_once()

def test_after_it():
    recompile_once()
''')
    result = run("-p", "no:randomly", "--max-recompiles=0", "--nocompile-json=report.json",
                 "-W", "error")
    result.assert_outcomes(passed=1, failed=2)
    source = "marker on the test" if marker else "from --max-recompiles"
    expect_lines(result, ["*_ test_dynamo_arrives_and_recompiles _*",
                          f"1 recompile > max_recompiles(0) ({source})"])
    # As a failure in the call phase, like every budget failure (the late judge rebuilds the call
    # report).
    result.stdout.fnmatch_lines(
        ["FAILED test_arrival.py::test_dynamo_arrives_and_recompiles - Failed: 1 recomp*"])
    assert _entries(pytester) == {
        "test_plain": ("passed", 0, 0),
        "test_dynamo_arrives_and_recompiles": ("failed", 2, 1),
        "test_after_it": ("failed", 2, 1),
    }


def test_arrival_in_setup_counts_the_call_only(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_arrival=RECOMPILE_ONCE + '''
@pytest.fixture
def compiled():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)   # dynamo arrives in setup, and compiles there
    return f

def test_recompiles_in_call(compiled):
    compiled(torch.ones(2), 3)
''')
    result = run("--max-recompiles=0", "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    expect_lines(result, ["*_ test_recompiles_in_call _*",
                          "1 recompile > max_recompiles(0) (from --max-recompiles)"])
    assert _entries(pytester) == {"test_recompiles_in_call": ("failed", 1, 1)}


def test_arrival_in_teardown_is_not_counted(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_arrival=RECOMPILE_ONCE + '''
@pytest.fixture
def recompiles_at_teardown():
    yield
    recompile_once()

def test_passes(recompiles_at_teardown):
    pass
''')
    result = run("--max-recompiles=0", "--nocompile-json=report.json", "-rP")
    result.assert_outcomes(passed=1)
    assert _entries(pytester) == {"test_passes": ("passed", 0, 0)}
    result.stdout.fnmatch_lines(["*recompiles (teardown, not counted)*"])


def test_arrival_mid_call_in_strict_mode_raises_at_the_recompiling_call(pytester: pytest.Pytester,
                                                                        run: RunPytest) -> None:
    pytester.makepyfile(test_arrival=RECOMPILE_ONCE + '''
def test_recompiles():
    recompile_once()

@pytest.mark.max_recompiles(None)  # not strict: a recompile budget's call is
def test_config_restored():
    assert torch._dynamo.config.error_on_recompile is False
''')
    result = run("-p", "no:randomly", "--max-recompiles=0", "--nocompile-strict")
    result.assert_outcomes(passed=1, failed=1)
    # The traceback ends at the user's recompiling call: torch's frames below it are left out.
    result.stdout.fnmatch_lines(["    def recompile_once():", "*", ">       f(torch.ones(2), 3)",
                                 "E       *RecompileError: Recompiling function scale in *", "*",
                                 "test_arrival.py:9: RecompileError"])


def test_a_suite_that_never_compiles_never_imports_dynamo(pytester: pytest.Pytester,
                                                          run: RunPytest) -> None:
    pytester.makeconftest(DYNAMO_CHECK_CONFTEST)
    pytester.makepyfile(test_torch_only='''
import pytest, torch

@pytest.mark.max_recompiles(0)
def test_marked():
    assert torch.ones(1).item() == 1

def test_plain():
    assert torch.ones(1).item() == 1
''')
    run("--max-recompiles=0", "--nocompile-json=report.json").assert_outcomes(passed=2)
    assert (pytester.path / "dynamo.txt").read_text() == "False"
    assert _entries(pytester) == {"test_marked": ("passed", 0, 0), "test_plain": ("passed", 0, 0)}
