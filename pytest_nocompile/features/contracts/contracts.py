"""Contracts: markers that judge how a test compiled rather than how much
(``dynamic_dims``, ``same_across_ranks``).

A contract is read from the closest marker of its name (test, class, module),
like a budget, when the test's plan is made (:mod:`.planning`); a bad
argument is a usage error of the test. It is judged on the test's record
when the call ends, with the budgets (:mod:`..watching.watcher`), and only where the
record holds something: a test that compiled nothing keeps every contract.
Light at import: the judging code loads with the first failure to look at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

from ...judge.budget import render_call
from ...vocabulary.kinds import (
    DYNAMIC_DIMS,
    DYNAMIC_DIMS_FORM,
    FRAMEWORK_KEYWORD,
    SAME_ACROSS_RANKS,
    SAME_ACROSS_RANKS_FORM,
    ContractUsageError,
)

if TYPE_CHECKING:
    from ...record.snapshot import TestSnapshot

class DynamicDims:
    """``dynamic_dims``: these dims of these arguments stay dynamic through the call."""

    __slots__ = ("dims", "framework", "marked_on")
    name = DYNAMIC_DIMS

    def __init__(self, dims: Mapping[str, tuple[int, ...]], framework: bool,
                 marked_on: str) -> None:
        self.dims = dict(dims)
        self.framework = framework  # dynamo's own 0/1 specialisation breaks it too
        self.marked_on = marked_on

    @property
    def shown(self) -> str:
        """The marker as written: ``dynamic_dims(x=0, y=(0, 1))``."""
        parts = [f"{name}={dims[0] if len(dims) == 1 else dims}"
                 for name, dims in self.dims.items()]
        if self.framework:
            parts.append(f"{FRAMEWORK_KEYWORD}=True")
        return f"{DYNAMIC_DIMS}({', '.join(parts)})"

    def broken(self, snapshot: TestSnapshot) -> Optional[str]:
        """The failure text when a call-phase recompile of any of the test's processes specialised
        a dim of the contract."""
        if not any(process.call_recompiles for process in snapshot.processes):
            return None
        from .size_guards import contract_breaks

        lines: list[str] = []
        count = ignored = 0
        for process in snapshot.processes:
            where = f"{process.label}: " if process.info is not None else ""
            for event in process.call_recompiles:
                for argument, dim_recompile in contract_breaks(event, self.dims):
                    if dim_recompile.by_dynamo and not self.framework:
                        ignored += 1
                        continue
                    lines += dim_recompile.lines(argument, where=where)
                    count += 1
        if not lines:
            return None
        times = "once" if count == 1 else f"{count} times"
        headline = (f"{self.shown} broken ({self.marked_on}): a dim meant to stay dynamic was "
                    f"specialised {times}")
        note = ([f"    (and {ignored} by dynamo's own 0/1 specialisation, not counted without "
                 f"{FRAMEWORK_KEYWORD}=True)"]
                if ignored else [])
        return "\n".join([headline, *lines, *note])


class SameAcrossRanks:
    """``same_across_ranks``: every process the test started compiled the
    same functions, as often."""

    __slots__ = ("marked_on",)
    name = SAME_ACROSS_RANKS

    def __init__(self, marked_on: str) -> None:
        self.marked_on = marked_on

    def broken(self, snapshot: TestSnapshot) -> Optional[str]:
        if not snapshot.with_children:
            return None  # no process started: nothing to compare
        from ...vocabulary.events import process_label
        from .rank_comparison import differences

        found = differences(list(snapshot.children), lambda info: process_label(info, snapshot.pid))
        return (f"{SAME_ACROSS_RANKS} broken ({self.marked_on}): " + "\n".join(found) if found
                else None)


Contract = Union[DynamicDims, SameAcrossRanks]


def read_contract(name: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                  marked_on: str) -> Contract:
    """A contract from its marker's arguments; :class:`ContractUsageError` names what was wrong
    and the accepted form."""
    if name == SAME_ACROSS_RANKS:
        if args or kwargs:
            raise ContractUsageError(f"{render_call(name, args, kwargs)}: takes no arguments; use "
                                     f"{SAME_ACROSS_RANKS_FORM}")
        return SameAcrossRanks(marked_on)
    shown = render_call(name, args, kwargs)
    if args:
        raise ContractUsageError(f"{shown}: name each argument with its dims, positional arguments "
                                 f"are not accepted; use {DYNAMIC_DIMS_FORM}")
    framework = kwargs.get(FRAMEWORK_KEYWORD, False)
    if not isinstance(framework, bool):
        raise ContractUsageError(f"{shown}: {FRAMEWORK_KEYWORD} must be True or False, got "
                                 f"{framework!r}; use {DYNAMIC_DIMS_FORM}")
    dims = {argument: _dims(value, argument, shown) for argument, value in kwargs.items()
            if argument != FRAMEWORK_KEYWORD}
    if not dims:
        raise ContractUsageError(f"{shown}: names no argument; use {DYNAMIC_DIMS_FORM}")
    return DynamicDims(dims, framework, marked_on)


def _dims(value: object, argument: str, shown: str) -> tuple[int, ...]:
    values = value if isinstance(value, tuple) else (value,)
    if (not values or not all(isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0
                              for dim in values)):
        raise ContractUsageError(f"{shown}: {argument}={value!r} is not a dim or a tuple of dims "
                                 f"(ints >= 0); use {DYNAMIC_DIMS_FORM}")
    return tuple(values)
