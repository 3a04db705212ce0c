"""The seam: the core calls the features only through the hooks of pytest_nocompile/hookspecs.py.

No core module imports a feature (imports inside functions and under
TYPE_CHECKING count); each feature is a folder of at most 800 lines whose
``__init__.py`` says what it adds and which hooks it implements; and a
user's conftest.py implements the same hooks the built-in features do.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from nocompile_testing import RunPytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_nocompile"
FEATURES = PACKAGE / "features"
# The modules that register and re-export the features, as pytest registers its default plugins;
# and the command line's, which runs a feature's command (`python -m pytest_nocompile merge`).
REGISTRARS = {PACKAGE / "plugin.py", PACKAGE / "__init__.py", PACKAGE / "__main__.py",
              PACKAGE / "assertions.py",  # the block assertions' first import path, re-exported
              # the path the start-up files an environment installed name (the child start-up's)
              PACKAGE / "processes" / "hook.py"}
FEATURE_LINES = 800


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it, as an absolute dotted name."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    else:
        package = package.removesuffix(".__init__")
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = node.module or ""
            absolute = (f"{base}.{module}" if module else base) if node.level else module
            names.add(absolute)
            names.update(f"{absolute}.{alias.name}" for alias in node.names)
    return names


def _core_modules() -> list[Path]:
    return [path for path in PACKAGE.rglob("*.py") if FEATURES not in path.parents]


def test_no_core_module_imports_a_feature() -> None:
    importers = {}
    for path in _core_modules():
        if path in REGISTRARS:
            continue
        features = sorted(name for name in _imported_modules(path)
                          if name.startswith("pytest_nocompile.features"))
        if features:
            importers[str(path.relative_to(PACKAGE))] = features
    assert importers == {}


def test_each_feature_is_a_folder_of_at_most_800_lines_that_says_its_hooks() -> None:
    folders = sorted(path for path in FEATURES.iterdir()
                     if path.is_dir() and path.name != "__pycache__")
    assert folders, "no feature folder"
    from pytest_nocompile.features import BUILT_IN, COMMANDS, ENTRY_POINTS

    assert sorted((*BUILT_IN, *COMMANDS, *ENTRY_POINTS)) == [folder.name for folder in folders]
    for folder in folders:
        lines = sum(len(path.read_text().splitlines()) for path in folder.rglob("*.py"))
        assert lines <= FEATURE_LINES, f"{folder.name}: {lines} lines"
        docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert docstring is not None and "\nHooks: " in f"\n{docstring}", folder.name


def test_the_hooks_are_declared_once_and_registered_by_the_plugin(
        pytester: pytest.Pytester) -> None:
    from pytest_nocompile import hookspecs

    declared = sorted(name for name in vars(hookspecs) if name.startswith("pytest_nocompile_"))
    assert declared == sorted([
        "pytest_nocompile_process_reports",
        "pytest_nocompile_watch_opened", "pytest_nocompile_record_attached",
        "pytest_nocompile_call_started", "pytest_nocompile_call_ended",
        "pytest_nocompile_watch_closed", "pytest_nocompile_test_ended",
        "pytest_nocompile_test_reported", "pytest_nocompile_terminal_summary",
        "pytest_nocompile_run_finished", "pytest_nocompile_regression_check",
        "pytest_nocompile_read_contract", "pytest_nocompile_shown_in_failure",
        "pytest_nocompile_marker_keywords",
        "pytest_nocompile_kinds", "pytest_nocompile_watch_every_test",
    ])
    config = pytester.parseconfigure("-p", "nocompile")
    for name in declared:
        assert getattr(config.hook, name).spec is not None, name
    registered = {name for name, _ in config.pluginmanager.list_name_plugin()}
    from pytest_nocompile.features import BUILT_IN, COMMANDS

    assert {f"nocompile-{name}" for name in BUILT_IN} <= registered
    modules = {getattr(plugin, "__name__", None) for plugin in config.pluginmanager.get_plugins()}
    assert not modules & {f"pytest_nocompile.features.{command}" for command in COMMANDS}


# A conftest of the user's: each hook it implements is called, in the order of a test's life.
LIFECYCLE_CONFTEST = """
    calls = []

    def pytest_nocompile_watch_opened(watch):
        calls.append(("opened", watch.item.name, watch.record.phase))

    def pytest_nocompile_record_attached(watch):
        calls.append(("attached", watch.item.name, watch.record.phase))

    def pytest_nocompile_call_started(watch):
        calls.append(("call started", watch.item.name))

    def pytest_nocompile_call_ended(watch, error):
        calls.append(("call ended", watch.item.name, type(error).__name__ if error else None))

    def pytest_nocompile_watch_closed(watch):
        calls.append(("closed", watch.item.name))

    def pytest_nocompile_test_ended(watch, failed):
        calls.append(("ended", watch.item.name, failed))

    def pytest_nocompile_test_reported(watch, report, result):
        calls.append(("reported", report.when,
                      None if result is None else result.counts["recompiles"]))

    def pytest_nocompile_terminal_summary(terminalreporter):
        for call in calls:
            terminalreporter.write_line("hooked: " + repr(call))
