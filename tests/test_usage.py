"""How the marker behaves for users: bad input, scopes, xfail/skip/parametrize, real failures,
strictness."""

from __future__ import annotations

import re

import pytest

from nocompile_testing import RECOMPILE_ONCE, RunPytest, expect_lines

ACCEPTED = ("use @pytest.mark.max_recompiles(N), N an int >= 0 or None, "
            "with optional isolate=True/False and strict=True/False")

BAD_MARKERS = {
    "test_no_argument": ("max_recompiles()",
                         "max_recompiles(): expected exactly one positional N, got 0"),
    "test_negative": ("max_recompiles(-1)", "max_recompiles(-1): expected an int >= 0, got -1"),
    "test_float": ("max_recompiles(1.5)",
                   "max_recompiles(1.5): expected an int >= 0, got 1.5 (float)"),
    "test_string": ('max_recompiles("0")',
                    "max_recompiles('0'): expected an int >= 0, got '0' (str)"),
    "test_bool": ("max_recompiles(True)",
                  "max_recompiles(True): expected an int >= 0, got True (bool)"),
    # Equal to the good marker's 0 (and hashed alike): a plan shared by equal markers must not hide
    # them.
    "test_false": ("max_recompiles(False)",
                   "max_recompiles(False): expected an int >= 0, got False (bool)"),
    "test_zero_float": ("max_recompiles(0.0)",
                        "max_recompiles(0.0): expected an int >= 0, got 0.0 (float)"),
    "test_extra_positional": ("max_recompiles(0, 1)",
                              "max_recompiles(0, 1): expected exactly one positional N, got 2"),
    "test_unknown_keyword": ("max_recompiles(0, limit=3)",
                             "max_recompiles(0, limit=3): unknown keyword limit"),
    "test_bad_isolate": (
        'max_recompiles(0, isolate="no")',
        "max_recompiles(0, isolate='no'): isolate must be True or False, got 'no'"),
}
ACCEPTED_GRAPH_BREAKS = ("use @pytest.mark.max_graph_breaks(N), N an int >= 0 or None, "
                         "with optional user_only=True/False")
BAD_GRAPH_BREAK_MARKERS = {
    "test_breaks_negative": ("max_graph_breaks(-2)",
                             "max_graph_breaks(-2): expected an int >= 0, got -2"),
    "test_breaks_keyword": ("max_graph_breaks(0, strict=True)",
                            "max_graph_breaks(0, strict=True): unknown keyword strict"),
    "test_breaks_user_only": ('max_graph_breaks(0, user_only="yes")',
                              "max_graph_breaks(0, user_only='yes'): "
                              "user_only must be True or False, got 'yes'"),
    "test_breaks_torch_only": ("max_graph_breaks(0, torch_only=True)",
                               "max_graph_breaks(0, torch_only=True): unknown keyword torch_only"),
}


