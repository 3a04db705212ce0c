"""A module compiled whole is named as the user knows it: its class's forward, compiled at the
user's line, and its arguments by the forward's parameter names, not by dynamo's wrapper ``inner``
and its ``args[0]`` (issue 35)."""

from __future__ import annotations

import json

import pytest

from nocompile_testing import PRINT_BREAK_REASON, TORCH, RunPytest, expect_lines, recorded_messages
from pytest_nocompile.features.child_events.child_lines import BadLine, ChildLine
from pytest_nocompile.features.contracts.rank_comparison import summary
from pytest_nocompile.record.process_events import ProcessEvents
from pytest_nocompile.record.snapshot import ProcessSnapshot
from pytest_nocompile.vocabulary.events import (
    CodeLocation,
    CompileEvent,
    RecompileEvent,
    event_from_message,
)
from pytest_nocompile.vocabulary.module_names import CompiledModule, module_from_dict

MODULES = '''
import pytest, torch
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)

class Prints(nn.Module):
    def forward(self, x):
        print("side effect")
        return x + 1

pytestmark = pytest.mark.max_recompiles(0)

def test_sequential():
    model = torch.compile(nn.Sequential(nn.Linear(4, 4), nn.ReLU()),  # compiled here
                          backend="eager")
    model(torch.ones(2, 4))
    model(torch.ones(2, 4, requires_grad=True))  # recompiles

def test_block():
    model = torch.compile(Block(), backend="eager")  # compiled here
    model(torch.ones(2, 4))
    model(torch.ones(2, 4, requires_grad=True))  # recompiles

def test_module_compile():
    block = Block()
    block.compile(backend="eager")  # compiled here
    block(torch.ones(2, 4))
    block(torch.ones(2, 4, requires_grad=True))  # recompiles

@pytest.mark.max_graph_breaks(0)
def test_graph_break():
    model = torch.compile(nn.Sequential(nn.Linear(4, 4), Prints()),  # compiled here
                          backend="eager")
    model(torch.ones(2, 4))
'''


def _line(source: list[str], text: str, test: str) -> int:
    """The number of the first line holding ``text`` in the function ``test``."""
    start = next(index for index, line in enumerate(source) if f"def {test}(" in line)
    return next(index for index in range(start, len(source)) if text in source[index]) + 1


