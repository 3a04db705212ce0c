"""CI gating: graph-break budgets, run-wide budgets and their precedence, reports, baselines, xdist,
strict mode."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ElementTree

import pytest

from nocompile_testing import (
    HAS_COMPILE_IDS,
    PRINT_BREAK_REASON,
    RECOMPILE_ONCE,
    TORCH,
    RunPytest,
    expect_lines,
    guard_matches,
    line_regex,
    with_health_counts,
)

GRAPH_BREAKS = '''
import pytest, torch

def chatty(x):
    x = x + 1
    print("side effect")
    return x * 2

@pytest.mark.max_graph_breaks(0)
def test_graph_break():
    torch.compile(chatty, backend="eager")(torch.ones(2))

@pytest.mark.max_graph_breaks(1)
def test_one_break_allowed():
    torch.compile(chatty, backend="eager")(torch.ones(2))
'''


def test_graph_break_budget_names_reason_and_user_code(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_breaks=GRAPH_BREAKS)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    expect_lines(result, [
        "1 graph break > max_graph_breaks(0) (marker on the test)",
        "[1/1] graph break at test_breaks.py:5",
        f"    reason: {PRINT_BREAK_REASON}",
        "    explanation: Dynamo does not know how to trace builtin operator `print` *",
        "    user code: test_breaks.py:5 in chatty: print(\"side effect\")",
    ])


def test_graph_break_count_agrees_with_dynamo_counters(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile('''
        import json, torch
        from torch._dynamo.utils import counters

        def two_breaks(x):
            x = x + 1
            print("one")
            x = x * 2
            y = x.sum().item()
            return x + y

        def test_breaks(nocompile_recompiles):
            before = sum(counters["graph_break"].values())
            torch.compile(two_breaks, backend="eager")(torch.ones(2))
            with open("dynamo-count.txt", "w") as out:
                out.write(str(sum(counters["graph_break"].values()) - before))
    ''')
    run("-p", "no:logging", "--nocompile-json=report.json").assert_outcomes(passed=1)
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert entry["graph_breaks"] == int((pytester.path / "dynamo-count.txt").read_text()) == 2


PRECEDENCE = RECOMPILE_ONCE + '''
def test_default():
    recompile_once()

@pytest.mark.max_recompiles(1)
def test_marker_allows_one():
    recompile_once()

@pytest.mark.max_recompiles(None)
def test_opted_out():
    recompile_once()

def test_no_compile():
    pass

def test_fullgraph_compiles_count():
    f = torch.compile(scale, backend="eager", fullgraph=True)
    f(torch.ones(2), 2)
'''


@pytest.mark.parametrize(
    "ini, cli, expected, source",
    [
        (None, None, dict(passed=5), None),                        # no run-wide budget
        # ini budget applies to test_default
        ("0", None, dict(passed=4, failed=1), "from nocompile ini key max_recompiles in tox.ini"),
        ("5", "0", dict(passed=4, failed=1), "from --max-recompiles"),  # CLI beats ini
        ("0", "5", dict(passed=5), None),                          # CLI beats ini, the other way
    ],
    ids=["none", "ini", "cli-over-ini", "cli-loosens-ini"],
)
def test_precedence_ini_cli_marker(
        pytester: pytest.Pytester, run: RunPytest, ini, cli, expected, source) -> None:
    pytester.makepyfile(test_precedence=PRECEDENCE)
    if ini is not None:
        pytester.makeini(f"[pytest]\nmax_recompiles = {ini}\n")
    args = ["-p", "no:logging"] + ([f"--max-recompiles={cli}"] if cli is not None else [])
    result = run(*args)
    result.assert_outcomes(**expected)
    if expected.get("failed"):
        expect_lines(result, ["*_ test_default _*", f"1 recompile > max_recompiles(0) ({source})"])


@pytest.mark.parametrize("value", ["-1", "1.5", "many"])
def test_bad_option_values_are_usage_errors(
        pytester: pytest.Pytester, run: RunPytest, value: str) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = run(f"--max-recompiles={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*: error: argument --max-recompiles: expected an int >= 0, got*"])
    assert result.stderr.str().count("--max-recompiles") == 1  # named by argparse, not again
    pytester.makeini(f"[pytest]\nmax_graph_breaks = {value}\n")
    result = run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini key max_graph_breaks: expected an int >= 0, got *"])


def test_summary_table_worst_first_and_one_line_when_nothing_compiled(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_precedence=PRECEDENCE)
    result = run("-p", "no:logging", "--max-recompiles=0")
    result.stdout.fnmatch_lines([
        "*= nocompile =*",
        "compiles  recompiles  graph breaks  budget         verdict        test",
        "       2           1             0  recompiles<=0  over budget    "
        "test_precedence.py::test_default",
        "       2           1             0  recompiles<=1  within budget  "
        "test_precedence.py::test_marker_allows_one",
    ], consecutive=True)
    result.stdout.re_match_lines(
        [line_regex("test_precedence.py::test_default: scale recompiled: 0/0: n == 2")])
    table = result.stdout.str().split("= nocompile =")[1]
    assert "test_no_compile" not in table  # compiled nothing
    assert "test_opted_out" not in table  # max_recompiles(None): not watched at all
    pytester.makepyfile(test_precedence="def test_a(): pass")
    result = run("--nocompile-report")
    result.stdout.fnmatch_lines(["*= nocompile =*",
                                 "no test compiled in its call phase (1 watched)"])


FIXTURE_RECOMPILES = RECOMPILE_ONCE + '''
@pytest.fixture
def warmed():
    recompile_once()

@pytest.mark.max_recompiles(0)
def test_passes(warmed):
    pass
'''


def test_a_passing_test_whose_fixture_recompiled_is_said_so(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_fixture=FIXTURE_RECOMPILES)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*= nocompile =*",
        "no test compiled in its call phase (1 watched)",
        "test_fixture.py::test_passes: 1 recompile in setup, not counted (budgets count the call "
        "phase; a fixture's compiles are outside it)",
    ], consecutive=True)


LONG_TABLE_SUITE = RECOMPILE_ONCE + '''
@pytest.mark.parametrize("case", range(21))
def test_compiles(case):
    torch.compile(scale, backend="eager")(torch.ones(2), 2)

@pytest.mark.max_recompiles(0)
def test_over():
    recompile_once()
'''


def test_a_long_summary_table_lists_only_failures_unless_asked(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_long=LONG_TABLE_SUITE)
    result = run("-p", "no:logging", "--nocompile-report")
    result.assert_outcomes(passed=21, failed=1)
    expect_lines(result, [
        "*= nocompile =*",
        "compiles  recompiles  graph breaks  budget         verdict      test",
        "       2           1             0  recompiles<=0  over budget  test_long.py::test_over",
        "and 21 more tests that compiled within budget or without one, not listed: "
        "only failures are listed once more than 20 tests compiled (--nocompile-table=all "
        "lists every one)",
        "test_long.py::test_over: scale recompiled: 0/0: n == 2",
    ])
    for every_one in (["--nocompile-table=all"], ["-o", "nocompile_table=all"]):
        table = run("-p", "no:logging", "--nocompile-report",
                    *every_one).stdout.str().split("= nocompile =")[1]
        assert table.count("  no budget    test_long.py::test_compiles[") == 21
    bad = run("-o", "nocompile_table=short")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(
        ["ERROR: ini key nocompile_table: expected one of auto, failures, all, got 'short'"])
    failures = run("-p", "no:logging", "--nocompile-report", "--nocompile-table=failures",
                   "-k", "test_compiles[0] or test_over")
    assert ("and 1 more test that compiled within budget or without one, not listed: "
            "--nocompile-table=failures (--nocompile-table=all lists every one)"
            in failures.stdout.lines)


def test_json_report_and_junit_properties(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_precedence=PRECEDENCE)
    result = run("-p", "no:logging", "--max-recompiles=0", "--nocompile-json=out/report.json",
                 "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # folder out/ does not exist
    result.stderr.fnmatch_lines([
        "ERROR: --nocompile-json=out/report.json: cannot write there: folder */out does not exist"])
    result = run("-p", "no:logging", "--max-recompiles=0", "--nocompile-json=report.json",
                 "--junitxml=junit.xml")
    document = json.loads((pytester.path / "report.json").read_text())
    assert document["format"] == "pytest-nocompile-report/1"
    assert document["torch_version"].startswith("2.") and document["plugin_version"] == "0.1.0"
    tests = {entry["nodeid"]: entry for entry in document["tests"]}
    names = ("test_default", "test_marker_allows_one", "test_opted_out", "test_no_compile",
             "test_fullgraph_compiles_count")
    assert set(tests) == {f"test_precedence.py::{name}" for name in names}
    assert tests["test_precedence.py::test_fullgraph_compiles_count"]["compiles"] == 1
    assert tests["test_precedence.py::test_no_compile"]["compiles"] == 0
    default = tests["test_precedence.py::test_default"]
    assert (default["outcome"], default["compiles"], default["recompiles"],
            default["max_recompiles"], default["verdict"]) == ("failed", 2, 1, 0, "over budget")
    (event,) = default["recompile_events"]
    assert (event["function"], event["phase"], event["reasons"][0]["compile_id"]) == (
        "scale", "call", "0/0" if HAS_COMPILE_IDS else None)
    assert guard_matches(event["reasons"][0]["guard"], "n == 2")
    assert event["user_code"] == "test_precedence.py:9 in recompile_once: f(torch.ones(2), 3)"
    assert tests["test_precedence.py::test_opted_out"]["max_recompiles"] is None
    assert not list(pytester.path.glob(".nocompile-*"))  # no temporary file left behind
    cases = {case.get("name"): case
             for case in ElementTree.parse(pytester.path / "junit.xml").iter("testcase")}
    properties = {prop.get("name"): prop.get("value")
                  for prop in cases["test_default"].iter("property")}
    assert properties == with_health_counts({"compiles": 2, "recompiles": 1, "graph_breaks": 0},
                                            "nocompile_", as_text=True)


BASELINE_SUBSET = RECOMPILE_ONCE + '''
def chatty(x):
    print("side effect")
    return x + 1

def test_recompiles():
    recompile_once()

def test_breaks():
    torch.compile(chatty, backend="eager")(torch.ones(2))

@pytest.mark.parametrize("case", range(4))
def test_quiet(case):
    pass
'''


def test_a_baseline_failure_names_each_new_recompile_and_graph_break_and_counts_a_subsets_absent_tests(  # noqa: E501
        pytester: pytest.Pytester, run: RunPytest) -> None:
    (pytester.path / "baseline.json").write_text(json.dumps({
        "format": "pytest-nocompile-baseline/1", "tests": {
        **{f"test_subset.py::test_quiet[{case}]":
           {"compiles": 0, "recompiles": 0, "graph_breaks": 0} for case in range(4)},
        "test_subset.py::test_recompiles": {"compiles": 1, "recompiles": 0, "graph_breaks": 0},
        "test_subset.py::test_breaks": {"compiles": 1, "recompiles": 0, "graph_breaks": 0},
    }}))
    pytester.makepyfile(test_subset=BASELINE_SUBSET)
    result = run("-p", "no:logging", "--nocompile-compare=baseline.json", "-k", "not quiet")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    expect_lines(result, [
        "*= nocompile baseline baseline.json =*",
        "counts only (a baseline of format 1, for any torch): reasons are not compared; "
        "save it again to gate on reasons",
        "test_subset.py::test_breaks: graph breaks rose 0 -> 1",
        f"    graph break at test_subset.py:12: {PRINT_BREAK_REASON}",
        "        user code: test_subset.py:12 in chatty: print(\"side effect\")",
        "test_subset.py::test_recompiles: compiles rose 1 -> 2, recompiles rose 0 -> 1",
        "    recompiled scale (test_subset.py:3): guard failed: 0/0: n == 2",
        "        triggered by: test_subset.py:9 in recompile_once: f(torch.ones(2), 3)",
        "        usual fix: n is a Python int that changes*",
        "4 tests of the baseline did not run here (deselected, not collected, "
        "run by another shard, or removed): not compared",
    ])
    assert result.outlines[-1] == ("nocompile: run FAILED (exit code 1) though every test passed: "
                                   "3 counts rose against the baseline baseline.json, "
                                   "in 2 tests (listed above)")


def test_report_and_baseline_files_honour_the_umask(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile("def test_a(): pass")
    umask = os.umask(0o027)  # the inner run inherits it: group may read, others may not
    try:
        run("--nocompile-json=report.json",
            "--nocompile-save=baseline.json").assert_outcomes(passed=1)
    finally:
        os.umask(umask)
    assert {name: oct(stat.S_IMODE((pytester.path / name).stat().st_mode))
            for name in ("report.json", "baseline.json")} == {
        "report.json": "0o640", "baseline.json": "0o640"}


def test_baseline_save_then_compare(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_base='''
        import torch
        def scale(x, n):
            return x * n
        def test_stable():
            f = torch.compile(scale, backend="eager")
            f(torch.ones(2), 2)
        def test_improves():
            f = torch.compile(scale, backend="eager")
            f(torch.ones(2), 2)
            f(torch.ones(2), 3)
        def test_removed():
            pass
    ''')
    run("--nocompile-save=baseline.json").assert_outcomes(passed=3)
    saved = json.loads((pytester.path / "baseline.json").read_text())
    assert saved["format"] == "pytest-nocompile-baseline/2"
    assert list(saved["torch"]) == [f"{TORCH[0]}.{TORCH[1]}"]
    assert saved["torch"][f"{TORCH[0]}.{TORCH[1]}"]["test_base.py::test_improves"] == {
        **with_health_counts({"compiles": 2, "recompiles": 1, "graph_breaks": 0}, baseline=True),
        "reasons": ["recompile scale (test_base.py): python int n"]}
    pytester.makepyfile(test_base='''
        import torch
        def scale(x, n):
            return x * n
        def test_stable():
            f = torch.compile(scale, backend="eager")
            f(torch.ones(2), 2)
            f(torch.ones(2), 3)
        def test_improves():
            f = torch.compile(scale, backend="eager")
            f(torch.ones(2), 2)
        def test_new():
            pass
    ''')
    result = run("--nocompile-compare=baseline.json")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    expect_lines(result, [
        "*= nocompile baseline baseline.json =*",
        f"compared with the entries for torch {TORCH[0]}.{TORCH[1]}",
        "test_base.py::test_stable: compiles rose 1 -> 2, recompiles rose 0 -> 1",
        "test_base.py::test_stable: new reason: recompile scale (test_base.py): python int n",
        "    recompiled scale (test_base.py:2): guard failed: 0/0: n == 2",
        "        triggered by: test_base.py:7 in test_stable: f(torch.ones(2), 3)",
        "        usual fix: n is a Python int that changes*",
        "test_base.py::test_improves: compiles fell 2 -> 1, recompiles fell 1 -> 0",
        "test_base.py::test_improves: reason gone: recompile scale (test_base.py): python int n",
        "new test (not in baseline): test_base.py::test_new",
        "1 test of the baseline did not run here (deselected, not collected, run by another shard, "
        "or removed): not compared",
    ])
    # The run's last line says it failed, and why: pytest's own last line reads "3 passed".
    assert result.outlines[-1] == ("nocompile: run FAILED (exit code 1) though every test passed: "
                                   "2 counts rose and 1 new reason against the baseline "
                                   "baseline.json, in 1 test (listed above)")
    # Without the rise, the same comparison passes.
    pytester.makepyfile(
        test_base="import torch\ndef test_improves():\n"
                  "    torch.compile(lambda x: x, backend='eager')(torch.ones(1))\n")
    assert run("--nocompile-compare=baseline.json").ret == pytest.ExitCode.OK


@pytest.mark.parametrize(
    "content, problem",
    [
        (None,
         "baseline baseline.json does not exist (write one with --nocompile-save=baseline.json)"),
        ("{not json", "baseline baseline.json is not readable JSON: *"),
        ('{"format": "pytest-nocompile-baseline/0", "tests": {}}',
         "baseline baseline.json has format 'pytest-nocompile-baseline/0', "
         "expected 'pytest-nocompile-baseline/2' (or 'pytest-nocompile-baseline/1')"),
        ('{"format": "pytest-nocompile-baseline/1", "tests": {"t": {"recompiles": "1"}}}',
         "baseline baseline.json is corrupt: *"),
    ],
    ids=["missing", "corrupt-json", "wrong-version", "corrupt-counts"],
)
def test_bad_baselines_are_usage_errors(
        pytester: pytest.Pytester, run: RunPytest, content, problem) -> None:
    if content is not None:
        (pytester.path / "baseline.json").write_text(content)
    pytester.makepyfile("def test_a(): pass")
    result = run("--nocompile-compare=baseline.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --nocompile-compare: {problem}"])


XDIST = '''
import os, pytest, torch

def scale(x, n):
    return x * n

@pytest.mark.parametrize("case", range(6))
@pytest.mark.max_recompiles(0)
def test_case(case):
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    if case % 2:
        f(torch.ones(2), 3)

def test_worker_crash():
    os._exit(1)
'''


def test_xdist_budgets_summary_json_and_compare(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_xdist=XDIST)
    result = run("-p", "xdist", "-n", "2", "-p", "no:logging", "--nocompile-json=report.json",
                 "--nocompile-save=baseline.json")
    result.assert_outcomes(passed=3, failed=4)  # 3 odd cases over budget, and the crashed test
    expect_lines(result, ["1 recompile > max_recompiles(0) (marker on the test)"])
    tests = {entry["nodeid"]: entry
             for entry in json.loads((pytester.path / "report.json").read_text())["tests"]}
    assert sorted(tests) == sorted(f"test_xdist.py::test_case[{case}]" for case in range(6))
    assert [tests[f"test_xdist.py::test_case[{case}]"]["recompiles"]
            for case in range(6)] == [0, 1, 0, 1, 0, 1]
    result.stdout.fnmatch_lines(["*= nocompile =*", "*over budget*test_xdist.py::test_case[[]*]"])
    pytester.makepyfile(test_xdist=XDIST.replace("case % 2", "True"))
    result = run("-p", "xdist", "-n", "2", "-p", "no:logging", "--nocompile-compare=baseline.json")
    # the events travel from the workers
    expect_lines(result, [
        "test_xdist.py::test_case[0]: compiles rose 1 -> 2, recompiles rose 0 -> 1",
        "test_xdist.py::test_case[0]: new reason: recompile scale (test_xdist.py): python int n",
        "    recompiled scale (test_xdist.py:3): guard failed: 0/0: n == 2",
        "        triggered by: test_xdist.py:12 in test_case: f(torch.ones(2), 3)"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Markers alone, no option: the controller, which collects nothing, must still gather and show
    # them.
    result = run("-p", "xdist", "-n", "2", "-p", "no:logging")
    result.stdout.fnmatch_lines(["*= nocompile =*",
                                 "*1  *over budget*test_xdist.py::test_case[[]0]"])


NEVER_IMPORTS_TORCH = """
import pytest