def test_bad_marker_input_is_an_error_of_that_test_naming_it(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    body = ["import pytest", "", "@pytest.mark.max_recompiles(0)", "def test_good_first():",
            "    pass", ""]
    for name, (marker, _) in {**BAD_MARKERS, **BAD_GRAPH_BREAK_MARKERS}.items():
        body += [f"@pytest.mark.{marker}", f"def {name}():", "    pass", ""]
    body += ["@pytest.mark.max_recompiles(0)", "def test_good():", "    pass"]
    pytester.makepyfile(test_bad="\n".join(body))
    result = run("--strict-markers")
    result.assert_outcomes(passed=2, errors=len(BAD_MARKERS) + len(BAD_GRAPH_BREAK_MARKERS))
    assert "INTERNALERROR" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for name, (_, problem) in BAD_MARKERS.items():
        expect_lines(result, [
            f"*ERROR at setup of {name}*",
            f"invalid max_recompiles marker on test_bad.py::{name}: {problem}; {ACCEPTED}"])
    for name, (_, problem) in BAD_GRAPH_BREAK_MARKERS.items():
        expect_lines(result, [
            f"*ERROR at setup of {name}*",
            f"invalid max_graph_breaks marker on test_bad.py::{name}: {problem}; "
            f"{ACCEPTED_GRAPH_BREAKS}"])


BAD_CONTRACT_MARKERS = {
    "test_dims_positional": ('dynamic_dims("x")',
                             "dynamic_dims('x'): name each argument with its dims, "
                             "positional arguments are not accepted"),
    "test_dims_negative": ("dynamic_dims(x=-1)",
                           "dynamic_dims(x=-1): x=-1 is not a dim or a tuple of dims (ints >= 0)"),
    "test_dims_flag": ('dynamic_dims(x=0, framework_specialisation="yes")',
                       "dynamic_dims(x=0, framework_specialisation='yes'): "
                       "framework_specialisation must be True or False, got 'yes'"),
    "test_ranks_argument": ("same_across_ranks(2)", "same_across_ranks(2): takes no arguments"),
}
ACCEPTED_CONTRACTS = {
    "dynamic_dims": "use @pytest.mark.dynamic_dims(x=0, y=(0, 1)), each keyword an argument of the "
                    "compiled function and each value a dim or a tuple of dims (ints >= 0), "
                    "with optional framework_specialisation=True/False",
    "same_across_ranks": "use @pytest.mark.same_across_ranks, without arguments",
}


def test_bad_contract_marker_is_an_error_of_that_test_naming_it(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    body = ["import pytest", ""]
    for name, (marker, _) in BAD_CONTRACT_MARKERS.items():
        body += [f"@pytest.mark.{marker}", f"def {name}():", "    pass", ""]
    body += ["@pytest.mark.dynamic_dims(x=(0, 1))", "@pytest.mark.same_across_ranks",
             "def test_good():", "    pass"]
    pytester.makepyfile(test_bad="\n".join(body))
    result = run("--strict-markers")
    result.assert_outcomes(passed=1, errors=len(BAD_CONTRACT_MARKERS))
    assert "INTERNALERROR" not in result.stdout.str()
    for name, (marker, problem) in BAD_CONTRACT_MARKERS.items():
        kind = marker.partition("(")[0]
        result.stdout.fnmatch_lines([
            f"*ERROR at setup of {name}*",
            f"invalid {kind} marker on test_bad.py::{name}: {problem}; "
            f"{ACCEPTED_CONTRACTS[kind]}"], consecutive=True)


SCOPES = RECOMPILE_ONCE + '''
pytestmark = pytest.mark.max_recompiles(0)

def test_module_budget():
    recompile_once()

@pytest.mark.max_recompiles(1)
class TestClassBudget:
    def test_class_budget_allows_one(self):
        recompile_once()

    @pytest.mark.max_recompiles(0)
    def test_function_marker_wins(self):
        recompile_once()

@pytest.mark.parametrize("n", [2, 3])
def test_parametrized(n):
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), n)
    f(torch.ones(2), n)

@pytest.mark.xfail(strict=True, reason="recompiles by design")
def test_expected_recompile():
    recompile_once()

@pytest.mark.xfail(strict=True, reason="should recompile")
def test_xfail_strict_without_recompile_is_xpass_strict():
    pass

@pytest.mark.skip(reason="not today")
def test_skipped():
    recompile_once()
'''


def test_marker_scopes_xfail_skip_parametrize(pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_scopes=SCOPES)
    result = run("-rA", "-p", "no:logging")
    result.assert_outcomes(passed=3, failed=3, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines([
        "FAILED test_scopes.py::test_module_budget - Failed: 1 recompile*",
        "FAILED test_scopes.py::TestClassBudget::test_function_marker_wins - Failed: 1*",
        "FAILED test_scopes.py::test_xfail_strict_without_recompile_is_xpass_strict*",
    ], consecutive=False)
    expect_lines(result, ["*_ test_module_budget _*",
                          "1 recompile > max_recompiles(0) (marker on module test_scopes.py)"])
    expect_lines(result, ["*_ TestClassBudget.test_function_marker_wins _*",
                          "1 recompile > max_recompiles(0) (marker on the test)"])
    result.stdout.fnmatch_lines(
        ["PASSED test_scopes.py::TestClassBudget::test_class_budget_allows_one"])
    result.stdout.fnmatch_lines(["PASSED test_scopes.py::test_parametrized[[]2]",
                                 "PASSED test_scopes.py::test_parametrized[[]3]"])
    result.stdout.fnmatch_lines(
        ["XFAIL test_scopes.py::test_expected_recompile - recompiles by design"])


BUDGET_SOURCES = RECOMPILE_ONCE + '''
@pytest.mark.max_recompiles(0)
class TestStep:
    def test_in_class(self):
        recompile_once()

    @pytest.mark.max_graph_breaks(3)
    def test_other_kind_on_the_test(self):
        recompile_once()

def test_run_wide():
    recompile_once()
'''


def test_a_failure_says_where_its_budget_came_from(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_sources=BUDGET_SOURCES)
    pytester.makeini("[pytest]\nmax_recompiles = 0\n")
    result = run("-p", "no:logging")
    result.assert_outcomes(failed=3)
    expect_lines(result, ["*_ TestStep.test_in_class _*",
                          "1 recompile > max_recompiles(0) (marker on class TestStep)"])
    expect_lines(result, ["*_ TestStep.test_other_kind_on_the_test _*",
                          "1 recompile > max_recompiles(0) (marker on class TestStep)"])
    expect_lines(result, [
        "*_ test_run_wide _*",
        "1 recompile > max_recompiles(0) (from nocompile ini key max_recompiles in tox.ini)"])
    result = run("-p", "no:logging", "-o", "max_recompiles=0", "-k", "run_wide")
    expect_lines(result, ["*_ test_run_wide _*",
                          "1 recompile > max_recompiles(0) (from -o max_recompiles)"])


OWN_FAILURE = '''
import pytest, torch

def scale(x, n):
    return x * n

@pytest.fixture
def warmed():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)  # a setup recompile: shown, not counted
    return f

@pytest.mark.max_recompiles(0)
def test_fails_for_its_own_reason():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)
    assert 1 + 1 == 3, "the test's own failure"

@pytest.mark.max_recompiles(0)
def test_setup_recompile_not_counted(warmed):
    warmed(torch.ones(2), 4)

@pytest.mark.max_recompiles(0)
def test_setup_shown_when_call_fails(warmed):
    f = torch.compile(lambda x: x + 1, backend="eager")
    f(torch.ones(2))
    f(torch.ones(3))
'''


def test_own_failure_is_kept_and_recompiles_go_in_a_section(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_own=OWN_FAILURE)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["E       AssertionError: the test's own failure"])
    expect_lines(result, [
        "*- nocompile recompiles -*",
        "1 recompile recorded",
        "(call) [1/1] recompiled scale (test_own.py:*)",
        "    guard failed: 0/0: n == 2",
    ])
    expect_lines(result, [
        "1 recompile > max_recompiles(0) (marker on the test)",
        "[1/1] recompiled <lambda> (test_own.py:*)",
        "    guard failed: 1/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
        "      usual fix: compile with dynamic=True, "
        "or call torch._dynamo.mark_dynamic(x, 0) before the first call",
        "    triggered by: test_own.py:* in test_setup_shown_when_call_fails: f(torch.ones(3))",
        "not counted (outside the call phase): 1 recompile",
        "(setup) [1/1] recompiled scale (test_own.py:*)",
        "    guard failed: 0/0: n == 2",
        "      guarded at: test_own.py:* in scale: return x * n",
        "      usual fix: n is a Python int that changes*",
        "    triggered by: test_own.py:* in warmed: f(torch.ones(2), 3)  "
        "# a setup recompile: shown, not counted",
    ])
    result.stdout.fnmatch_lines(
        ["FAILED test_own.py::test_fails_for_its_own_reason - AssertionError*"])


def test_markers_are_listed_and_strict_markers_with_warnings_as_errors_are_clean(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    result = run("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.max_recompiles(N, isolate=True, strict=False): "
                                 "fail the test when its call phase has more than N*"])
    result.stdout.fnmatch_lines(["@pytest.mark.max_graph_breaks(N, user_only=False): "
                                 "fail the test when its call phase has more than N*"])
    result.stdout.fnmatch_lines(["@pytest.mark.dynamic_dims(x=0, y=(0, 1), "
                                 "framework_specialisation=False): fail the test when a "
                                 "recompile in its call phase specialised one of these dims*"])
    result.stdout.fnmatch_lines(
        ["@pytest.mark.same_across_ranks: fail the test when the processes it starts*"])
    pytester.makepyfile('''
        import pytest, torch

        @pytest.mark.max_recompiles(0)
        def test_clean(nocompile_recompiles):
            f = torch.compile(lambda x: x * 2, backend="eager")
            f(torch.ones(2))
            f(torch.ones(2))
            assert len(nocompile_recompiles) == 0
    ''')
    result = run("--strict-markers", "-W", "error")
    result.assert_outcomes(passed=1)
    assert "warnings summary" not in result.stdout.str()


def test_grep_nocompile_in_help_finds_every_option(
        pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch) -> None:
    # help wraps at the terminal's width; 80 is the narrowest usual one
    monkeypatch.setenv("COLUMNS", "80")
    help_text = run("--help").stdout.str()
    group = help_text.split(
        "torch.compile recompile budgets (pytest-nocompile):\n")[1].split("\n\n")[0]
    options = re.findall(r"^  (--[\w-]+)", group, flags=re.M)
    assert {"--max-recompiles", "--max-graph-breaks", "--max-compiles"} <= set(options)
    lines = help_text.splitlines()
    # pytest --help | grep -i nocompile
    grepped = [line for line in lines if "nocompile" in line.lower()]
    # An option too long for argparse's help column (--max-compile-instructions=N) has its help on
    # the next line: `grep -i -B1 nocompile` shows it, with that line reading "nocompile: ..." right
    # under the option.
    under = {line.split()[0].partition("=")[0] for line, below in zip(lines, lines[1:])
             if line.startswith("  --") and len(line.split()) == 1
             and below.lstrip().startswith("nocompile: ")}
    assert [option for option in options if option not in under
            and not any(line.startswith(f"  {option}") for line in grepped)] == []
    assert under <= {"--max-compile-seconds", "--max-compile-instructions"}


def test_help_documents_the_options(pytester: pytest.Pytester, run: RunPytest) -> None:
    result = run("--help")
    result.stdout.fnmatch_lines(["torch.compile recompile budgets (pytest-nocompile):",
                                 "*--nocompile-no-isolate*"])
    result.stdout.fnmatch_lines(["  nocompile_isolate (bool):",
                                 "*reset dynamo's caches before each watched test (default:"])



# A tests under the plugin's markers, each a keystroke or two off: all passed green.
TYPO_MARKERS = RECOMPILE_ONCE + '''
pytestmark = pytest.mark.max_graph_break(0)

@pytest.mark.max_recompile(0)
def test_step():
    recompile_once()

@pytest.mark.maxcompiles(1)
class TestLoop:
    def test_epoch(self):
        recompile_once()

@pytest.mark.parametrize("n", [2])
@pytest.mark.dyanmic_dims(x=0)
def test_swapped_letters(n):
    recompile_once()
'''
# Left alone: pytest's own marks, short names, and names of the user's own (two registered,
# in a conftest and in the ini file, though each is one letter off a plugin marker).
NOT_TYPOS = '''
import pytest

@pytest.mark.skipif(False, reason="runs")
@pytest.mark.filterwarnings("ignore")
@pytest.mark.usefixtures("tmp_path")
@pytest.mark.parametrize("n", [1])
@pytest.mark.max_compile
@pytest.mark.max_kernel
@pytest.mark.slow
@pytest.mark.max_size(3)
def test_not_typos(n):
    pass
'''
REGISTER_MAX_COMPILE = '''
def pytest_configure(config):
    config.addinivalue_line("markers", "max_compile: ours")
'''
USE_TYPO = "did you mean {}? use {}; if {} is a marker of your own, register it (ini markers)"
RECOMPILES_FORM = ACCEPTED.removeprefix("use ")
GRAPH_BREAKS_FORM = ACCEPTED_GRAPH_BREAKS.removeprefix("use ")
COMPILES_FORM = "@pytest.mark.max_compiles(N), N an int >= 0 or None"
DIMS_FORM = ACCEPTED_CONTRACTS["dynamic_dims"].removeprefix("use ")


def test_a_marker_a_keystroke_or_two_off_is_an_error_of_its_tests_naming_the_one_meant(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_typos=TYPO_MARKERS, test_not_typos=NOT_TYPOS)
    pytester.makeconftest(REGISTER_MAX_COMPILE)
    pytester.makeini("[pytest]\nmarkers =\n    max_kernel: ours too\n")
    result = run()
    # pytest's own unknown-mark warnings stay.
    result.assert_outcomes(passed=1, errors=3, warnings=6)
    assert "INTERNALERROR" not in result.stdout.str()
    module = "marker on module test_typos.py"
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_step*",
        # The test's own mark is read first (the closest), the module's after it.
        "unknown marker max_recompile on test_typos.py::test_step: "
        + USE_TYPO.format("max_recompiles", RECOMPILES_FORM, "max_recompile"),
        f"unknown marker max_graph_break on test_typos.py::test_step ({module}): "
        + USE_TYPO.format("max_graph_breaks", GRAPH_BREAKS_FORM, "max_graph_break"),
    ], consecutive=True)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of TestLoop.test_epoch*",
        "unknown marker maxcompiles on test_typos.py::TestLoop::test_epoch "
        "(marker on class TestLoop): "
        + USE_TYPO.format("max_compiles", COMPILES_FORM, "maxcompiles"),
        f"unknown marker max_graph_break on test_typos.py::TestLoop::test_epoch ({module}): *",
    ], consecutive=True)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_swapped_letters[[]2]*",
        "unknown marker dyanmic_dims on test_typos.py::test_swapped_letters[[]2]: "
        + USE_TYPO.format("dynamic_dims", DIMS_FORM, "dyanmic_dims"),
    ], consecutive=True)
    typo_lines = [line for line in result.stdout.lines if "unknown marker" in line]
    assert not [line for line in typo_lines if "test_not_typos" in line]


