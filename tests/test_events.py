"""The message parser, on recorded messages: no torch needed."""

from __future__ import annotations

import ast

import pytest

from nocompile_testing import DATA, recorded_messages
from pytest_nocompile import GuardFailure, parse_recompile_message
from pytest_nocompile.events import UnrecognisedMessage, event_from_message, parse_limit_warning


def test_float_lr_message_2_13() -> None:
    lr_message = recorded_messages("torch-2.13-recompiles.txt")[3]
    function, filename, line, reasons = parse_recompile_message(lr_message)
    assert (function, line) == ("step", 214)
    assert filename.endswith("torch/optim/adam.py")
    assert len(reasons) == 1
    reason = reasons[0]
    assert reason.compile_id == "5/0"
    assert reason.guard == "self.param_groups[0]['lr'] == 0.003333333333333333"
    assert reason.source == "for group in self.param_groups:  # optim/adam.py:229 in step"
    assert reason.location is not None
    assert (reason.location.line, reason.location.function) == (229, "step")
    assert reason.location.code == "for group in self.param_groups:"


def test_several_cache_entries_give_one_reason_each_2_13() -> None:
    dtype_message = recorded_messages("torch-2.13-recompiles.txt")[1]
    _, _, _, reasons = parse_recompile_message(dtype_message)
    assert [(r.compile_id, r.guard) for r in reasons] == [
        ("0/1", "tensor 'x' dtype mismatch. expected Float, actual Double"),
        ("0/0", "n == 2"),
    ]
    assert reasons[0].location is None and reasons[1].location is not None


def test_deallocation_message_2_13() -> None:
    dealloc_message = recorded_messages("torch-2.13-recompiles.txt")[7]
    function, _, _, reasons = parse_recompile_message(dealloc_message)
    assert function == "step"
    assert reasons[-1] == GuardFailure("Cache line invalidated because L['self'] got deallocated", "5/2")
    assert [r.compile_id for r in reasons] == ["5/1", "5/0", "5/2"]


def test_verbose_format_matches_standard_guards_2_13() -> None:
    standard = [parse_recompile_message(m) for m in recorded_messages("torch-2.13-recompiles.txt")]
    verbose = [parse_recompile_message(m) for m in recorded_messages("torch-2.13-recompiles_verbose.txt")]
    assert len(standard) == len(verbose) == 9
    # Object ids differ between the two recording runs; compare the rest.
    def shape(parsed):
        function, _, line, reasons = parsed
        return function, line, [(r.compile_id, r.guard.split("(")[0]) for r in reasons]

    assert [shape(p) for p in verbose] == [shape(p) for p in standard]
    assert "guard 1 failures:" in recorded_messages("torch-2.13-recompiles_verbose.txt")[1]


def test_pre_2_5_format_without_compile_ids() -> None:
    (message,) = recorded_messages("torch-pre-2.5-recompiles.txt")
    function, _, line, reasons = parse_recompile_message(message)
    assert (function, line) == ("step", 191)
    assert reasons == (GuardFailure("L['self'].param_groups[0]['lr'] == 0.003333333333333333"),)


@pytest.mark.skipif(not (DATA / "torch-2.11-recompiles.txt").exists(), reason="no torch 2.11 recording")
def test_every_2_11_message_parses_with_compile_ids() -> None:
    messages = recorded_messages("torch-2.11-recompiles.txt")
    assert messages
    for message in messages:
        _, _, _, reasons = parse_recompile_message(message)
        assert reasons and all(r.compile_id for r in reasons), message
    guards = [r.guard for m in messages for r in parse_recompile_message(m)[3]]
    assert any("param_groups[0]['lr']" in guard for guard in guards)


def test_multi_line_guard_2_11_is_one_reason() -> None:
    messages = recorded_messages("torch-2.11-recompiles.txt")
    (wrapper,) = [m for m in messages if m.startswith("Recompiling function wrapper") and "deallocated" not in m]
    _, _, _, reasons = parse_recompile_message(wrapper)
    assert len(reasons) == 1
    (reason,) = reasons
    assert reason.compile_id == "3/0"
    assert reason.guard.startswith("___check_obj_id(args[0], ")
    assert reason.guard.splitlines()[1:3] == ["Parameter Group 0", "    amsgrad: False"]
    assert reason.guard.endswith("\n)")
    assert reason.source == "self = cast(Optimizer, self)  # optim/optimizer.py:515 in wrapper"
    assert reason.location is not None and reason.location.code == "self = cast(Optimizer, self)"


def test_every_recorded_message_parses() -> None:
    for name in sorted(path.name for path in DATA.glob("*.txt")):
        for message in recorded_messages(name):
            assert parse_recompile_message(message)[3], (name, message)


def test_not_a_recompile_message() -> None:
    with pytest.raises(UnrecognisedMessage):
        parse_recompile_message("torchdynamo start compiling f")


def test_event_keeps_phase_and_context() -> None:
    event = event_from_message(recorded_messages("torch-2.13-recompiles.txt")[0], "setup", "0/1", None, "worker")
    assert (event.function, event.phase, event.compile_id, event.thread) == ("f", "setup", "0/1", "worker")
    assert event.guards == ("n == 2",)


def test_limit_warning() -> None:
    text = (
        "torch._dynamo hit config.recompile_limit (8)\n   function: 'h2' (/tmp/rec/rec.py:34)\n"
        "   last reason: 7/7: n == 6\nTo log all recompilation reasons, use TORCH_LOGS=\"recompiles\"."
    )
    hit = parse_limit_warning(text)
    assert hit is not None
    assert (hit.limit_name, hit.limit, hit.function) == ("recompile_limit", 8, "'h2' (/tmp/rec/rec.py:34)")
    assert parse_limit_warning("torchdynamo start compiling") is None


def test_events_module_does_not_import_torch() -> None:
    import pytest_nocompile.events as events_module

    tree = ast.parse(open(events_module.__file__).read())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.startswith("torch") for name in imported)
