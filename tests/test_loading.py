"""Loading: entry point, autoload off, disabling, header, and life without a usable torch."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

import pytest

from nocompile_testing import RunPytest
from pytest_nocompile.judge.installed_versions import distribution_version

SIMPLE = '''
import pytest

@pytest.mark.max_recompiles(0)
def test_budgeted():
    pass

def test_plain():
    pass
'''


def test_loads_with_autoload_disabled(pytester: pytest.Pytester, run: RunPytest,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(SIMPLE)
    result = run("--strict-markers")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["nocompile: pytest-nocompile 0.1.0, torch *"])


@pytest.mark.parametrize("name", ["torch", "pytest", "pluggy", "pytest-nocompile"])
def test_header_versions_are_the_installed_distributions(name: str) -> None:
    # Read from METADATA's Version field alone, not importlib.metadata's full parse.
    assert distribution_version(name) == importlib.metadata.version(name)
    assert distribution_version("no-such-distribution-nocompile") == "not installed"

@pytest.mark.parametrize("torch_version, said", [
    ("2.16.0", ["nocompile: torch 2.16.0 is newer than the newest pytest-nocompile was tested on "
                "(2.15): run `python -m pytest_nocompile doctor` to see what it can read"]),
    ("3.0.0a0+git1234", ["nocompile: torch 3.0.0a0+git1234 is newer than the newest "
                         "pytest-nocompile was tested on (2.15): run `python -m pytest_nocompile "
                         "doctor` to see what it can read"]),
    ("2.15.0", []),
    ("2.4.1", []),
])
def test_a_torch_newer_than_the_newest_tested_says_so_once_in_the_header(
    pytester: pytest.Pytester, run: RunPytest, torch_version: str, said: list[str]
) -> None:
    pytester.makeconftest(f"""
        import pytest_nocompile.judge.installed_versions as versions

        installed = versions.distribution_version

        def pytest_configure():
            versions.distribution_version = (
                lambda name: {torch_version!r} if name == "torch" else installed(name))

        def pytest_unconfigure():
            versions.distribution_version = installed
    """)
    pytester.makepyfile(SIMPLE)
    result = run()
    result.assert_outcomes(passed=2)
    lines = result.stdout.lines
    header = lines.index(f"nocompile: pytest-nocompile 0.1.0, torch {torch_version}")
    assert [line for line in lines if "newer than the newest" in line] == said
    assert lines[header + 1:header + 1 + len(said)] == said


def test_without_torch_every_test_runs_and_the_report_counts_nothing_compiled(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    # torch not installed (its import blocked here: None in sys.modules): nothing can compile,
    # so no budget is broken.
    pytester.makeconftest('import sys\nsys.modules["torch"] = None\n')
    pytester.makepyfile(SIMPLE)
    json_report = ("--max-recompiles=0", "--nocompile-json=report.json")
    for options in ((), ("--nocompile-report",), json_report):
        result = run("--strict-markers", *options)
        result.assert_outcomes(passed=2)
        assert "cannot watch" not in result.stdout.str()
    result.stdout.fnmatch_lines(["no test compiled in its call phase (2 watched)"])
    tests = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert [(test["recompiles"], test["verdict"]) for test in tests] == [(0, "within budget")] * 2


def test_with_a_too_old_torch_budgeted_tests_error_and_a_reports_tests_run(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    reason = "torch 2.3.1 is too old; pytest-nocompile needs torch>=2.4"
    pytester.makeconftest('import torch\ntorch.__version__ = "2.3.1"\n')
    pytester.makepyfile(SIMPLE)
    result = run("--strict-markers", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [f"pytest-nocompile cannot watch test_*.py::test_budgeted: {reason}"])
    assert "INTERNALERROR" not in result.stdout.str()
    # The report's own test is not judged: it runs, and its counts are no counts (the plugin
    # could not watch it).
    (_, plain) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert (plain["outcome"], plain["recompiles"]) == ("passed", None)
    assert plain["not_measured"]["recompiles"] == reason


def test_plugin_import_does_not_import_torch(pytester: pytest.Pytester) -> None:
    result = pytester.run(
        sys.executable, "-c",
        "import sys, pytest_nocompile, pytest_nocompile.plugin; print(sorted(m for m in "
        "sys.modules if m.split('.')[0] == 'torch'))",
    )
    assert result.stdout.lines == ["[]"]


def test_public_names_load_on_first_use() -> None:
    import pytest_nocompile

    for name in pytest_nocompile.__all__:
        value = getattr(pytest_nocompile, name)
        if name == "KINDS":  # a constant: the budget kinds' table itself
            from pytest_nocompile.judge import budget

            assert value is budget.KINDS
        else:
            assert name == "__version__" or value.__module__.startswith("pytest_nocompile."), name
    assert set(pytest_nocompile.__all__) <= set(dir(pytest_nocompile))
    with pytest.raises(AttributeError,
                       match="module 'pytest_nocompile' has no attribute 'RecompileEvents'"):
        pytest_nocompile.RecompileEvents  # noqa: B018


def test_type_checkers_see_every_public_name_where_it_loads_from() -> None:
    """The package's imports under TYPE_CHECKING (what mypy and IDEs read) re-export each public
    name, as ``A as A``, from the module that its first use loads it from."""
    import ast

    import pytest_nocompile

    tree = ast.parse(Path(pytest_nocompile.__file__).read_text())
    block = next(node for node in tree.body
                 if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING")
    seen = {alias.name: "." * node.level + (node.module or "") for node in block.body
            if isinstance(node, ast.ImportFrom) and node.level for alias in node.names
            if alias.asname == alias.name}
    assert seen == pytest_nocompile._PUBLIC_MODULES


NEVER_COMPILES = '''
import sys
import pytest

def test_passes():
    pass

def test_fails():
    assert False

@pytest.mark.xfail(strict=True)
def test_xfails():
    assert False

@pytest.mark.max_recompiles(None)
def test_opted_out():
    pass

def test_skips():
    pytest.skip("not today")
'''

RECORD_LOADED_MODULES = '''
import sys

def pytest_unconfigure(config):
    with open("modules.txt", "w") as out:
        out.write(" ".join(sorted(name for name in sys.modules
                                  if name.split(".")[0] in ("torch", "pytest_nocompile"))))
'''


@pytest.mark.fresh_interpreter(
    "lists every torch module the inner run imported: a forked run finds torch imported")
def test_a_run_that_never_compiles_loads_no_parsing_or_reporting_module(
    pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a suite of tests that never compile pays for: the modules below, no torch,
    # and one shared entry per budget, which must still carry each test's own outcome.
    # A temp folder of its own: a dead run's folder left by another run would load the tree removal
    # to clean it up.
    (pytester.path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(pytester.path / "tmp"))
    pytester.makeconftest(RECORD_LOADED_MODULES)
    pytester.makepyfile(test_never=NEVER_COMPILES)
    result = run("-p", "no:randomly", "--max-recompiles=0", "--nocompile-json=report.json")
    result.assert_outcomes(passed=2, failed=1, skipped=1, xfailed=1)
    loaded = (pytester.path / "modules.txt").read_text().split()
    assert loaded == ["pytest_nocompile"] + [f"pytest_nocompile.{name}" for name in (
        "exceptions", "features", "features.baselines", "features.block_assertions",
        "features.caches", "features.caches.cache_bypass_reasons", "features.caches.kind",
        "features.child_events", "features.child_startup", "features.child_startup.hook",
        "features.children", "features.children.children", "features.children.owner",
        "features.children.run_folders", "features.compile_cost",
        "features.compile_cost.compile_metrics", "features.compile_cost.instruction_counter",
        "features.compile_cost.kinds", "features.contracts", "features.cudagraphs",
        "features.cudagraphs.cudagraph_logs", "features.cudagraphs.kinds", "features.kernels",
        "features.kernels.kernel_counts", "features.kernels.kind", "features.marker_names",
        "features.marker_names.marker_typos", "features.off_switch", "features.reports",
        "features.reports.json_report",
        "features.strict", "features.sync_relay", "features.syncs", "features.syncs.cpp_syncs",
        "features.syncs.kind", "features.syncs.sync_warnings", "features.traces",
        "features.traces.captured_logs", "features.version_budgets", "hookspecs", "judge",
        "judge.budget",
        "judge.installed_versions", "judge.result", "judge.torch_support", "observe",
        "observe.arrival", "observe.capture", "observe.dynamo_state", "observe.log_taps",
        "observe.metrics_entries", "observe.patches", "observe.sources",
        "observe.sources.counter_increments",
        "observe.sources.swallowed_errors", "observe.user_code", "observe.wanted_signals",
        "output", "output.summary", "plugin", "record",
        "record.record", "vocabulary",
        "vocabulary.kinds", "vocabulary.measures", "watching",
        "watching.fixtures", "watching.planning", "watching.registration",
        "watching.results", "watching.run_notices", "watching.run_watching", "watching.settings",
        "watching.watch", "watching.watcher")]
    tests = {entry["nodeid"].split("::")[1]: entry
             for entry in json.loads((pytester.path / "report.json").read_text())["tests"]}
    assert {name: (entry["outcome"], entry["compiles"], entry["max_recompiles"], entry["verdict"])
            for name, entry in tests.items()} == {
        "test_passes": ("passed", 0, 0, "within budget"),
        "test_fails": ("failed", 0, 0, "within budget"),
        "test_xfails": ("xfailed", 0, 0, "within budget"),
        "test_opted_out": ("passed", 0, None, "no budget"),
        "test_skips": ("skipped", 0, 0, "within budget"),
    }
    result.stdout.fnmatch_lines(["no test compiled in its call phase (5 watched)"])


RECORD_PER_TEST_HOOKS = '''
PER_TEST_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_logstart", "pytest_runtest_setup",
                  "pytest_runtest_call", "pytest_runtest_teardown", "pytest_runtest_makereport",
                  "pytest_runtest_logreport", "pytest_runtest_logfinish")

def pytest_sessionfinish(session):
    hooks = session.config.pluginmanager.hook
    registered = sorted(f"{impl.plugin_name} {name}" for name in PER_TEST_HOOKS
                        for impl in getattr(hooks, name).get_hookimpls()
                        if "nocompile" in impl.plugin_name)
    with open("hooks.txt", "w") as out:
        out.write("\\n".join(registered))
'''

PLAIN_TESTS = """
def test_one():
    pass