NEAR_MISSES = [
    ("max_recompile", ("max_recompiles",)),
    ("Max_Recompiles", ("max_recompiles",)),
    ("max_recomplies", ("max_recompiles",)),  # two letters swapped: one edit
    ("max_graphbreaks", ("max_graph_breaks",)),
    ("min_compile", ("min_compiles",)),
    ("mix_compiles", ("max_compiles", "min_compiles")),
    ("max_sync", ("max_syncs",)),
    ("same_accross_ranks", ("same_across_ranks",)),
    ("max_compile_second", ("max_compile_seconds",)),
]
# pytest's own marks, common marks of other plugins and of users, and the plugin's own names.
NOT_NEAR_MISSES = ["skip", "skipif", "xfail", "parametrize", "usefixtures", "filterwarnings",
                   "tryfirst", "slow", "gpu", "cuda", "flaky", "timeout", "asyncio", "django_db",
                   "benchmark", "max_size", "max_workers",
                   "max_recompiles", "min_compiles", "dynamic_dims"]


@pytest.mark.parametrize("name, meant", [*NEAR_MISSES, *((name, ()) for name in NOT_NEAR_MISSES)])
def test_near_misses_of_the_plugins_marker_names(name: str, meant: tuple[str, ...]) -> None:
    from pytest_nocompile.features.marker_names.marker_typos import nearest_markers

    assert nearest_markers(name) == meant


def test_a_bad_budget_option_value_names_the_option_once(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    # argparse says "argument --max-recompiles: ..." itself: the message after it does not again.
    from pytest_nocompile.vocabulary.kinds import KINDS

    pytester.makepyfile("def test_a(): pass")
    for kind in KINDS:
        result = run(f"{kind.option}=abc")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        expected = f"expected {kind.measure.accepts}, got 'abc'"
        result.stderr.fnmatch_lines([f"*: error: argument {kind.option}: {expected}"])
        assert result.stderr.str().count(kind.option) == 1, result.stderr.str()
