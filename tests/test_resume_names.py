"""dynamo's resume functions (the code it runs after a graph break), named as users know them: pure
code, no torch."""

from __future__ import annotations

import sys

import pytest

from nocompile_testing import BudgetedRecord, judge_record
from pytest_nocompile.features.baselines.baseline import explain_rise
from pytest_nocompile.observe.user_code import find_user_code
from pytest_nocompile.output.report import explain
from pytest_nocompile.vocabulary.events import (
    CodeLocation,
    RecompileLimitHit,
    event_from_message,
    recompile_event,
    resumed_function,
)
from pytest_nocompile.vocabulary.kinds import RECOMPILES
from pytest_nocompile.vocabulary.resume_names import ResumePoint, resume_point, user_function

# torch 2.13's message for a recompile of train_step's code after its graph break at line 22.
RESUME_RECOMPILE = """\
Recompiling function torch_dynamo_resume_in_train_step_at_22 in /work/lib/trainlib.py:22
    triggered by the following guard failure(s):
    - 1/0: scale == 2                                               # return z * scale  # \
lib/trainlib.py:24 in torch_dynamo_resume_in_train_step_at_22
    - User stack trace:
    -   File "/work/lib/trainlib.py", line 24, in torch_dynamo_resume_in_train_step_at_22
    -     return z * scale"""


@pytest.mark.parametrize(("name", "point"), [
    ("torch_dynamo_resume_in_train_step_at_22", ResumePoint("train_step", 22)),
    # the last "_at_N" is the line
    ("torch_dynamo_resume_in_look_at_3_at_22", ResumePoint("look_at_3", 22)),
    ("torch_dynamo_resume_in_<lambda>_at_7", ResumePoint("<lambda>", 7)),
    ("torch_dynamo_resume_in_forward_at_1234", ResumePoint("forward", 1234)),
    # a resume function of a resume function, should a torch name it after the inner one: the user's
    # function, the latest line
    ("torch_dynamo_resume_in_torch_dynamo_resume_in_step_at_5_at_9", ResumePoint("step", 9)),
])
def test_a_resume_functions_name_gives_the_users_function_and_the_graph_breaks_line(
        name: str, point: ResumePoint) -> None:
    assert resume_point(name) == point
    assert user_function(name) == point.function


@pytest.mark.parametrize("name", [
    "train_step", "", "torch_dynamo_resume_in_", "torch_dynamo_resume_in_f_at_",
    "torch_dynamo_resume_in_f_at_x", "torch_dynamo_resume_in__at_3", "<graph break in train_step>",
    "__resume_at_30_2", "torch_dynamo_resume_in_f_at_3 ",
])
def test_any_other_name_is_no_resume_function_and_shown_as_is(name: str) -> None:
    assert resume_point(name) is None
    assert user_function(name) == name


# The usual fix of the int guard each recompile below fails.
SCALE_FIX = ("scale is a Python int that changes (as a step or epoch counter does): compile with "
    "dynamic=True, or pass it as a tensor, e.g. torch.tensor(scale); by default dynamo "
    "makes an int argument dynamic after one recompile")


def test_a_recompile_of_a_resume_function_names_the_function_and_its_graph_break() -> None:
    event = event_from_message(RESUME_RECOMPILE)
    # torch's name, kept for the JSON report
    assert event.function == "torch_dynamo_resume_in_train_step_at_22"
    assert event.code_name == (
        "train_step (resumed after the graph break at /work/lib/trainlib.py:22)")
    text = explain(RECOMPILES, "1 recompile > max_recompiles(0)", [event], (), ())
    assert text.splitlines() == [
        "1 recompile > max_recompiles(0)",
        "[1/1] recompiled train_step (resumed after the graph break at /work/lib/trainlib.py:22)",
        "    guard failed: 1/0: scale == 2",
        "      guarded at: /work/lib/trainlib.py:24 in train_step: return z * scale",
        f"      usual fix: {SCALE_FIX}",
    ]


