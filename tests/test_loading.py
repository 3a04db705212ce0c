"""Loading: entry point, autoload off, disabling, header, and life without a usable torch."""

from __future__ import annotations

import sys

import pytest

SIMPLE = '''
import pytest

@pytest.mark.max_recompiles(0)
def test_budgeted():
    pass

def test_plain():
    pass
'''


def test_loads_with_autoload_disabled(pytester: pytest.Pytester, run, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(SIMPLE)
    result = run("--strict-markers")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["nocompile: pytest-nocompile 0.1.0, torch *"])


def test_disabled_with_no_nocompile(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(SIMPLE)
    result = pytester.runpytest_subprocess("-p", "no:nocompile", "--strict-markers")
    result.stdout.fnmatch_lines(["*'max_recompiles' not found in `markers` configuration option*"])
    assert "nocompile: pytest-nocompile" not in result.stdout.str()


@pytest.mark.parametrize(
    "poison, reason",
    [
        ('sys.modules["torch"] = None', "torch cannot be imported (ModuleNotFoundError: import of torch halted; None in sys.modules)"),
        ('import torch; torch.__version__ = "2.3.1"', "torch 2.3.1 is too old; pytest-nocompile needs torch>=2.11"),
    ],
    ids=["missing", "too-old"],
)
def test_without_usable_torch_budgeted_tests_error_and_the_rest_runs(pytester: pytest.Pytester, run, poison: str, reason: str) -> None:  # type: ignore[no-untyped-def]
    pytester.makeconftest(f"import sys\n{poison}\n")
    pytester.makepyfile(SIMPLE)
    result = run("--strict-markers")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"pytest-nocompile cannot watch test_*.py::test_budgeted: {reason}"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_plugin_import_does_not_import_torch(pytester: pytest.Pytester) -> None:
    result = pytester.run(
        sys.executable, "-c",
        "import sys, pytest_nocompile, pytest_nocompile.plugin; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))",
    )
    assert result.stdout.lines == ["[]"]