@pytest.fixture
def breaks_in_teardown():
    yield
    raise RuntimeError("teardown failed")

def test_passes():
    pass

def test_fails():
    assert False

def test_teardown_error(breaks_in_teardown):
    pass

@pytest.mark.skip
def test_skipped():
    pass
"""


@pytest.mark.parametrize("processes", [(), ("-p", "xdist", "-n", "2")],
                         ids=["one process", "xdist"])
def test_idle_tests_get_entries_outcomes_and_junit_properties(
        pytester: pytest.Pytester, run: RunPytest, processes: tuple[str, ...]) -> None:
    # Before torch is imported no report hook runs: one teardown hook puts the
    # counts on the item, and an xdist controller makes each entry from those.
    if processes:
        pytest.importorskip("xdist")
    pytester.makepyfile(test_idle=NEVER_IMPORTS_TORCH)
    result = run(*processes, "-p", "no:randomly", "-p", "no:logging", "--max-recompiles=0",
                 "--nocompile-json=report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2, failed=1, skipped=1, errors=1)
    result.stdout.fnmatch_lines(["*= nocompile =*",
                                 "no test compiled in its call phase (4 watched)"])
    tests = {entry["nodeid"].split("::")[1]: entry
             for entry in json.loads((pytester.path / "report.json").read_text())["tests"]}
    assert {name: (entry["outcome"], entry["compiles"], entry["max_recompiles"], entry["verdict"])
            for name, entry in tests.items()} == {
        "test_passes": ("passed", 0, 0, "within budget"),
        "test_fails": ("failed", 0, 0, "within budget"),
        "test_teardown_error": ("error", 0, 0, "within budget"),
        "test_skipped": ("skipped", 0, 0, "within budget"),
    }
    zero = with_health_counts({"compiles": 0, "recompiles": 0, "graph_breaks": 0}, "nocompile_",
                              as_text=True)
    for case in ElementTree.parse(pytester.path / "junit.xml").iter("testcase"):
        assert ([(prop.get("name"), prop.get("value")) for prop in case.iter("property")]
                == list(zero.items())), case.get("name")

STRICT = '''
import pytest, torch

def scale(x, n):
    return x * n

@pytest.mark.max_recompiles(0, strict=True)
def test_strict_marker():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)  # the recompiling call

@pytest.mark.max_recompiles(0)
def test_first_compiles_pass_in_strict_mode():
    f = torch.compile(scale, backend="eager")
    for _ in range(3):
        f(torch.ones(2), 2)
    assert not torch._dynamo.config.error_on_recompile is False
'''


def test_strict_mode_raises_at_the_recompiling_call_and_restores_config(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_strict=STRICT.replace(
        "    assert not torch._dynamo.config.error_on_recompile is False\n", ""))
    pytester.makeconftest('''
        import pytest, torch._dynamo.config
        @pytest.fixture(autouse=True)
        def config_restored():
            before = torch._dynamo.config.error_on_recompile
            yield
            assert torch._dynamo.config.error_on_recompile == before is False
    ''')
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([">       f(torch.ones(2), 3)  # the recompiling call",
                                 "E   *RecompileError: Recompiling function scale in *"])
    result = run("-p", "no:logging", "--nocompile-strict", "-k", "first_compiles")
    result.assert_outcomes(passed=1)


def test_strict_mode_from_the_ini_key(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_strict=STRICT.replace("strict=True", "").replace(
        "    assert not torch._dynamo.config.error_on_recompile is False\n", ""))
    pytester.makeini("[pytest]\nnocompile_strict = true\n")
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([">       f(torch.ones(2), 3)  # the recompiling call",
                                 "E   *RecompileError: Recompiling function scale in *"])


def test_graph_break_budget_from_cli_and_ini_with_marker_opt_out(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    unmarked = GRAPH_BREAKS.replace("@pytest.mark.max_graph_breaks(0)\n", "")
    pytester.makepyfile(test_breaks=unmarked.replace("max_graph_breaks(1)",
                                                     "max_graph_breaks(None)"))
    result = run("-p", "no:logging", "--max-graph-breaks=0")
    result.assert_outcomes(passed=1, failed=1)
    expect_lines(result, ["*_ test_graph_break _*",
                          "1 graph break > max_graph_breaks(0) (from --max-graph-breaks)"])
    pytester.makeini("[pytest]\nmax_graph_breaks = 0\n")
    run("-p", "no:logging").assert_outcomes(passed=1, failed=1)


def test_teardown_recompiles_are_recorded_and_shown_not_counted(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_teardown=RECOMPILE_ONCE + '''
@pytest.fixture
def recompiles_in_teardown():
    yield
    recompile_once()

@pytest.mark.max_recompiles(0)
def test_clean_call(recompiles_in_teardown):
    pass
''')
    result = run("-p", "no:logging", "-rP", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1)
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert entry["recompiles"] == 0
    assert [event["phase"] for event in entry["recompile_events"]] == ["teardown"]
    expect_lines(result, [
        "*- nocompile recompiles (teardown, not counted) -*",
        "1 recompile recorded",
        "(teardown) [1/1] recompiled scale (test_teardown.py:3)",
    ])