def test_a_module_compiled_whole_is_named_by_its_class_and_compile_line(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    source = pytester.makepyfile(test_modules=MODULES).read_text().splitlines()
    result = run("-p", "no:logging", "--nocompile-json=report.json")
    result.assert_outcomes(failed=4)

    def compiled(test: str) -> int:
        return _line(source, "# compiled here", test)

    def recompiles(test: str) -> int:
        return _line(source, "# recompiles", test)

    # torch's own forward: dynamo compiled its wrapper, whose args[0] (L['args'][0] up to torch 2.6)
    # is the forward's input.
    expect_lines(result, [
        "*_ test_sequential _*",
        "1 recompile > max_recompiles(0) (marker on module test_modules.py)",
        "[1/1] recompiled Sequential.forward (compiled at "
        f"test_modules.py:{compiled('test_sequential')})",
        "    guard failed: 0/0: tensor 'input' requires_grad mismatch. expected requires_grad=0",
        "    torch's names: *args*[0] for input (dynamo compiled its wrapper around the module)",
        f"    triggered by: test_modules.py:{recompiles('test_sequential')} in test_sequential: "
        "model(torch.ones(2, 4, requires_grad=True))  # recompiles",
    ])
    # The user's own forward: dynamo names its argument as the user does, so there is nothing to
    # rename.
    for test in ("test_block", "test_module_compile"):
        call = "model" if test == "test_block" else "block"
        expect_lines(result, [
            f"*_ {test} _*",
            "1 recompile > max_recompiles(0) (marker on module test_modules.py)",
            f"[1/1] recompiled Block.forward (compiled at test_modules.py:{compiled(test)})",
            "    guard failed: 0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0",
            f"    triggered by: test_modules.py:{recompiles(test)} in {test}: "
            f"{call}(torch.ones(2, 4, requires_grad=True))  # recompiles",
        ])
    expect_lines(result, [
        f"*graph break at test_modules.py:{_line(source, 'print(', 'forward')}",
        f"    reason: {PRINT_BREAK_REASON}",
        "    explanation: *",
        "    compiling: Sequential.forward (compiled at "
        f"test_modules.py:{compiled('test_graph_break')})",
    ])
    # The one-line cause, in the summary and the JSON report; the JSON keeps torch's names beside
    # the user's.
    result.stdout.fnmatch_lines(["test_modules.py::test_sequential: Sequential.forward recompiled: "
                                 "*tensor 'input' requires_grad mismatch*"])
    assert "external_utils.py" not in result.stdout.str()
    tests = {test["nodeid"].partition("::")[2]: test
             for test in json.loads((pytester.path / "report.json").read_text())["tests"]}
    event = tests["test_sequential"]["recompile_events"][0]
    assert event["function"] == "inner" and event["filename"].endswith("external_utils.py")
    assert (event["module"]["class"], event["module"]["method"], event["module"]["positional"]) == (
        "Sequential", "forward", ["input"])
    assert event["module"]["compiled_at"] == [str(pytester.path / "test_modules.py"),
                                              compiled("test_sequential")]
    reason = event["reasons"][0]
    assert "args'][0]" in reason["guard"] or "args[0]" in reason["guard"]
    assert (reason["named_guard"]
            == "tensor 'input' requires_grad mismatch. expected requires_grad=0")
    assert reason["subject"] == "input"
    block_event = tests["test_block"]["recompile_events"][0]
    assert (block_event["module"]["class"] == "Block"
            and block_event["reasons"][0]["named_guard"] is None)
    assert tests["test_graph_break"]["graph_break_events"][0]["module"]["class"] == "Sequential"


SEQUENTIAL_COMPILE = '''
import pytest, torch
from torch import nn

@pytest.mark.max_recompiles(0)
def test_sequential_compile():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    model.compile(backend="eager")
    model(torch.ones(2, 4))
    model(torch.ones(2, 4, requires_grad=True))
'''


def test_sequential_compile_is_named_where_torch_compiles_it(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    """torch 2.15 compiles ``module.compile()``'s ``_call_impl`` through its wrapper; 2.13 skips a
    torch module's call and compiles nothing."""
    pytester.makepyfile(test_seq=SEQUENTIAL_COMPILE)
    result = run("-p", "no:logging", "--nocompile-json=report.json")
    (test,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    if test["compiles"] == 0:
        result.assert_outcomes(passed=1)
        pytest.skip("this torch compiles no graph for nn.Sequential(...).compile()")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "[1/1] recompiled Sequential.forward (compiled at test_seq.py:7)",
        "    guard failed: 0/0: tensor 'input' requires_grad mismatch. expected requires_grad=0",
    ])

CHILD = """
import torch
from torch import nn

model = torch.compile(nn.Sequential(nn.Linear(4, 4)), backend="eager")
model(torch.ones(2, 4))
model(torch.ones(2, 4, requires_grad=True))
"""

IN_A_CHILD = f'''
import subprocess, sys
import pytest

@pytest.mark.max_recompiles(0)
def test_child(tmp_path):
    script = tmp_path / "child.py"
    script.write_text({CHILD!r})
    subprocess.run([sys.executable, str(script)], check=True)
'''


def test_a_child_process_names_the_module_it_compiled(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    """The module travels in the child's line: the parent names it as the child's own process
    would."""
    pytester.makepyfile(test_child=IN_A_CHILD)
    result = run("-p", "no:logging")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "pid * (python *): 1 recompile > max_recompiles(0) (marker on the test)",
        "[1/1] recompiled Sequential.forward (compiled at *child.py:5)",
        "    guard failed: 0/0: tensor 'input' requires_grad mismatch. expected requires_grad=0",
        "    torch's names: *args*[0] for input (dynamo compiled its wrapper around the module)",
        "    triggered by: *child.py:7 in <module>: model(torch.ones(2, 4, requires_grad=True))",
    ])

