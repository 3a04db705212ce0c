"""A budget per torch version: ``max_recompiles(0, torch={"<2.8": 1})``.

The end-to-end cases build their specs from the installed torch (``TORCH``),
so that each holds on any torch 2.4-2.15: ``==X.Y`` always matches, ``<X.Y``
never does. The spec matching itself is tested without torch, on versions
given as text.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Optional, cast

import pytest

from nocompile_testing import RECOMPILE_ONCE, TORCH, RunPytest, expect_lines
from pytest_nocompile.features.compile_cost.kinds import COMPILE_SECONDS_KIND
from pytest_nocompile.features.version_budgets.version_budgets import (
    entry_in_force,
    parse_spec,
    read_torch_entries,
    torch_form,
)
from pytest_nocompile.judge import installed_versions
from pytest_nocompile.judge.budget import BudgetUsageError, budget_from_marker
from pytest_nocompile.judge.installed_versions import major_minor
from pytest_nocompile.vocabulary.kinds import GRAPH_BREAKS, RECOMPILES
from pytest_nocompile.vocabulary.measures import COUNT
from pytest_nocompile.watching.planning import plan_key

X, Y = TORCH
THIS = f"{X}.{Y}"  # the installed torch's major.minor
NEXT = f"{X}.{Y + 1}"  # a torch newer than the installed one

VERSION_BUDGETS = RECOMPILE_ONCE + f'''
@pytest.mark.max_recompiles(0, torch={{"=={THIS}": 1}})
def test_matching_entry_applies():
    recompile_once()

@pytest.mark.max_recompiles(5, torch={{">={THIS}": 0}})
def test_matching_entry_fails_naming_it():
    recompile_once()

@pytest.mark.max_recompiles(0, torch={{"<{THIS}": 1, ">{THIS}": 1, ">={NEXT}": 1}})
def test_no_entry_matches_so_the_default_applies():
    recompile_once()

@pytest.mark.max_recompiles(5, torch={{"<={THIS}": 0, "=={THIS}": 5}})
def test_first_match_wins():
    recompile_once()

@pytest.mark.max_recompiles(0, torch={{"<{NEXT}": None}})
def test_none_opts_out_where_it_matches():
    recompile_once()

@pytest.mark.max_recompiles(None, torch={{">={NEXT}": None, "=={THIS}": 0}})
def test_an_entry_budgets_where_the_default_opts_out():
    recompile_once()

@pytest.mark.max_recompiles(0, torch={{"=={THIS}": 0}})
class TestOnClass:
    def test_class_entry_is_named(self):
        recompile_once()

@pytest.mark.max_graph_breaks(0, torch={{"=={THIS}": 1}})
def test_graph_break_entry():
    def with_break(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    torch.compile(with_break, backend="eager")(torch.ones(2))

@pytest.mark.max_compiles(0, torch={{"<={THIS}": 1}})
def test_compiles_entry():
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 2)
'''


def test_the_entry_matching_the_installed_torch_applies_and_the_failure_names_it(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_versions=VERSION_BUDGETS)
    result = run("-rA", "-p", "no:logging", "--max-recompiles=0")
    result.assert_outcomes(passed=4, failed=5)
    for passed in ("test_matching_entry_applies", "test_none_opts_out_where_it_matches",
                   "test_graph_break_entry", "test_compiles_entry"):
        result.stdout.fnmatch_lines([f"PASSED test_versions.py::{passed}"])
    expect_lines(result, ["*_ test_matching_entry_fails_naming_it _*",
                          f"1 recompile > max_recompiles(0) (marker on the test, torch >={THIS})"])
    expect_lines(result, ["*_ test_no_entry_matches_so_the_default_applies _*",
                          "1 recompile > max_recompiles(0) (marker on the test)"])
    expect_lines(result, ["*_ test_first_match_wins _*",
                          f"1 recompile > max_recompiles(0) (marker on the test, torch <={THIS})"])
    expect_lines(result, ["*_ test_an_entry_budgets_where_the_default_opts_out _*",
                          f"1 recompile > max_recompiles(0) (marker on the test, torch =={THIS})"])
    expect_lines(result, ["*_ TestOnClass.test_class_entry_is_named _*",
                          "1 recompile > max_recompiles(0) (marker on class TestOnClass, "
                          f"torch =={THIS})"])


TORCH_ACCEPTED = ('use @pytest.mark.max_recompiles(N, torch={"<X.Y": N, ...}), each key <X.Y, '
                  "<=X.Y, >X.Y, >=X.Y or ==X.Y (torch's major.minor; the first that matches "
                  "applies), each N an int >= 0 or None")
BAD_TORCH_MARKERS = {
    "test_list": ('max_recompiles(0, torch=[("<2.8", 1)])',
                  "torch must be a dict, got [('<2.8', 1)] (list)"),
    "test_none": ("max_recompiles(0, torch=None)", "torch must be a dict, got None (NoneType)"),
    "test_no_comparison": ('max_recompiles(0, torch={"2.8": 1})',
                           "torch key '2.8' is not a version spec"),
    "test_patch_number": ('max_recompiles(0, torch={"<2.8.1": 1})',
                          "torch key '<2.8.1' is not a version spec"),
    "test_compatible_release": ('max_recompiles(0, torch={"~=2.8": 1})',
                                "torch key '~=2.8' is not a version spec"),
    "test_float_key": ("max_recompiles(0, torch={2.8: 1})", "torch key 2.8 is not a version spec"),
    "test_negative": ('max_recompiles(0, torch={"<2.8": -1})',
                      "torch['<2.8']: expected an int >= 0, got -1"),
    # Equal to the good marker's {"<2.8": 0} before it (and hashed alike): a plan shared by equal
    # markers must not hide it.
    "test_false": ('max_recompiles(0, torch={"<2.8": False})',
                   "torch['<2.8']: expected an int >= 0, got False (bool)"),
    # Bad on every torch, whether or not its spec matches this one.
    "test_later_entry": (f'max_recompiles(0, torch={{"=={THIS}": 1, "<1.0": "1"}})',
                         "torch['<1.0']: expected an int >= 0, got '1' (str)"),
}


def test_a_bad_torch_argument_is_an_error_of_that_test_naming_it_and_the_form(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    body = ["import pytest", "", '@pytest.mark.max_recompiles(0, torch={"<2.8": 0})',
            "def test_good_first():", "    pass", ""]
    for name, (marker, _) in BAD_TORCH_MARKERS.items():
        body += [f"@pytest.mark.{marker}", f"def {name}():", "    pass", ""]
    body += ['@pytest.mark.max_graph_breaks(0, torch={"<2.8": 0.5})',
             "def test_graph_breaks():", "    pass"]
    pytester.makepyfile(test_bad="\n".join(body))
    result = run("--strict-markers")
    result.assert_outcomes(passed=1, errors=len(BAD_TORCH_MARKERS) + 1)
    assert "INTERNALERROR" not in result.stdout.str()
    for name, (marker, problem) in BAD_TORCH_MARKERS.items():
        expect_lines(result, [f"*ERROR at setup of {name}*",
                              f"invalid max_recompiles marker on test_bad.py::{name}: "
                              f"{rendered(marker)}: {problem}; {TORCH_ACCEPTED}"])
    graph_breaks_form = TORCH_ACCEPTED.replace("max_recompiles", "max_graph_breaks")
    expect_lines(result, ["*ERROR at setup of test_graph_breaks*",
                          "invalid max_graph_breaks marker on test_bad.py::test_graph_breaks: "
                          "max_graph_breaks(0, torch={'<2.8': 0.5}): torch['<2.8']: "
                          f"expected an int >= 0, got 0.5 (float); {graph_breaks_form}"])


def rendered(marker: str) -> str:
    """A marker call as the plugin shows it: its arguments' repr (single quotes)."""
    return marker.replace('"', "'")


