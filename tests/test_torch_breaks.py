"""Graph breaks inside torch (a compiled optimizer step's) are told apart from the user's, and a
budget can leave them out.

The number of graph breaks inside torch's ``optimizer.step()`` differs per
torch version: these tests assert that there are some, that they are shown
as torch's, and what each budget makes of them, never how many.
"""

from __future__ import annotations

import json

import pytest

from nocompile_testing import PRINT_BREAK_REASON, RunPytest, expect_lines, recorded_messages
from pytest_nocompile.vocabulary.display_paths import is_torch_file
from pytest_nocompile.vocabulary.graph_break_events import graph_break_event

# A file of a torch installed in another environment than this one (a child process may run it).
OTHER_TORCHS_FILE = "/opt/env/lib/python3.11/site-packages/torch/optim/optimizer.py"


def test_a_file_is_torchs_in_the_torch_imported_here_or_in_any_installed_one() -> None:
    import inspect

    import torch

    assert is_torch_file(inspect.getfile(torch.optim.Optimizer))
    assert is_torch_file(OTHER_TORCHS_FILE)
    assert not is_torch_file("/home/me/project/tests/test_training.py")
    assert not is_torch_file("/home/me/torch/train.py")  # a project's folder named torch


@pytest.mark.parametrize("version", ["2.4", "2.5", "2.6", "2.9", "2.13", "2.15"])
def test_a_graph_break_is_torchs_by_the_file_it_happened_in(version: str) -> None:
    # The recorded breaks are in a user's script. torch 2.6 words a torch._dynamo.graph_break()
    # call there as "skip function graph_break in file .../torch/_dynamo/decorators.py": the
    # place is the user's, so the break is too.
    for message in recorded_messages(f"torch-{version}-graph_breaks.txt"):
        event = graph_break_event(message, is_torch_file)
        assert event.line and not event.inside_torch, message
        in_torch = message.replace(event.filename, OTHER_TORCHS_FILE)
        assert graph_break_event(in_torch, is_torch_file).inside_torch


# The user's shape: a tiny model, Adam with a tensor LR (no recompiles), a scheduler, and
# `opt.step` compiled (or a function of the user's that calls it).
TRAINING = '''
import pytest, torch

def train(compiled_step, steps=3):
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    step = compiled_step(opt)
    for _ in range(steps):
        model(torch.randn(3, 4)).sum().backward()
        step()
        sched.step()

def compiled_opt_step(opt):
    return torch.compile(opt.step, fullgraph=False, backend="eager")

def compiled_step_that_prints(opt):
    @torch.compile(fullgraph=False, backend="eager")
    def step():
        print("stepping")
        opt.step()
    return step
'''

DEFAULT_AND_MARKER = TRAINING + '''
def test_counts_every_break():
    train(compiled_opt_step)

@pytest.mark.max_graph_breaks(0, user_only=True)
def test_counts_only_mine():
    train(compiled_opt_step)
'''


def test_a_compiled_optimizer_steps_breaks_are_torchs_and_user_only_leaves_them_out(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_training=DEFAULT_AND_MARKER)
    result = run("-p", "no:logging", "--max-graph-breaks=0", "--nocompile-json=report.json")
    result.assert_outcomes(passed=1, failed=1)
    # The default stays: every break counts, torch's listed apart, with the way to leave them out.
    expect_lines(result, [
        "*_ test_counts_every_break _*",
        "* graph break* > max_graph_breaks(0) (from --max-graph-breaks)",
        "inside torch: * graph break* "
        "(counted; --nocompile-graph-breaks-user-only leaves them out)",
        "[1/*] graph break at */torch/*",
    ])
    assert "test_counts_only_mine" not in result.stdout.str().partition("short test summary")[2]
    report = json.loads((pytester.path / "report.json").read_text())
    tests = {test["nodeid"].partition("::")[2]: test for test in report["tests"]}
    for name, test in tests.items():
        events = test["graph_break_events"]
        assert events and all(event["inside_torch"] for event in events), (name, events)
        assert test["graph_breaks"] == len(events)  # the count is every break, as before
    assert tests["test_counts_every_break"]["cause"].startswith("graph break inside torch: ")
    assert "max_graph_breaks_user_only" not in tests["test_counts_every_break"]
    assert tests["test_counts_only_mine"]["max_graph_breaks_user_only"] is True
    assert tests["test_counts_only_mine"]["verdict"] == "within budget"


OPTION_AND_MARKER = TRAINING + '''
def test_counts_only_mine():
    train(compiled_opt_step)

def test_my_print_counts():
    train(compiled_step_that_prints)

@pytest.mark.max_graph_breaks(0, user_only=False)
def test_marker_counts_every_break():
    train(compiled_opt_step)
'''


@pytest.mark.parametrize("user_only", [["--nocompile-graph-breaks-user-only"],
                                       ["-o", "nocompile_graph_breaks_user_only=true"]],
                         ids=["option", "ini key"])
def test_the_option_or_ini_key_counts_only_the_users_graph_breaks(
        pytester: pytest.Pytester, run: RunPytest, user_only: list[str]) -> None:
    pytester.makepyfile(test_training=OPTION_AND_MARKER)
    result = run("-p", "no:logging", "--max-graph-breaks=0", "--nocompile-report", *user_only)
    result.assert_outcomes(passed=1, failed=2)
    expect_lines(result, [
        "*_ test_my_print_counts _*",
        "* graph break* > max_graph_breaks(0, user_only=True) (from --max-graph-breaks)",
        "[1/*] graph break at test_training.py:*",
        f"    reason: {PRINT_BREAK_REASON}",
    ])
    expect_lines(result, ["not counted (inside torch): * graph break*",
                          "[1/*] graph break at */torch/*"])
    expect_lines(result, [
        "*_ test_marker_counts_every_break _*",
        "* graph break* > max_graph_breaks(0) (marker on the test)",
        "inside torch: * graph break* (counted; user_only=True leaves them out)",
    ])
    result.stdout.fnmatch_lines(
        ["* user breaks<=0  within budget  test_training.py::test_counts_only_mine"])
