"""The message parser, on recorded messages: no torch needed.

tests/data holds, for every torch minor release from 2.4 on, the messages
tests/data/record_messages.py recorded from that torch: recompiles (standard
and verbose), recompile-limit warnings and graph breaks, for the recorder's
scenarios. The tests over every recording check the facts the plugin relies
on, not one version's wording; the tests named after a version pin its exact
text.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from nocompile_testing import DATA, recorded_messages
from pytest_nocompile import GuardFailure, parse_recompile_message
from pytest_nocompile.vocabulary.events import (
    UnrecognisedMessage,
    event_from_message,
    parse_limit_warning,
)
from pytest_nocompile.vocabulary.graph_break_events import (
    NO_GRAPH_BREAK_REASON,
    parse_graph_break_message,
)


def _load_recorder() -> ModuleType:
    """tests/data/record_messages.py, for its scenario sources (it imports torch only when it
    records)."""
    spec = importlib.util.spec_from_file_location("record_messages", DATA / "record_messages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _load_recorder()


def scenario_line(source: str, text: str) -> int:
    """The 1-based line of ``text`` in a scenario source, as torch saw it in the file the recorder
    wrote."""
    (line,) = [number for number, code in enumerate(source.splitlines(), 1) if text in code]
    return line


def version_of(name: str) -> tuple[int, int]:
    """``torch-2.13-limit.txt`` -> (2, 13); the hand-made ``torch-pre-2.5-...`` file counts as
    2.4."""
    match = re.match(r"torch-(\d+)\.(\d+)-", name)
    return (int(match[1]), int(match[2])) if match else (2, 4)


def recordings(kind: str) -> list[str]:
    """The recorded files of one kind, every version, oldest first."""
    names = [path.name for path in DATA.glob(f"torch-*-{kind}.txt")]
    return sorted(names, key=lambda name: (version_of(name), name))


def capabilities(name: str) -> dict:
    return json.loads(
        (DATA / f"torch-{'.'.join(map(str, version_of(name)))}-capabilities.json").read_text())


def names_variable(guard: str, variable: str) -> bool:
    """Whether ``guard`` names ``variable``: ``n == 2``, ``L['n'] == 2`` and ``tensor 'x' ...`` all
    name theirs."""
    return re.search(rf"(?<![\w]){re.escape(variable)}(?![\w])", guard) is not None


# The recompile scenarios' code objects and the variables their guards name. The recorder's
# scale and <lambda> are f and g in the torch 2.13 recording, made by an earlier script that
# also recompiled h2 (an int argument) in the same process.
SCENARIO_VARIABLES = {
    "scale": ("n", "x"), "f": ("n", "x"), "h2": ("n",),
    "<lambda>": ("x",), "g": ("x",),
    "step": ("lr", "self"), "wrapper": ("args",),
}
SAME_SCENARIO = {"f": "scale", "g": "<lambda>"}
SCENARIO_LINES = {
    "scale": scenario_line(RECORDER.SCENARIOS, "def scale("),
    "<lambda>": scenario_line(RECORDER.SCENARIOS, "torch.compile(lambda x: x + 1"),
}
TORCH_FILES = {"step": "torch/optim/adam.py", "wrapper": "torch/optim/optimizer.py"}
LIMIT_LAMBDA_LINES = {scenario_line(RECORDER.LIMIT_SCENARIO, f"{name} = torch.compile(lambda")
                      for name in ("h", "d")}
# Each graph break scenario: its line, the function it is in and the code there.
GRAPH_BREAKS = {
    scenario_line(RECORDER.GRAPH_BREAK_SCENARIOS, code): (function, code)
    for function, code in (
        ("with_print", 'print("side effect")'),
        ("with_graph_break", "torch._dynamo.graph_break()"),
        ("with_builtin", "os.getpid()"),
        ("with_branch", "if x.sum() > 0:"),
    )
}


# -- every recompile message of every version ---------------------------------


def check_recompile_message(name: str, message: str) -> None:
    """The facts the plugin reports from one recompile message, whatever torch wrote it."""
    function, filename, line, reasons = parse_recompile_message(message)
    assert function in SCENARIO_VARIABLES, function
    if Path(filename).name == "record_scenarios.py":  # where the recorder put its scenarios
        assert line == SCENARIO_LINES[function]
    elif function not in TORCH_FILES:
        assert filename.endswith(".py") and line > 0, (filename, line)
    else:
        assert filename.endswith(TORCH_FILES[function]) and line > 0, (filename, line)
    assert reasons
    for reason in reasons:
        guard = reason.guard
        assert (guard.strip()
                and all(text == text.rstrip() for text in guard.splitlines())), repr(guard)
        assert not guard.startswith("- ") and not re.match(r"\d+/\d+:", guard), guard
        assert not re.search(r"\s{2,}# ", guard), guard  # torch's source comment is kept apart
        assert any(names_variable(guard, variable)
                   for variable in SCENARIO_VARIABLES[function]), (function, guard)
        if version_of(name) >= (2, 5):
            assert (reason.compile_id is not None
                    and re.fullmatch(r"\d+/\d+", reason.compile_id)), reason
        else:
            assert reason.compile_id is None
        if reason.source is not None:
            assert reason.source.endswith(f" in {function}"), reason.source
            # Every guard with a source has a place: torch's user stack trace (2.11+) or the source
            # comment (2.9, 2.10).
            assert reason.location is not None, reason
            if Path(filename).name == "record_scenarios.py":
                assert reason.location.filename == filename, reason.location
        if reason.location is not None:
            code = reason.location.code
            assert (reason.location.function == function
                    and reason.location.line >= line), reason.location
            assert code and code == code.strip(), reason.location


@pytest.mark.parametrize("name", recordings("recompiles") + recordings("recompiles_verbose"))
def test_every_recorded_recompile_message_parses(name: str) -> None:
    messages = recorded_messages(name)
    assert messages
    for message in messages:
        check_recompile_message(name, message)


def _scenario_reasons(name: str) -> dict[str, list[list[str]]]:
    """function (by its name in the recorder) -> the guards of each of its recompile messages in one
    file."""
    found: dict[str, list[list[str]]] = {}
    for message in recorded_messages(name):
        function, _, _, reasons = parse_recompile_message(message)
        found.setdefault(SAME_SCENARIO.get(function, function), []).append(
            [reason.guard for reason in reasons])
    return found


@pytest.mark.parametrize("name", [
    n for n in recordings("recompiles") + recordings("recompiles_verbose") if "pre-2.5" not in n])
def test_every_recompile_scenario_is_recorded_and_parsed(name: str) -> None:
    found = _scenario_reasons(name)
    # A Python int argument: one guard, on n, for the value it had.
    assert ([["n"]] == [[v for v in ("n", "x") if names_variable(g, v)] for g in found["scale"][0]]
            and "2" in found["scale"][0][0])
    # A dtype change: the new entry's dtype guard on x, then the first entry's n guard.
    assert any(len(guards) == 2 and "dtype" in guards[0] and names_variable(guards[0], "x")
               and names_variable(guards[1], "n") for guards in found["scale"])
    # A requires_grad flip.
    assert any("requires_grad" in g and names_variable(g, "x") for guards in found["<lambda>"]
               for g in guards)
    # A float LR changed by a scheduler: the guard names the lr and holds its old value.
    assert any(names_variable(g, "lr") and "0.0033" in g for guards in found["step"]
               for g in guards)
    # The optimizer that was deallocated: its identity guards, on the wrapper's args and on step's
    # self.
    assert any(names_variable(g, "args") for guards in found["wrapper"] for g in guards)
    assert any(g.startswith("___check_obj_id(") and names_variable(g, "self")
               for guards in found["step"] for g in guards)


def _shape(name: str) -> list[tuple[str, int, list[tuple[str | None, str]]]]:
    """Each message's function, line, and its guards with object ids masked (they differ between
    runs)."""
    shapes = []
    for message in recorded_messages(name):
        function, _, line, reasons = parse_recompile_message(message)
        shapes.append((function, line,
                       [(r.compile_id, re.sub(r"\d{6,}", "<id>", r.guard)) for r in reasons]))
    return shapes


@pytest.mark.parametrize("name", recordings("recompiles_verbose"))
def test_verbose_format_gives_the_same_reasons_as_the_standard_one(name: str) -> None:
    standard = name.replace("_verbose", "")
    assert ("guard 0 failures:" in (DATA / name).read_text()
            and "guard 0 failures:" not in (DATA / standard).read_text())
    assert _shape(name) == _shape(standard)


# -- every recompile-limit warning ---------------------------------------------


@pytest.mark.parametrize("name", recordings("limit"))
def test_every_recorded_limit_warning_parses(name: str) -> None:
    facts = capabilities(name)
    limit_hit = facts["recompile_limit_hit"]
    messages = recorded_messages(name)
    assert messages, "every torch goes past the limit on the dtype scenario"
    for message in messages:
        hit = parse_limit_warning(message)
        assert hit is not None, message
        # The config's name as this torch has it: cache_size_limit until it was renamed
        # recompile_limit.
        expected_name = ("recompile_limit" if facts["config.recompile_limit"]["exists"]
                         else "cache_size_limit")
        assert (hit.limit_name, hit.limit) == (expected_name, limit_hit["value"]) == (
            limit_hit["config"][0], 2)
        assert hit.function.startswith("'<lambda>' (") and hit.message == message
        where = re.search(r"record_scenarios\.py:(\d+)\)$", hit.function)
        assert where is not None and int(where[1]) in LIMIT_LAMBDA_LINES, hit.function


# -- every graph break ----------------------------------------------------------


@pytest.mark.parametrize("name", recordings("graph_breaks"))
def test_every_recorded_graph_break_parses(name: str) -> None:
    messages = recorded_messages(name)
    seen = set()
    for message in messages:
        event = parse_graph_break_message(message, "setup")
        assert (Path(event.filename).name, event.phase, event.message) == (
            "record_scenarios.py", "setup", message)
        assert event.line in GRAPH_BREAKS, event.line
        seen.add(event.line)
        function, code = GRAPH_BREAKS[event.line]
        assert event.user_code is not None
        assert (event.user_code.filename, event.user_code.line, event.user_code.function,
                event.user_code.code) == (event.filename, event.line, function, code)
        if version_of(name) >= (2, 6):
            assert event.reason.strip() and event.reason != NO_GRAPH_BREAK_REASON
            assert not event.reason.startswith(("Reason:", "Graph Break Reason:",
                                                "Encountered graph break",
                                                "User code traceback")), event.reason
        else:  # torch 2.4 and 2.5 keep the reason out of the message
            assert event.reason == NO_GRAPH_BREAK_REASON
        if version_of(name) >= (2, 7):
            assert event.explanation, event
    expected = set(GRAPH_BREAKS)
    # 2.4 and 2.5 log no graph_breaks record for a data-dependent branch
    if version_of(name) < (2, 6):
        expected.discard(scenario_line(RECORDER.GRAPH_BREAK_SCENARIOS, "if x.sum() > 0:"))
    assert seen == expected


# -- the recordings themselves -----------------------------------------------------


def test_every_version_is_recorded_with_every_kind() -> None:
    versions: set[str] = set()
    for path in DATA.glob("torch-*-capabilities.json"):
        version = path.name.split("-")[1]
        versions.add(version)
        assert json.loads(path.read_text())["torch_version"].startswith(f"{version}."), path.name
    assert {"2.4", "2.13"} <= versions
    for version in versions:
        for kind in RECORDER.KINDS[:-1]:
            path = DATA / f"torch-{version}-{kind}.txt"
            assert path.exists() or kind in RECORDER.PARTIAL_KINDS, path.name
            header = (path.read_text().split("=====", 1)[0] if path.exists()
                      else f"# torch {version}.")
            assert (header.startswith(f"# torch {version}.") and "/work/" not in header
                    and "/tmp/" not in header), path.name
    for kind in RECORDER.PARTIAL_KINDS:
        assert {path.name.split("-")[1]
                for path in DATA.glob(f"torch-*-{kind}.txt")} >= {"2.4", "2.13"}, kind


# -- exact wording of some versions ------------------------------------------------


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
    assert reasons[-1] == GuardFailure("Cache line invalidated because L['self'] got deallocated",
                                       "5/2")
    assert [r.compile_id for r in reasons] == ["5/1", "5/0", "5/2"]


def test_verbose_groups_2_13() -> None:
    assert (len(recorded_messages("torch-2.13-recompiles.txt"))
            == len(recorded_messages("torch-2.13-recompiles_verbose.txt")) == 9)
    assert "guard 1 failures:" in recorded_messages("torch-2.13-recompiles_verbose.txt")[1]


def test_pre_2_5_format_without_compile_ids() -> None:
    (message,) = recorded_messages("torch-pre-2.5-recompiles.txt")
    function, _, line, reasons = parse_recompile_message(message)
    assert (function, line) == ("step", 191)
    assert reasons == (GuardFailure("L['self'].param_groups[0]['lr'] == 0.003333333333333333"),)


def test_2_4_guards_keep_torch_words_without_padding() -> None:
    messages = recorded_messages("torch-2.4-recompiles.txt")
    assert [r.guard for r in parse_recompile_message(messages[1])[3]] == [
        "tensor 'L['x']' dtype mismatch. expected Float, actual Double", "L['n'] == 2"]
    verbose = recorded_messages("torch-2.4-recompiles_verbose.txt")
    assert [r.guard for r in parse_recompile_message(verbose[1])[3]] == [
        "tensor 'L['x']' dtype mismatch. expected Float, actual Double", "L['n'] == 2"]


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
    (wrapper,) = [m for m in messages if m.startswith("Recompiling function wrapper")
                  and "deallocated" not in m]
    _, _, _, reasons = parse_recompile_message(wrapper)
    assert len(reasons) == 1
    (reason,) = reasons
    assert reason.compile_id == "3/0"
    assert reason.guard.startswith("___check_obj_id(args[0], ")
    assert reason.guard.splitlines()[1:3] == ["Parameter Group 0", "    amsgrad: False"]
    assert reason.guard.endswith("\n)")
    assert reason.source == "self = cast(Optimizer, self)  # optim/optimizer.py:515 in wrapper"
    assert reason.location is not None and reason.location.code == "self = cast(Optimizer, self)"


def test_limit_warning_names_2_4_and_2_13() -> None:
    (old,) = [parse_limit_warning(m) for m in recorded_messages("torch-2.4-limit.txt")]
    new = [parse_limit_warning(m) for m in recorded_messages("torch-2.13-limit.txt")]
    assert old is not None and (old.limit_name, old.limit) == ("cache_size_limit", 2)
    assert new and all(hit is not None and (hit.limit_name, hit.limit) == ("recompile_limit", 2)
                       for hit in new)


def test_graph_break_2_4_has_its_place_but_no_reason() -> None:
    event = parse_graph_break_message(recorded_messages("torch-2.4-graph_breaks.txt")[0])
    assert (Path(event.filename).name, event.line, event.reason, event.explanation) == (
        "record_scenarios.py", 7, NO_GRAPH_BREAK_REASON, None)
    assert event.user_code is not None and (event.user_code.function, event.user_code.code) == (
        "with_print", 'print("side effect")')


def test_graph_break_2_4_takes_the_reason_from_a_formatted_traceback() -> None:
    # What a logging.Formatter makes of torch 2.4's record: the message, then the exception it was
    # logged with.
    message = recorded_messages("torch-2.4-graph_breaks.txt")[0].rstrip("\n") + (
        "\nTraceback (most recent call last):\n"
        '  File "/site-packages/torch/_dynamo/symbolic_convert.py", line 600, in wrapper\n'
        "    return inner_fn(self, inst)\n"
        "torch._dynamo.exc.Unsupported: builtin: "
        "print [<class 'torch._dynamo.variables.constant.ConstantVariable'>] False\n"
    )
    event = parse_graph_break_message(message)
    assert (event.line, event.reason) == (
        7, "Unsupported: builtin: "
           "print [<class 'torch._dynamo.variables.constant.ConstantVariable'>] False")
    assert event.user_code is not None and event.user_code.function == "with_print"


def test_graph_break_2_6_reason_label() -> None:
    event = parse_graph_break_message(recorded_messages("torch-2.6-graph_breaks.txt")[3])
    assert (event.line, event.reason, event.explanation) == (22, "Data-dependent jump", None)


def test_graph_break_2_13_reason_and_explanation() -> None:
    event = parse_graph_break_message(recorded_messages("torch-2.13-graph_breaks.txt")[0])
    assert (event.line, event.reason) == (7, "Failed to trace builtin operator")
    assert event.explanation is not None and event.explanation.startswith(
        "Dynamo does not know how to trace builtin operator `print`")


def test_graph_break_without_traceback() -> None:
    event = parse_graph_break_message("Graph break in user code at /x/test_a.py:5\n"
                                      "Graph Break Reason: Failed to trace builtin operator")
    assert (event.filename, event.line, event.reason, event.user_code) == (
        "/x/test_a.py", 5, "Failed to trace builtin operator", None)


@pytest.mark.parametrize("text",
                         ["torchdynamo start compiling f", "Graph break: from user code at:\n", ""])
def test_not_a_graph_break_message(text: str) -> None:
    with pytest.raises(UnrecognisedMessage):
        parse_graph_break_message(text)


HINT = ("torch.compile considers integer attributes of the nn.Module to be static. "
        "If you are observing recompilation, you might want to make this integer dynamic using "
        "torch._dynamo.config.allow_unspec_int_on_nn_module = True, "
        "or convert this integer into a tensor.")


@pytest.mark.parametrize("after_guard", [
    "                                        ",  # torch 2.8: after the padded guard
    # 2.10
    "                                        # return x * self.factor  # "
    "t/test_hazards_user.py:16 in forward ",
], ids=["2.8", "2.10"])
def test_a_hint_after_a_guard_is_kept_apart(after_guard: str) -> None:
    # What torch 2.8 and 2.10 print for a guard on an nn.Module int attribute (from runs of those
    # versions).
    message = (
        "Recompiling function forward in /tmp/t/test_hazards_user.py:15\n"
        "    triggered by the following guard failure(s):\n"
        f"    - 0/0: self.factor == 2{after_guard}(HINT: {HINT})"
    )
    (reason,) = parse_recompile_message(message)[3]
    assert (reason.compile_id, reason.guard, reason.hint) == ("0/0", "self.factor == 2", HINT)
    if "#" in after_guard:
        assert reason.location is not None
        assert (reason.location.filename, reason.location.line, reason.location.function,
                reason.location.code) == (
            "/tmp/t/test_hazards_user.py", 16, "forward", "return x * self.factor")


def test_not_a_recompile_message() -> None:
    with pytest.raises(UnrecognisedMessage):
        parse_recompile_message("torchdynamo start compiling f")


def test_event_keeps_phase_and_context() -> None:
    event = event_from_message(recorded_messages("torch-2.13-recompiles.txt")[0], "setup", "0/1",
                               None, "worker")
    assert (event.function, event.phase, event.compile_id, event.thread) == (
        "f", "setup", "0/1", "worker")
    assert event.guards == ("n == 2",)


def test_limit_warning() -> None:
    text = (
        "torch._dynamo hit config.recompile_limit (8)\n   function: 'h2' (/tmp/rec/rec.py:34)\n"
        "   last reason: 7/7: n == 6\n"
        "To log all recompilation reasons, use TORCH_LOGS=\"recompiles\"."
    )
    hit = parse_limit_warning(text)
    assert hit is not None
    assert (hit.limit_name, hit.limit, hit.function) == (
        "recompile_limit", 8, "'h2' (/tmp/rec/rec.py:34)")
    assert parse_limit_warning("torchdynamo start compiling") is None


def test_events_module_does_not_import_torch() -> None:
    import pytest_nocompile.vocabulary.events as events_module

    tree = ast.parse(open(events_module.__file__).read())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.startswith("torch") for name in imported)