DIMS = '''
import pytest, torch
from torch import nn

@pytest.mark.dynamic_dims(input=0)
def test_dims():
    model = torch.compile(nn.Sequential(nn.Linear(4, 4)), backend="eager")
    model(torch.ones(2, 4))
    model(torch.ones(8, 4))  # automatic dynamic: the dim was compiled static
'''


def test_dynamic_dims_names_the_forwards_argument_of_a_module_compiled_whole(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_dims=DIMS)
    result = run("-p", "no:logging")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "dynamic_dims(input=0) broken (marker on the test): a dim meant to stay dynamic was "
        "specialised once",
        # *: the compile id, from torch 2.5
        "    Sequential.forward recompiled: input dim 0 at size 8: it was compiled static "
        "(guard failed: *tensor 'input' size mismatch at index 0. expected 2, actual 8)",
        "        triggered by: test_dims.py:8 in test_dims: model(torch.ones(8, 4))  "
        "# automatic dynamic: the dim was compiled static",
        "        usual fix: compile with dynamic=True, "
        "or call torch._dynamo.mark_dynamic(input, 0) before the first call",
    ])


BASELINE = '''
import torch
from torch import nn

def test_step():
    model = torch.compile(nn.Sequential(nn.Linear(4, 4)), backend="eager")
    model(torch.ones(2, 4))
    model(torch.ones(2, 4, requires_grad=True))
'''


def test_a_baseline_reason_names_the_module_and_its_argument(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_step=BASELINE)
    run("--nocompile-save=baseline.json").assert_outcomes(passed=1)
    entries = json.loads(
        (pytester.path / "baseline.json").read_text())["torch"][f"{TORCH[0]}.{TORCH[1]}"]
    assert entries["test_step.py::test_step"]["reasons"] == [
        "recompile Sequential.forward (torch/nn/modules/container.py): requires_grad input"]


# -- without torch: recorded messages, the names, a child's line, the ranks' comparison ------------

SEQUENTIAL = CompiledModule("Sequential", "forward", "/site-packages/torch/nn/modules/container.py",
                            240, ("input",), (), True)
ATTENTION = CompiledModule("MultiheadAttention", "forward",
                           "/site-packages/torch/nn/modules/activation.py", 1300,
                           ("query", "key", "value", "key_padding_mask", "need_weights",
                            "attn_mask"), (), True)


@pytest.mark.parametrize("name",
                         ["torch-2.4-compiled_modules.txt", "torch-2.13-compiled_modules.txt",
                          "torch-2.15-compiled_modules.txt"])
def test_every_recorded_wrapper_guard_reads_in_the_users_names(name: str) -> None:
    for message in recorded_messages(name):
        module = ATTENTION if "need_weights" in message else SEQUENTIAL
        event = event_from_message(message, module=module)
        assert event.function == "inner" and event.filename.endswith("external_utils.py")
        assert event.code_place == f"{module.class_name}.forward ({module.filename}:{module.line})"
        for reason in event.reasons:
            shown = str(reason)
            # every wrapper name renamed
            assert "args" not in shown and "fn" not in shown.replace("fn(", ""), shown
            assert reason.named is not None and reason.guard != reason.named
            assert any(user in shown for user in ("input", "need_weights", "self")), shown


@pytest.mark.parametrize("name",
                         ["torch-2.4-compiled_modules.txt", "torch-2.13-compiled_modules.txt",
                          "torch-2.15-compiled_modules.txt"])
def test_a_failure_says_nothing_of_the_wrapper_but_what_torch_named(name: str) -> None:
    from pytest_nocompile.output.report import format_event

    for message in recorded_messages(name):
        module = ATTENTION if "need_weights" in message else SEQUENTIAL
        lines = format_event(1, 1, event_from_message(message, module=module))
        assert lines[0] == f"[1/1] recompiled {module.place}"
        # no place in the wrapper
        assert not any("external_utils" in line or "inner" in line for line in lines), lines
        (named,) = [line for line in lines if line.startswith("    torch's names: ")]
        assert named.endswith(" (dynamo compiled its wrapper around the module)")
        assert " for input" in named or " for need_weights" in named