def test_two():
    pass
"""


# One path for every watched test, whatever torch has done so far: the same hooks in every run that
# watches.
WATCHER_HOOKS = [f"nocompile-watcher pytest_runtest_{hook}"
                 for hook in ("call", "logreport", "setup", "teardown")]


@pytest.mark.parametrize(("marker", "options", "expected"), [
    ("", (), []),
    ("import torch\n", (), []),
    ("", ("--max-recompiles=0",), WATCHER_HOOKS),
    ("", ("--nocompile-report",), WATCHER_HOOKS),
    ("", ("--max-recompiles=0", "--nocompile-json=report.json"), WATCHER_HOOKS),
    ("import torch\n", ("--max-recompiles=0",), WATCHER_HOOKS),
    ("import torch\n", ("--max-recompiles=0", "--nocompile-no-subprocess"), WATCHER_HOOKS),
    ("import torch._dynamo\n", ("--max-recompiles=0",), WATCHER_HOOKS),
    ("import pytest\npytestmark = pytest.mark.max_graph_breaks(None)\n", (), WATCHER_HOOKS),
], ids=["nothing to watch", "torch, nothing to watch", "run-wide budget, no torch",
        "report, no torch", "JSON report, no torch", "run-wide budget, torch without dynamo",
        "the same, children not watched", "run-wide budget, dynamo", "a marker"])
def test_per_test_hooks_are_registered_only_where_a_test_can_be_watched(
    pytester: pytest.Pytester, run: RunPytest, marker: str,
    options: tuple[str, ...], expected: list[str]
) -> None:
    # Every hook costs every test its call: a run pays only for the hooks it can use.
    pytester.makeconftest(RECORD_PER_TEST_HOOKS)
    pytester.makepyfile(test_plain=marker + PLAIN_TESTS)
    run("-p", "no:randomly", *options).assert_outcomes(passed=2)
    assert (pytester.path / "hooks.txt").read_text().splitlines() == sorted(expected)