@pytest.mark.parametrize(("installed", "release"), [
    ("2.7.1+cu124", (2, 7)), ("2.10.0a0+git1234abc", (2, 10)), ("2.15.0", (2, 15)),
    ("2.9", (2, 9)), ("not installed", None),
])
def test_a_version_is_read_as_its_major_and_minor(installed: str,
                                                  release: Optional[tuple[int, int]]) -> None:
    assert major_minor(installed) == release


@pytest.mark.parametrize(("text", "shown"),
                         [("<2.8", "<2.8"), (" >= 2.10 ", ">=2.10"), ("==2.4", "==2.4"),
                          ("<=3.0", "<=3.0"), (">2.9", ">2.9")])
def test_a_spec_reads_as_written_without_spaces(text: str, shown: str) -> None:
    spec = parse_spec(text)
    assert spec is not None and str(spec) == shown


@pytest.mark.parametrize("text", ["2.8", "<2", "<2.8.1", "~=2.8", "=2.8", "!=2.8", "<2.x",
                                  "<2.8+cu124", "", 2.8, None, ("<", 2, 8)])
def test_anything_else_is_no_spec(text: object) -> None:
    assert parse_spec(text) is None


@pytest.mark.parametrize(("spec", "matching"), [
    ("<2.8", {(2, 4), (2, 7)}),
    ("<=2.8", {(2, 4), (2, 7), (2, 8)}),
    (">2.8", {(2, 9), (2, 10), (3, 0)}),  # 2.10 is newer than 2.9: compared as numbers, not text
    (">=2.8", {(2, 8), (2, 9), (2, 10), (3, 0)}),
    ("==2.8", {(2, 8)}),
])
def test_a_spec_compares_major_and_minor(spec: str, matching: set[tuple[int, int]]) -> None:
    parsed = parse_spec(spec)
    assert parsed is not None
    releases = [(2, 4), (2, 7), (2, 8), (2, 9), (2, 10), (3, 0)]
    assert {release for release in releases if parsed.matches(release)} == matching