def test_renaming_touches_only_the_wrappers_own_names() -> None:
    assert (SEQUENTIAL.named_guard("tensor 'args[0]' dtype mismatch")
            == "tensor 'input' dtype mismatch")
    assert (SEQUENTIAL.named_guard("tensor 'L['args'][0]' dtype mismatch")
            == "tensor 'input' dtype mismatch")
    assert SEQUENTIAL.named_guard("L['args'][0].size()[0] == 4") == "input.size()[0] == 4"
    assert SEQUENTIAL.named_guard("___check_obj_id(L['fn'], 1398)") == "___check_obj_id(self, 1398)"
    assert SEQUENTIAL.renames("___check_type_id(fn, 9), args[0] and args[0]") == [
        ("fn", "self"), ("args[0]", "input")]
    # Beyond the forward's parameters, inside another object, or not the wrapper's: as torch wrote
    # it.
    for guard in ("args[1] == 3", "len(L['args']) == 1", "self.args[0] == 1", "d['fn'] == 1",
                  "x.fn == 2", "kwargs['mask'] is None"):
        assert SEQUENTIAL.named_guard(guard) is None, guard
    assert ATTENTION.named_guard("kwargs['need_weights'] == True") == "need_weights == True"
    own = CompiledModule("Block", "forward", "/t/test_x.py", 8, ("x",), (), wrapped=False)
    # the user's own forward: dynamo's names are the user's
    assert own.named_guard("tensor 'args[0]' dtype mismatch") is None


def test_a_module_is_placed_at_the_users_compile_else_at_its_method() -> None:
    assert (SEQUENTIAL.place
            == "Sequential.forward (/site-packages/torch/nn/modules/container.py:240)")
    compiled = CompiledModule("Sequential", "forward", SEQUENTIAL.filename, 240, ("input",), (),
                              True, ("/elsewhere/test_x.py", 18))
    assert compiled.place == "Sequential.forward (compiled at /elsewhere/test_x.py:18)"
    assert module_from_dict(json.loads(json.dumps(compiled.to_dict()))) == compiled


def test_a_childs_line_carries_the_module_and_a_bad_one_is_skipped() -> None:
    line = {"t": 1.0, "pid": 42, "event": "recompile",
            "message": "Recompiling function inner in /x/external_utils.py:67\n",
            "module": SEQUENTIAL.to_dict()}
    assert ChildLine(line, "token").module == SEQUENTIAL
    # an older writer
    assert ChildLine({key: value for key, value in line.items() if key != "module"},
                     "token").module is None
    bad_modules: list[object] = [{"class": 3}, [],
                                 {**SEQUENTIAL.to_dict(), "compiled_at": ["a.py"]},
                                 {**SEQUENTIAL.to_dict(), "positional": "input"}]
    for bad in bad_modules:
        with pytest.raises(BadLine, match="'module'"):
            ChildLine({**line, "module": bad}, "token")


def test_ranks_compare_a_modules_compiles_and_recompiles_under_one_name() -> None:
    compiled = CompiledModule("Sequential", "forward", SEQUENTIAL.filename, 240, ("input",), (),
                              True, ("/t/train.py", 18))
    wrapper = CodeLocation("/site-packages/torch/_dynamo/external_utils.py", 67, "inner")
    process = ProcessEvents(None)
    process.add_compile(CompileEvent("0/0", compiling=wrapper, module=compiled))
    # dynamo logs the recompile as it starts the attempt, then the graph it compiles
    process.add_recompile(RecompileEvent("inner", wrapper.filename, 67, (), "", compile_id="0/1",
                                         module=compiled))
    process.add_compile(CompileEvent("0/1", compiling=wrapper, module=compiled))
    # graphs, recompiles, and frames compiled to no graph
    assert summary(ProcessSnapshot(process, "")) == {
        "Sequential.forward (compiled at /t/train.py:18)": (2, 1, 0)}


