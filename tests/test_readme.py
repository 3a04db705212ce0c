"""The README's Python examples run, as users would paste them, under the plugin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


def readme_fixture_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (fixtures_block,) = [block for block in blocks if "def test_steady_state" in block]
    return "import torch\n" + fixtures_block


def test_readme_fixture_examples_pass(pytester: pytest.Pytester, run) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_readme_example=readme_fixture_example())
    run("--strict-markers", "-W", "error").assert_outcomes(passed=2)


def test_readme_fixture_examples_can_fail(pytester: pytest.Pytester, run) -> None:  # type: ignore[no-untyped-def]
    # Same code with a recompile inside the zero-budget block: it must fail.
    broken = readme_fixture_example().replace("            f(torch.ones(2))\n", "            f(torch.ones(2, 2))\n")
    pytester.makepyfile(test_readme_example=broken)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E   *RecompileBudgetExceeded: 1 recompile > nocompile_assert_max_recompiles(0)"])