def test_a_baseline_failure_names_a_resume_functions_user_function_too() -> None:
    record = BudgetedRecord()
    record.start_call()
    record.add(recompile_event(RESUME_RECOMPILE, compile_id="1/1"))
    record.end_call()
    assert explain_rise(judge_record(record), ["recompiles"]) == [
        "    recompiled train_step (resumed after the graph break at /work/lib/trainlib.py:22): "
        "guard failed: 1/0: scale == 2",
        f"        usual fix: {SCALE_FIX}",
    ]


def test_a_recompile_of_any_other_function_is_named_as_before() -> None:
    event = event_from_message(RESUME_RECOMPILE.replace("torch_dynamo_resume_in_train_step_at_22",
                                                        "train_step"))
    assert event.code_name == "train_step"
    assert event.code_place == "train_step (/work/lib/trainlib.py:22)"


def test_a_malformed_resume_name_is_shown_as_torch_wrote_it() -> None:
    event = event_from_message(RESUME_RECOMPILE.replace("torch_dynamo_resume_in_train_step_at_22",
                                                        "torch_dynamo_resume_in_train_step_at_"))
    assert event.code_name == "torch_dynamo_resume_in_train_step_at_"
    assert event.code_place == "torch_dynamo_resume_in_train_step_at_ (/work/lib/trainlib.py:22)"
    assert resumed_function(event.message) is None


def test_the_recompiled_users_function_is_read_from_the_header_only() -> None:
    assert resumed_function(RESUME_RECOMPILE) == ("/work/lib/trainlib.py", "train_step")
    assert resumed_function(RESUME_RECOMPILE.replace("_resume_in_train_step_at_22", "_x")) is None
    assert resumed_function("Recompiling function f in a.py:3\n"
                            "  - torch_dynamo_resume_in_g_at_4") is None
    assert resumed_function("torch_dynamo_resume_in_g_at_4") is None  # no header: nothing to read


@pytest.mark.parametrize(("function", "shown"), [
    ("'torch_dynamo_resume_in_train_step_at_22' (/work/lib/trainlib.py:22)",
     "train_step (resumed after the graph break at /work/lib/trainlib.py:22)"),
    ("'scale' (/work/lib/trainlib.py:5)", "'scale' (/work/lib/trainlib.py:5)"),
    ("?", "?"),
    # no place: as is
    ("'torch_dynamo_resume_in_train_step_at_22'", "'torch_dynamo_resume_in_train_step_at_22'"),
])
def test_a_limit_hit_names_a_resume_functions_user_function(function: str, shown: str) -> None:
    assert RecompileLimitHit("recompile_limit", 8, function, "").function_name == shown


# The caller's line, for a recompile after a graph break: the function's own frame (stopped at its
# graph break) is passed over. Frames of this test file are user code.
def train_step(resumed: tuple[str, str] | None) -> CodeLocation | None:
    return find_user_code(sys._getframe(), resumed)


def torch_dynamo_resume_in_train_step_at_80(resumed: tuple[str, str]) -> CodeLocation | None:
    return train_step(resumed)  # a resume function's frame is the same function's too


def caller(resumed: tuple[str, str] | None) -> CodeLocation | None:
    return train_step(resumed)  # the call that brought the new value


def test_after_a_graph_break_the_user_code_is_the_caller_of_the_resumed_function() -> None:
    here = caller(None)
    assert here is not None and here.function == "train_step"  # no resume: the innermost user frame
    resumed = (__file__, "train_step")
    found = caller(resumed)
    assert found is not None and (found.function, found.code) == (
        "caller", "return train_step(resumed)  # the call that brought the new value")
    found = torch_dynamo_resume_in_train_step_at_80(resumed)
    assert found is not None and found.function == (
        "test_after_a_graph_break_the_user_code_is_the_caller_of_the_resumed_function")
    # Another file's function of the same name is not the resumed one.
    found = caller(("/elsewhere/trainlib.py", "train_step"))
    assert found is not None and found.function == "train_step"
