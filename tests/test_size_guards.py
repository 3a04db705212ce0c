"""Which dims a recompile specialised and why, read from messages recorded on each torch
(tests/data): pure, no torch."""

from __future__ import annotations

import pytest

from nocompile_testing import DATA, recorded_messages
from pytest_nocompile.features.contracts.contracts import (
    ContractUsageError,
    DynamicDims,
    read_contract,
)
from pytest_nocompile.features.contracts.size_guards import (
    CODE,
    STATIC,
    ZERO_ONE,
    argument_of,
    contract_breaks,
    dims_recompiled,
    size_guard,
)
from pytest_nocompile.vocabulary.events import GuardFailure, event_from_message

RECORDED = sorted(path.name for path in DATA.glob("torch-*-dynamic_sizes.txt"))


@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_torch_tells_the_users_branch_from_dynamos_0_1_rule_and_a_static_dim(
    name: str
) -> None:
    # The recorder's scenarios, in order: dynamic=True at 0, then 1; a branch on size 3; range()
    # over the size; automatic dynamic's first new size, on a function and on a module's forward.
    events = [event_from_message(message) for message in recorded_messages(name)]
    found = [[(dim.tensor, dim.dim, dim.cause, dim.size) for dim in dims_recompiled(event)]
             for event in events]
    assert found == [
        [("x", 0, ZERO_ONE, None)],
        # the 0 entry's mismatch says the size; the dynamic entry's bound does not
        [("x", 0, ZERO_ONE, 1)],
        [("x", 0, CODE, 3)],
        [("x", 0, STATIC, 5)],
        [("x", 0, STATIC, 8)],
        [("x", 0, STATIC, 8)],
    ], name
    branch = dims_recompiled(events[2])[0]
    # its guard comment names a line of torch's own: no user line
    if name == "torch-2.4-dynamic_sizes.txt":
        assert branch.where is None
    else:
        assert (branch.where is not None and branch.where.code == "if x.shape[0] == 3:"
                and branch.where.line == events[2].line + 1)
        # torch's shortened path, read as the function's own file
        assert branch.where.filename == events[2].filename


@pytest.mark.parametrize(("guard", "source", "cause"), [
    # no comment (torch 2.4 names a line of its own): the form decides
    ("2 <= x.size()[0]", None, ZERO_ONE),
    ("2 <= x.size()[0]",
     "return x  # t.py:3 in f (user code shown is first use of this value--the guard itself is not "
     "due user code but due to 0/1 specialization in the framework; to avoid specialization try "
     "mark_unbacked(tensor, dim))", ZERO_ONE),
    ("2 <= x.size()[0]", "if x.shape[0] >= 2:  # t.py:3 in f (_dynamo/variables/tensor.py:2606 in "
                         "evaluate_expr)", CODE),
    ("x.size()[1] >= 2", None, ZERO_ONE),
    ("tensor 'x' size mismatch at index 0. expected 4, actual 1", None, ZERO_ONE),
    ("tensor 'x' size mismatch at index 0. expected 1, actual 4", None, ZERO_ONE),
    ("tensor 'x' size mismatch at index 0. expected 4, actual 9", None, STATIC),
    ("x.size()[0] != 3", None, CODE),
    ("Eq(L['x'].size()[2], 7)", None, CODE),
])
def test_size_guard_causes(guard: str, source: str | None, cause: str) -> None:
    found = size_guard(GuardFailure(guard, source=source))
    assert found is not None and found.cause == cause and found.tensor == "x"


# A (batch, seq) input at seq 0: a contiguous (3, 0) tensor has strides (1, 1), and dynamo's guard
# of its strides by its sizes fails (2.13: "unknown source idx.stride()[0], please file a bug").
STRIDE_GUARDS = ["idx.stride()[0] == idx.size()[1]", "L['idx'].stride()[0] == L['idx'].size()[1]"]