"""

LIFECYCLE_TESTS = """
    import torch
    import torch._dynamo


    def test_recompiles():
        f = torch.compile(lambda x, n: x * n, backend="eager")
        f(torch.ones(2), 2)
        f(torch.ones(2), 3)


    def test_raises():
        raise KeyError("x")
"""


def test_a_conftest_implements_the_hooks_and_they_come_in_the_order_of_a_test(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(textwrap.dedent(LIFECYCLE_CONFTEST))
    pytester.makepyfile(test_life=textwrap.dedent(LIFECYCLE_TESTS))
    result = run("-p", "no:randomly", "--nocompile-report")
    result.assert_outcomes(passed=1, failed=1)
    hooked = [line for line in result.stdout.lines if line.startswith("hooked: ")]
    assert hooked == [f"hooked: {call!r}" for call in [
        ("opened", "test_recompiles", "setup"), ("attached", "test_recompiles", "setup"),
        ("reported", "setup", None), ("call started", "test_recompiles"),
        ("call ended", "test_recompiles", None), ("reported", "call", None),
        ("closed", "test_recompiles"), ("ended", "test_recompiles", False),
        ("reported", "teardown", 1),
        ("opened", "test_raises", "setup"), ("attached", "test_raises", "setup"),
        ("reported", "setup", None), ("call started", "test_raises"),
        ("call ended", "test_raises", "KeyError"), ("reported", "call", None),
        ("closed", "test_raises"), ("ended", "test_raises", False), ("reported", "teardown", 0),
    ]]


def test_a_field_a_hook_returns_is_set_on_the_result_and_reaches_the_json_report(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(textwrap.dedent("""
        def pytest_nocompile_test_reported(watch, report, result):
            if result is not None:
                return {"trace": "kept/" + watch.item.name}
    """))
    pytester.makepyfile(test_field="def test_a():\n    pass\n")
    result = run("-p", "no:randomly", "--max-recompiles=0", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1)
    import json

    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert [(entry["nodeid"], entry["trace"]) for entry in tests] == [
        ("test_field.py::test_a", "kept/test_a")]


def test_the_example_of_docs_extending_runs_as_written(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    from nocompile_testing import DOCS

    blocks = re.findall(r"```python\n(.*?)```", (DOCS / "extending.md").read_text(), re.S)
    conftest, test = (block for block in blocks
                      if block.startswith(("# conftest.py", "# test_breaks.py")))
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_breaks=test)
    result = run("--nocompile-report")
    result.assert_outcomes(passed=1)
    (line,) = [line for line in result.stdout.lines if line.startswith("graph break: ")]
    assert line.startswith("graph break: test_breaks.py::test_prints_inside_compiled_code: "
                           "line 7: "), line
    assert len(line) > len("graph break: test_breaks.py::test_prints_inside_compiled_code: "
                           "line 7: ")