def test_the_first_matching_entry_is_in_force_and_every_entry_is_checked() -> None:
    entries = {"<2.6": None, "<2.8": 1, ">=2.8": 3}
    assert [(str(spec), allowed)
            for spec, allowed in filter(None, [entry_in_force(entries, COUNT, release)
                                               for release in [(2, 4), (2, 7), (2, 9)]])] == \
        [("<2.6", None), ("<2.8", 1), (">=2.8", 3)]
    assert entry_in_force({"<2.8": 1}, COUNT, (2, 8)) is None
    assert entry_in_force({"<2.8": 1}, COUNT, None) is None  # torch not installed: the default
    assert entry_in_force({}, COUNT, (2, 8)) is None
    with pytest.raises(ValueError, match=r"torch\['<1.0'\]: expected an int >= 0, got -1"):
        entry_in_force({">=2.0": 1, "<1.0": -1}, COUNT, (2, 8))  # after the match: still checked


# The island's keyword, as the run's planning passes it (pytest_nocompile_marker_keywords).
TORCH_KEY = {"torch": read_torch_entries}


@pytest.fixture
def installed_torch(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Make the plugin read another torch version from the metadata (torch itself is never imported
    for it)."""
    real = installed_versions.distribution_version

    def install(version: str) -> None:
        monkeypatch.setattr(installed_versions, "distribution_version",
                            lambda name: version if name == "torch" else real(name))

    return install


def test_a_marker_reads_the_entry_for_the_installed_torch(
    installed_torch: Callable[[str], None]
) -> None:
    installed_torch("2.7.1+cu124")
    read = budget_from_marker((0,), {"torch": {"<2.8": 1}, "isolate": False}, RECOMPILES, TORCH_KEY)
    assert (read.count, read.note, read.isolate) == (1, "torch <2.8", False)
    read = budget_from_marker((None,), {"torch": {" == 2.7 ": 2}}, GRAPH_BREAKS, TORCH_KEY)
    assert (read.count, read.note) == (2, "torch ==2.7")
    read = budget_from_marker((1.5,), {"torch": {">=2.7": None}}, COMPILE_SECONDS_KIND, TORCH_KEY)
    assert (read.count, read.note) == (None, "torch >=2.7")
    installed_torch("2.8.0")
    read = budget_from_marker((0,), {"torch": {"<2.8": 1}}, RECOMPILES, TORCH_KEY)
    assert (read.count, read.note) == (0, None)


def test_a_bad_torch_argument_names_the_marker_and_the_torch_form() -> None:
    with pytest.raises(BudgetUsageError) as raised:
        budget_from_marker((0,), {"torch": {"2.8": 1}}, RECOMPILES, TORCH_KEY)
    assert str(raised.value) == ("max_recompiles(0, torch={'2.8': 1}): torch key '2.8' is not a "
                                 f"version spec; {TORCH_ACCEPTED}")
    assert torch_form(COMPILE_SECONDS_KIND).startswith(
        '@pytest.mark.max_compile_seconds(S, torch={"<X.Y": S, ...})')
    with pytest.raises(BudgetUsageError,
                       match=r"^max_recompiles\(0, torch=\{\}, limit=1\): unknown keyword limit; "
                             r"use @pytest.mark.max_recompiles\(N\)"):
        budget_from_marker((0,), {"torch": {}, "limit": 1}, RECOMPILES, TORCH_KEY)


def marked(*marks: pytest.MarkDecorator, parent: object = None) -> pytest.Item:
    """An item as plan_key reads it: a parent and its own markers."""
    return cast(pytest.Item, SimpleNamespace(parent=parent,
                                             own_markers=[mark.mark for mark in marks]))


def test_equal_torch_entries_share_a_plan_and_others_do_not() -> None:
    parent = object()
    key = plan_key(marked(pytest.mark.max_recompiles(0, torch={"<2.8": 1, ">=2.10": None}),
                          parent=parent))
    assert key is not None
    hash(key)
    assert key == plan_key(marked(pytest.mark.max_recompiles(0, torch={"<2.8": 1, ">=2.10": None}),
                                  parent=parent))
    others = [
        # order: the first match wins
        pytest.mark.max_recompiles(0, torch={">=2.10": None, "<2.8": 1}),
        # equal to 1, but a usage error
        pytest.mark.max_recompiles(0, torch={"<2.8": True, ">=2.10": None}),
        pytest.mark.max_recompiles(0, torch={"<2.8": 2, ">=2.10": None}),
        pytest.mark.max_recompiles(0),
    ]
    assert all(plan_key(marked(other, parent=parent)) != key for other in others)
    # unhashable: planned each time
    assert (plan_key(marked(pytest.mark.max_recompiles(0, torch={"<2.8": [1]}), parent=parent))
            is None)


# A keyword of the user's own, through the same hook as torch=: the budget in CI.
CI_KEYWORD_CONFTEST = """
    import os

    def pytest_nocompile_marker_keywords():
        def in_ci(value, kind, shown):
            if not isinstance(value, int):
                from pytest_nocompile.judge.budget import BudgetUsageError

                raise BudgetUsageError(f"{shown}: ci must be an int; use {kind.marker}(N, ci=N)")
            return (value, "in CI") if os.environ.get("ON_CI") else None

        return {"ci": in_ci}
"""

CI_KEYWORD_TESTS = RECOMPILE_ONCE + '''
@pytest.mark.max_recompiles(5, ci=0)
def test_ci_budget():
    recompile_once()

@pytest.mark.max_recompiles(5, ci="0")
def test_bad_ci_budget():
    pass
'''


def test_a_feature_adds_a_keyword_to_every_budget_marker_through_the_hook(
    pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(CI_KEYWORD_CONFTEST)
    pytester.makepyfile(test_ci=CI_KEYWORD_TESTS)
    run().assert_outcomes(passed=1, errors=1)
    monkeypatch.setenv("ON_CI", "1")
    result = run()
    result.assert_outcomes(failed=1, errors=1)
    expect_lines(result, ["*_ test_ci_budget _*",
                          "1 recompile > max_recompiles(0) (marker on the test, in CI)"])
    expect_lines(result, ["*ERROR at setup of test_bad_ci_budget*",
                          "invalid max_recompiles marker on test_ci.py::test_bad_ci_budget: "
                          "max_recompiles(5, ci='0'): ci must be an int; "
                          "use max_recompiles(N, ci=N)"])


def test_torch_is_no_keyword_of_the_core_where_its_island_is_blocked(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_versions=VERSION_BUDGETS)
    result = run("-p", "no:nocompile-version_budgets", "-k", "test_matching_entry_applies")
    result.assert_outcomes(errors=1, deselected=8)
    expect_lines(result, ["*ERROR at setup of test_matching_entry_applies*",
                          "invalid max_recompiles marker on "
                          "test_versions.py::test_matching_entry_applies: "
                          f"max_recompiles(0, torch={{'=={THIS}': 1}}): unknown keyword torch; "
                          "use @pytest.mark.max_recompiles(N*"])
