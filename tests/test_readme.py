"""The README's Python examples run, as users would paste them, under the plugin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nocompile_testing import RunPytest, expect_lines

README = Path(__file__).parent.parent / "README.md"


def readme_fixture_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (fixtures_block,) = [block for block in blocks if "def test_steady_state" in block]
    return "import torch\n" + fixtures_block


def test_readme_fixture_examples_pass(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_readme_example=readme_fixture_example())
    run("--strict-markers", "-W", "error").assert_outcomes(passed=2)


def test_readme_fixture_examples_can_fail(pytester: pytest.Pytester, run: RunPytest) -> None:
    # Same code with a recompile inside the zero-budget block: it must fail.
    broken = readme_fixture_example().replace("            f(torch.ones(2))\n", "            f(torch.ones(2, 2))\n")
    pytester.makepyfile(test_readme_example=broken)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E   *RecompileBudgetExceeded: 1 recompile > nocompile_assert_max_recompiles(0)"])


def readme_unittest_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (block,) = [block for block in blocks if "unittest.TestCase" in block]
    return block


def test_readme_unittest_example_passes_with_and_without_the_plugin(
    pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_readme_unittest=readme_unittest_example())
    # Not -W error: torch 2.11's reset() (the example's setUp) imports a module that warns.
    run("-W", "error::pytest.PytestWarning").assert_outcomes(passed=2)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_readme_unittest_example_can_fail(pytester: pytest.Pytester, run: RunPytest) -> None:
    # A new shape each time round the loop: both the block and the decorated method must fail.
    broken = re.sub(r"^( {12}| {16})self\.f\(torch\.ones\(2\)\)$", r"\1self.f(torch.ones(2 + _))",
                    readme_unittest_example(), flags=re.M)  # the loop bodies only
    pytester.makepyfile(test_readme_unittest=broken)
    result = run("-p", "no:logging")
    result.assert_outcomes(failed=2)
    assert result.stdout.str().count("RecompileBudgetExceeded: ") >= 2


def readme_reference_table() -> str:
    text = README.read_text()
    start = text.index("\n## Reference\n")
    return text[start:text.index("\n## ", start + 1)]


def test_reference_table_names_every_option_ini_key_marker_and_fixture(pytester: pytest.Pytester, run: RunPytest) -> None:
    help_text = run("--help").stdout.str()
    group = help_text.split("torch.compile recompile budgets (pytest-nocompile):\n")[1].split("\n\n")[0]
    options = set(re.findall(r"^\s+(--[\w-]+)", group, flags=re.M))
    ini_keys = {name for name, description in re.findall(r"^  (\w+) \(\w+\):\n((?:^ {20,}.*\n)+)", help_text, flags=re.M)
                if "[pytest-nocompile]" in description}
    markers = set(re.findall(r"^@pytest\.mark\.((?:max|nocompile)_\w+)\(", run("--markers").stdout.str(), flags=re.M))
    fixtures = set(re.findall(r"^(nocompile_\w+)", run("--fixtures").stdout.str(), flags=re.M))
    assert len(options) == 13 and len(ini_keys) == 8 and len(markers) == 3 and len(fixtures) == 4
    table = readme_reference_table()
    missing = sorted(name for name in options | ini_keys | markers | fixtures if f"`{name}" not in table)
    assert missing == []


def readme_ranks_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (block,) = [block for block in blocks if "mp.spawn" in block]
    return block


def test_readme_ranks_example_passes_and_fails_naming_rank_1(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_ranks=readme_ranks_example())
    run("--strict-markers").assert_outcomes(passed=1)
    pytester.makepyfile(test_ranks=readme_ranks_example().replace('"store"), 1)', '"store"), 2)'))
    result = run()
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "rank 1 (pid *, multiprocessing SpawnProcess-*): 1 recompile > max_recompiles(0) (marker on the test)",
        "[1/1] recompiled <lambda> (test_ranks.py:8)",
        "    guard failed: 0/0: n == 1",
    ])
    result.stdout.fnmatch_lines(["    triggered by: test_ranks.py:10 in worker: f(torch.ones(2), n if rank == 1 else 1)  # rank 1*"])