FSDP2 = '''
import socket
import pytest, torch
import torch.distributed as dist
from torch import nn

try:
    from torch.distributed.fsdp import fully_shard
except ImportError:
    try:  # torch 2.4 and 2.5
        from torch.distributed._composable.fsdp import fully_shard
    except ImportError:
        pytest.skip("this torch has no FSDP2", allow_module_level=True)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, h):
        return torch.relu(self.lin(h))

@pytest.fixture
def gloo():
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("this torch has no gloo")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()

@pytest.mark.max_recompiles(0)
@pytest.mark.parametrize("block", [Block, lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU())],
                         ids=["own", "torchs"])
def test_blocks(gloo, block):
    layers = nn.ModuleList()
    for _ in range(2):  # torchtitan's order: compile each block, then shard it
        layers.append(torch.compile(block(), backend="eager"))  # compiled here
        fully_shard(layers[-1])
    h = torch.ones(2, 4)
    for layer in layers:
        h = layer(h)  # the second block's input requires grad: it recompiles the code both share
'''


@pytest.mark.skipif(TORCH < (2, 6),
                    reason="FSDP2 of torch 2.4 makes CUDA streams even on CPU (2.5 not tried)")
def test_a_compiled_block_sharded_with_fsdp2_is_named_by_its_class(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    """torchtitan's pattern on CPU with gloo (one rank): each block compiled, then
    ``fully_shard``-ed."""
    source = pytester.makepyfile(test_fsdp2=FSDP2).read_text().splitlines()
    result = run("-p", "no:logging", "-rs")
    if "skipped" in result.parseoutcomes():
        # no FSDP2 or gloo
        pytest.skip("the user's test skipped: "
                    f"{result.stdout.str().split('SKIPPED', 1)[-1].splitlines()[0]}")
    result.assert_outcomes(failed=2)
    compiled, recompiles = (_line(source, "# compiled here", "test_blocks"),
                            _line(source, "# the second block", "test_blocks"))
    expect_lines(result, [
        "*_ test_blocks[own] _*",
        "1 recompile > max_recompiles(0) (marker on the test)",
        f"[1/1] recompiled Block.forward (compiled at test_fsdp2.py:{compiled})",
        "    guard failed: 0/0: tensor 'h' requires_grad mismatch. expected requires_grad=0",
        f"    triggered by: test_fsdp2.py:{recompiles} in test_blocks: h = layer(h)  # *",
    ])
    expect_lines(result, [
        "*_ test_blocks[torchs] _*",
        "1 recompile > max_recompiles(0) (marker on the test)",
        f"[1/1] recompiled Sequential.forward (compiled at test_fsdp2.py:{compiled})",
        "    guard failed: 0/0: tensor 'input' requires_grad mismatch. expected requires_grad=0",
        "    torch's names: *args*[0] for input (dynamo compiled its wrapper around the module)",
    ])


def test_a_wrappers_classes_give_way_to_the_users() -> None:
    from pytest_nocompile.observe.compiled_modules import _class_name

    def made(name: str, module: str, *bases: type) -> type:
        return type(name, bases, {"__module__": module})

    base = made("Module", "torch.nn.modules.module")
    block = made("Block", "model", base)
    fsdp_module = made("FSDPModule", "torch.distributed.fsdp._fully_shard._fully_shard", base)
    assert _class_name(made("FSDPBlock", "torch.distributed.fsdp._fully_shard._fully_shard",
                            fsdp_module, block)) == "Block"
    assert _class_name(block) == "Block"
    # A module of torch.distributed's own (a checkpoint wrapper) keeps its class's name, not
    # nn.Module's.
    assert _class_name(made("CheckpointWrapper",
                            "torch.distributed.algorithms._checkpoint.checkpoint_wrapper",
                            base)) == "CheckpointWrapper"
