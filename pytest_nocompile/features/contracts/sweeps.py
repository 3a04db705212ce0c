"""``sweep_sizes``: call a compiled function over sizes, and fail on each size that recompiled for
a reason not dynamo's own.

It needs no fixture and no watched test: it attaches a record of its own to
this process's capture for the sweep's duration (:mod:`.observe.capture`
fans each record out to every sink), so it counts the sweep's calls exactly,
inside a watched test (whose record hears them too: a budget counts them)
and outside one. Recompiles are read with :mod:`.size_guards`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

if TYPE_CHECKING:
    from ...vocabulary.events import RecompileEvent

EDGE_SIZES = (0, 1, 2)
_FORM = ("sweep_sizes(fn, make_args, sizes), sizes ints >= 0, make_args(n) returning a tuple of "
         "fn's arguments")


@dataclass(frozen=True)
class SweptSize:
    """One call of a sweep: the size, the recompiles it made, and whether each was dynamo's own 0/1
    specialisation."""

    size: int
    recompiles: tuple[RecompileEvent, ...]
    # every recompile of this call was dynamo's own 0/1 specialisation (True when none)
    by_dynamo: bool


def sweep_sizes(fn: Callable[..., Any], make_args: Callable[[int], Sequence[Any]],
                sizes: Iterable[int], *, edges: Iterable[int] = EDGE_SIZES) -> list[SweptSize]:
    """Call ``fn(*make_args(n))`` for each n of ``sizes``, then of ``edges`` (0, 1, 2) and the first
    size again.

    Raise ``AssertionError`` naming each size whose call recompiled for a
    reason that is not dynamo's own 0/1 specialisation: the user's code
    branching on a size (with the line of the branch, where torch names
    it), a dim compiled static (no ``dynamic=True``, no ``mark_dynamic``:
    automatic dynamic's first recompile), or any other guard (a Python int
    argument). Dynamo's own specialisation of sizes 0 and 1 (its guards on
    the size, and on a stride that a size 0 or 1 changed) is listed in the
    error, not failed. A failing size that only ``edges`` adds says how to
    leave it out. Returns each call's size and recompiles.

    ``fn`` is the compiled function (``torch.compile(f, dynamic=True)``);
    its cache is left as the sweep made it. Give ``edges`` to leave out an
    edge size the function cannot take. Outside pytest it works the same.
    """
    __tracebackhide__ = True
    chosen = _sizes(sizes, "sizes")
    edge_sizes = _sizes(edges, "edges", allow_empty=True)
    order = [*chosen, *edge_sizes, chosen[0]]
    from ..block_assertions.assertions import own_capture

    swept: list[SweptSize] = []
    with own_capture() as record:
        for size in order:
            arguments = make_args(size)
            if not isinstance(arguments, (tuple, list)):
                raise TypeError(f"make_args({size}) returned {type(arguments).__name__}, not a "
                                f"tuple of fn's arguments (return (x,) for one); use {_FORM}")
            start = len(record.own.recompiles)
            fn(*arguments)
            new = tuple(record.own.recompiles[start:])
            swept.append(SweptSize(size, new, all(_by_dynamo(event, size) for event in new)))
    failed = [step for step in swept if not step.by_dynamo]
    if failed:
        raise AssertionError(_failure(_swept_name(fn), swept, failed, chosen, edge_sizes))
    return swept


def _sizes(values: Iterable[int], what: str, allow_empty: bool = False) -> list[int]:
    found = list(values)
    if (not found and not allow_empty
            or not all(isinstance(size, int) and not isinstance(size, bool) and size >= 0
                       for size in found)):
        raise ValueError(f"sweep_sizes: {what}={found!r} must be "
                         f"{'' if allow_empty else 'one or more '}ints >= 0; use {_FORM}")
    return found


def _by_dynamo(event: RecompileEvent, size: int) -> bool:
    """The recompile's size guards are all of dynamo's own 0/1 rule (and it has one): the other
    cache entries' guards on something else (a dtype, a duck-sized equality) failed too, but the
    size 0 or 1 is what recompiled it."""
    from .size_guards import ZERO_ONE, size_guard

    guards = [size_guard(reason, size) for reason in event.reasons]
    return {guard.cause for guard in guards if guard is not None} == {ZERO_ONE}


def _swept_name(fn: Callable[..., Any]) -> str:
    """The function as failures name it: a module's ``TinyLM.forward``, not ``OptimizedModule``."""
    from ...observe.compiled_modules import compiled_name

    return compiled_name(fn) or getattr(fn, "__name__", None) or type(fn).__name__


def _failure(name: str, swept: list[SweptSize], failed: list[SweptSize], chosen: list[int],
             edge_sizes: list[int]) -> str:
    from ...vocabulary.measures import plural

    order = ", ".join(str(step.size) for step in swept)
    sizes = ", ".join(str(step.size) for step in failed)
    lines = [f"sweep_sizes({name}): {plural(len(failed), 'size')} recompiled, not by dynamo's "
             f"own 0/1 specialisation: {sizes} "
             f"(calls in order: sizes {order})"]
    for step in failed:
        lines += _step_lines(step, failing=True)
    lines += _edges_line(name, [step.size for step in failed], chosen, edge_sizes)
    listed = [step for step in swept if step.recompiles and step.by_dynamo]
    if listed:
        lines.append("dynamo's own 0/1 specialisation, listed, not failed:")
        for step in listed:
            lines += _step_lines(step, failing=False)
    return "\n".join(lines)


def _edges_line(name: str, failed: list[int], chosen: list[int],
                edge_sizes: list[int]) -> list[str]:
    """Where failing sizes are only the sweep's edges, how to leave them out: the function may never
    be called at them (a sequence of length 0)."""
    edges_only = [size for size in dict.fromkeys(failed)  # an edge given twice fails twice
                  if size in edge_sizes and size not in chosen]
    if not edges_only:
        return []
    kept = tuple(size for size in edge_sizes if size not in edges_only)
    listed = " and ".join(map(str, edges_only))
    if len(edges_only) == 1:
        which, where, them = f"size {listed} is one of the edges", f"size {listed}", "it"
    else:
        which, where, them = f"sizes {listed} are edges", "them", "them"
    return [f"    {which} the sweep adds (edges={tuple(edge_sizes)}), not of sizes: where {name} "
            f"is never called at {where}, leave {them} out with edges={kept}"]


def _step_lines(step: SweptSize, failing: bool) -> list[str]:
    from ...output.report import format_event
    from .size_guards import dims_recompiled

    lines = []
    for event in step.recompiles:
        dims = [dim for dim in dims_recompiled(event, step.size) if dim.by_dynamo != failing]
        if dims:
            for dim in dims:
                lines += (dim.lines(where=f"size {step.size}: ") if failing
                          else [f"    size {step.size}: {event.code_name} recompiled: "
                                f"{dim.describe()}"])
        # a guard on something other than a size
        elif failing and not _by_dynamo(event, step.size):
            first, *rest = format_event(1, 1, event)
            lines += [f"    size {step.size}: {first.removeprefix('[1/1] ')}",
                      *(f"    {line}" for line in rest)]
    return lines