@pytest.mark.parametrize("guard", STRIDE_GUARDS)
def test_a_stride_guard_at_size_0_or_1_is_dynamos_own_0_1_specialisation(guard: str) -> None:
    failure = GuardFailure(guard, source="(unknown source idx.stride()[0], please file a bug)")
    for call_size in (0, 1):
        found = size_guard(failure, call_size)
        assert found is not None
        assert (found.tensor, found.dim, found.cause, found.size) == ("idx", 1, ZERO_ONE, call_size)
    # At another size, or where the size is not known, it is about the tensor's layout, not a size.
    assert size_guard(GuardFailure(guard), 8) is None and size_guard(GuardFailure(guard)) is None


def test_guards_on_anything_but_a_size_are_not_size_guards() -> None:
    for guard in ("n == 2", "tensor 'x' dtype mismatch. expected Float, actual Double",
                  "___check_obj_id(self, 1)"):
        assert size_guard(GuardFailure(guard)) is None


def test_arguments_are_matched_by_the_name_dynamo_gives_the_tensor() -> None:
    assert argument_of("x", ["x", "y"]) == "x"
    assert argument_of("kwargs['y']", ["x", "y"]) == "y"  # a **kwargs function
    for unmatched in ("a[0]", "args[0]", "self.x", "batch['x']", "xs"):
        assert argument_of(unmatched, ["x"]) is None


def test_a_contract_counts_only_its_own_arguments_and_dims() -> None:
    message = ("Recompiling function f in /w/t.py:3\n"
               "    triggered by the following guard failure(s):\n"
               "    - 0/0: tensor 'x' size mismatch at index 1. expected 4, actual 8")
    event = event_from_message(message)
    assert [(argument, dim.dim, dim.size)
            for argument, dim in contract_breaks(event, {"x": (0, 1)})] == [("x", 1, 8)]
    assert contract_breaks(event, {"x": (0,)}) == [] and contract_breaks(event, {"y": (1,)}) == []


@pytest.mark.parametrize(("name", "args", "kwargs", "why"), [
    ("dynamic_dims", (), {}, "dynamic_dims(): names no argument"),
    ("dynamic_dims", ("x",), {}, "dynamic_dims('x'): name each argument with its dims"),
    ("dynamic_dims", (), {"x": -1},
     "dynamic_dims(x=-1): x=-1 is not a dim or a tuple of dims (ints >= 0)"),
    ("dynamic_dims", (), {"x": True}, "dynamic_dims(x=True): x=True is not a dim"),
    ("dynamic_dims", (), {"x": [0]}, "dynamic_dims(x=[0]): x=[0] is not a dim"),
    ("dynamic_dims", (), {"x": ()}, "dynamic_dims(x=()): x=() is not a dim"),
    ("dynamic_dims", (), {"x": 0, "framework_specialisation": 1},
     "dynamic_dims(x=0, framework_specialisation=1): framework_specialisation must be "
     "True or False"),
    ("same_across_ranks", (0,), {},
     "same_across_ranks(0): takes no arguments; use @pytest.mark.same_across_ranks"),
])
def test_bad_contract_markers_say_what_is_wrong_and_the_accepted_form(
    name: str, args: tuple[object, ...], kwargs: dict[str, object], why: str
) -> None:
    with pytest.raises(ContractUsageError) as raised:
        read_contract(name, args, kwargs, "marker on the test")
    assert str(raised.value).startswith(why)
    assert f"use @pytest.mark.{name}" in str(raised.value)


def test_a_contract_is_shown_as_it_was_written() -> None:
    contract = read_contract("dynamic_dims", (),
                             {"x": 0, "y": (0, 2), "framework_specialisation": True},
                             "marker on the test")
    assert isinstance(contract, DynamicDims) and contract.dims == {"x": (0,), "y": (0, 2)}
    assert contract.shown == "dynamic_dims(x=0, y=(0, 2), framework_specialisation=True)"
