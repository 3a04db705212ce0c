"""Guard classes and stable reasons, on guards and graph breaks recorded from every torch minor
release 2.4-2.15: pure code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nocompile_testing import DATA, recorded_messages
from pytest_nocompile.features.baselines.reasons import (
    call_reasons,
    code_name,
    graph_break_kind,
    stable_path,
)
from pytest_nocompile.judge.guard_classes import classify, plain_names
from pytest_nocompile.vocabulary.events import parse_recompile_message, typed_bool_ids
from pytest_nocompile.vocabulary.graph_break_events import parse_graph_break_message

RECORDINGS = sorted(path.name for path in DATA.glob("torch-*-recompiles*.txt"))
GRAPH_BREAK_RECORDINGS = sorted(path.name for path in DATA.glob("torch-*-graph_breaks.txt"))

# What each recorded scenario's guard is (tests/data/record_messages.py's SCENARIOS), whatever torch
# wrote.
RECORDED_CLASSES = [
    (re.compile(r"^(L\['n'\]|n) == \d+$"), "python int", "n"),
    (re.compile(r"dtype mismatch"), "dtype", "x"),
    (re.compile(r"requires_grad mismatch"), "requires_grad", "x"),
    (re.compile(r"\['lr'\] == "), "python float", "self.param_groups[0]['lr']"),
    (re.compile(r"^___check_obj_id\((L\['self'\]|self),"), "object id", "self"),
    (re.compile(r"^___check_obj_id\((L\['args'\]\[0\]|args\[0\]),"), "object id", "args[0]"),
    (re.compile(r"got deallocated"), "deallocated object", None),
]


@pytest.mark.parametrize("recording", RECORDINGS)
def test_every_recorded_guard_has_its_class_and_subject(recording: str) -> None:
    seen = set()
    for message in recorded_messages(recording):
        for reason in parse_recompile_message(message)[3]:
            expected = next(((name, subject) for pattern, name, subject in RECORDED_CLASSES
                             if pattern.search(reason.guard)), None)
            assert expected is not None, (
                f"a recorded guard no row of this test expects: {reason.guard!r}")
            found = classify(reason.guard)
            assert found.name == expected[0], reason.guard
            if expected[1] is not None:
                assert found.subject == expected[1], reason.guard
            seen.add(found.name)
    assert seen >= ({"python float"} if "pre-2.5" in recording else {"python int", "python float"})


@pytest.mark.parametrize("guard, label", [
    ("tensor 'x' size mismatch at index 0. expected 2, actual 3", "size x dim 0"),
    ("tensor 'L['x']' size mismatch at index 1. expected 8, actual 16", "size x dim 1"),
    ("2 <= x.size()[0]", "size 0/1 x dim 0"),
    ("2 <= L['x'].size()[0]", "size 0/1 x dim 0"),
    ("tensor 'x' size mismatch at index 0. expected 1, actual 0", "size 0/1 x dim 0"),
    ("tensor 'x' size mismatch at index 0. expected 4, actual 1", "size 0/1 x dim 0"),
    ("tensor 'x' size mismatch at index 0. expected 10, actual 12", "size x dim 0"),
    ("x.size()[0] != 3", "size compared x dim 0"),
    ("L['x'].size()[1] == 3", "size compared x dim 1"),
    ("Ne(L['x'].size()[0], 3)", "size compared x dim 0"),  # torch 2.4
    ("Eq(L['x'].size()[1], 5)", "size compared x dim 1"),
    ("n == 0.1", "python float n"),
    ("G['LR'] == 0.001", "python float LR"),
    ("n == 1e-05", "python float n"),
    ("n == 2", "python int n"),
    ("b == True", "python bool b"),
    ("___check_obj_id(L['self'].training, 7685824)", "python bool self.training"),
    ("___check_obj_id(L['use_cache'], 7685824), type=<class 'bool'>", "python bool use_cache"),
    ("___check_obj_id(use_cache, 7685824), type=<class 'bool'>", "python bool use_cache"),
    ("s == 'a'", "python value s"),
    ("tensor 'x' stride mismatch at index 0. expected 3, actual 1", "stride x dim 0"),
    ("idx.stride()[0] == idx.size()[1]", "stride idx dim 0"),  # dynamic sizes' strides (torch 2.13)
    ("tensor 'x' rank mismatch. expected 1, actual 2", "tensor rank x"),
    ("tensor 'x' device mismatch. expected cpu, actual cuda:0", "device x"),
    ("tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU), "
     "actual DispatchKeySet(CPU, AutogradCPU)", "dispatch keys x"),
    ("expected type of 'x' to be a tensor type, ' but found <class 'torch.Tensor'>", "type x"),
    ("___check_type_id(L['x'], 94118640)", "type x"),
    ("GLOBAL_STATE changed: grad_mode", "global state grad_mode"),
    ("GLOBAL_STATE changed: autocast(cpu)_enabled", "global state autocast(cpu)_enabled"),
    ("___check_torch_function_mode_stack()", "global state torch_function_mode_stack"),
    ("___check_global_state()", "global state"),
    ("len(xs) == 1", "length xs"),
    ("___check_obj_id(L['opt'], 140410047607952), type=<class 'torch.optim.adam.Adam'>",
     "object id opt"),
    ("Cache line invalidated because L['self'] got deallocated", "deallocated object self"),
    ("___some_new_guard(x)", "other"),
])
def test_guards_of_each_class(guard: str, label: str) -> None:
    assert classify(guard).label == label


@pytest.mark.parametrize("first, second", [
    ("n == 0.1", "n == 0.2"),
    ("L['self'].param_groups[0]['lr'] == 0.003333", "self.param_groups[0]['lr'] == 0.01"),
    ("tensor 'x' size mismatch at index 0. expected 2, actual 3",
     "tensor 'x' size mismatch at index 0. expected 5, actual 9"),
    ("___check_obj_id(self, 1403), type=<class 'torch.optim.adam.Adam'>",
     "___check_obj_id(L['self'], 9999)"),
])
def test_a_new_value_or_torch_wording_leaves_the_class_and_subject(first: str, second: str) -> None:
    assert classify(first).label == classify(second).label


def test_a_fix_names_the_subject() -> None:
    assert classify("tensor 'x' size mismatch at index 1. expected 2, actual 3").fix == (
        "compile with dynamic=True, or call torch._dynamo.mark_dynamic(x, 1) before the first call")
    assert classify("self.param_groups[0]['lr'] == 0.01").fix == (
        "self.param_groups[0]['lr'] is a Python float that changes (a scheduled learning rate): "
        "hold it in a tensor, e.g. torch.tensor(0.01)")
    assert classify("___check_global_state()").fix.startswith(  # type: ignore[union-attr]
        "a global setting changed since the compile")
    assert (classify("n == 2").fix or "").startswith("n is a Python int that changes")
    assert classify("len(x) == 2").fix is None


def test_plain_names() -> None:
    assert (plain_names("L['self'].param_groups[0]['lr'] == G['LR']")
            == "self.param_groups[0]['lr'] == LR")


def _event(line: int, guard: str, filename: str = "test_step.py",
           phase: str = "call") -> dict[str, object]:
    return {"function": "scale", "filename": filename, "line": line, "phase": phase,
            "reasons": [{"guard": guard, "compile_id": "0/0"}]}


def test_a_moved_line_and_a_new_value_leave_a_reason_as_it_was() -> None:
    before = call_reasons({"recompile_events": [_event(4, "n == 0.1")]})
    assert before == ["recompile scale (test_step.py): python float n"]
    assert call_reasons({"recompile_events": [_event(40, "n == 0.7")]}) == before
    assert (call_reasons({"recompile_events": [_event(4, "n == 2")]})
            == ["recompile scale (test_step.py): python int n"])
    # Setup's and teardown's recompiles are not the test's: a baseline keeps what its counts count.
    assert call_reasons({"recompile_events": [_event(4, "n == 0.1", phase="setup")]}) == []


def test_code_names_are_qualified_from_the_source(tmp_path: Path) -> None:
    source = tmp_path / "model.py"
    source.write_text("class Net:\n    @staticmethod\n    @decorated\n    def forward(x):\n"
                      "        def inner(y):\n            return y\n        return x\n\n"
                      "def forward(x):\n    return x\n")
    # a decorated function's code starts at its first decorator
    assert code_name("forward", str(source), 2) == "Net.forward"
    assert code_name("forward", str(source), 4) == "Net.forward"
    assert code_name("inner", str(source), 5) == "Net.forward.<locals>.inner"
    assert code_name("forward", str(source), 9) == "forward"
    assert code_name("forward", str(tmp_path / "gone.py"), 9) == "forward"
    assert (code_name("torch_dynamo_resume_in_train_step_at_23", str(source), 30)
            == "train_step (resumed)")


def test_stable_paths() -> None:
    assert (stable_path("/opt/venv/lib/python3.12/site-packages/torch/optim/adam.py")
            == "torch/optim/adam.py")
    assert (stable_path("/usr/lib/python3/dist-packages/torch/optim/adam.py")
            == "torch/optim/adam.py")
    assert stable_path(str(Path.cwd() / "tests" / "test_x.py")) == "tests/test_x.py"
    assert stable_path("relative/test_x.py") == "relative/test_x.py"


@pytest.mark.parametrize("recording", GRAPH_BREAK_RECORDINGS)
def test_graph_break_kinds_carry_no_path_or_address(recording: str) -> None:
    version = tuple(int(part) for part in re.findall(r"\d+", recording)[:2])
    for message in recorded_messages(recording):
        event = parse_graph_break_message(message)
        kind = graph_break_kind(event.reason, event.graph_break_id)
        assert "/" not in kind and not re.search(r"0x[0-9a-f]+|\d{6,}", kind), kind
        # torch 2.9 on links a graph break's page, by its id
        linked = re.search(r"/gb/gb(\d+)\.html", message)
        assert event.graph_break_id == (f"GB{linked[1]}" if linked else None)
        if version >= (2, 11):  # where every recorded graph break has one
            assert linked is not None
        if linked:
            assert kind.endswith(f" [{event.graph_break_id}]")


def test_graph_break_reasons_name_the_function_and_file() -> None:
    event = {"filename": "test_step.py", "line": 7, "phase": "call",
             "reason": "Failed to trace builtin operator", "graph_break_id": "GB0059",
             "user_code": "test_step.py:7 in with_print: print('x')"}
    assert call_reasons({"graph_break_events": [event]}) == [
        "graph break in with_print (test_step.py): Failed to trace builtin operator [GB0059]"]
    moved = {**event, "line": 70, "user_code": "test_step.py:70 in with_print: print('x')"}
    assert (call_reasons({"graph_break_events": [moved]})
            == call_reasons({"graph_break_events": [event]}))
    other = {**event, "reason": "Data-dependent branching", "graph_break_id": "GB0170"}
    assert (call_reasons({"graph_break_events": [other]})
            != call_reasons({"graph_break_events": [event]}))


@pytest.mark.parametrize("guard, subject, held", [
    ("step == 0", "step", False),  # an argument of the compiled function
    ("L['epoch'] == 2", "epoch", False),
    ("self.step == 0", "self.step", True),  # an attribute: compiled again for every value
    ("L['self'].global_step == 4", "self.global_step", True),
    ("G['EPOCH'] == 1", "EPOCH", True),  # a global
    ("state['step'] == 3", "state['step']", True),
])
def test_an_int_counters_fix_depends_on_where_it_is_kept(guard: str, subject: str,
                                                         held: bool) -> None:
    from pytest_nocompile.judge.guard_classes import INT_ARGUMENT_FIX, INT_HELD_FIX

    classified = classify(guard)
    assert (classified.name, classified.subject) == ("python int", subject)
    assert classified.fix == (INT_HELD_FIX if held else INT_ARGUMENT_FIX).format(subject=subject)


@pytest.mark.parametrize("guard, subject", [
    ("use_cache == True", "use_cache"),
    ("___check_obj_id(L['self'].training, 7685824)", "self.training"),  # torch up to 2.6
    ("self.training == False", "self.training"),
])
def test_a_bool_flag_names_its_fix(guard: str, subject: str) -> None:
    assert (classify(guard).fix or "").startswith(f"{subject} is a Python bool flag: ")


# A bool argument's recompile on torch 2.4.1, as logged (the guard padded to 60 columns), in a
# process whose id(True) was 140001998565120 and id(False) 140001998565152.
BOOL_ON_2_4 = """Recompiling function forward in /tmp/t24bool.py:2
    triggered by the following guard failure(s):
    - ___check_obj_id(L['use_cache'], 140001998565120)            """
BOOL_IDS_ON_2_4 = (140001998565152, 140001998565120)


def test_an_identity_guard_on_a_bool_reads_as_the_bool_guard() -> None:
    message = typed_bool_ids(BOOL_ON_2_4, BOOL_IDS_ON_2_4)
    (reason,) = parse_recompile_message(message)[3]
    assert reason.guard == "___check_obj_id(L['use_cache'], 140001998565120), type=<class 'bool'>"
    found = classify(reason.guard)
    assert found.label == "python bool use_cache"
    assert (found.fix or "").startswith("use_cache is a Python bool flag: ")
    # A number that is neither True's nor False's id: the guard is left as torch wrote it.
    (reason,) = parse_recompile_message(typed_bool_ids(BOOL_ON_2_4, (1, 2)))[3]
    assert classify(reason.guard).label == "object id use_cache"


@pytest.mark.parametrize("guard", [
    "___check_obj_id(use_cache, 140001998565120), type=<class 'bool'>",  # torch 2.10 on types it
    "___check_obj_id(self, 140001998565120), type=Adam (",  # a repr over lines (2.10 to 2.12)
])
def test_a_typed_identity_guard_is_left_as_torch_wrote_it(guard: str) -> None:
    assert typed_bool_ids(guard, BOOL_IDS_ON_2_4) == guard
