"""``same_across_ranks``: whether the processes a test started compiled alike, and
how one differs. Pure code.

Each process's call phase is summed up per compiled function (its name and
first line, as dynamo compiled it): the graphs compiled (first compiles,
recompiles, graph-break pieces), the recompiles, and the frame compiles that
made no graph. dynamo compiles such frames too (``torch.compile(DDP(model))``:
DDP's forward is skipped, so its frames compile to no graph, and recompile on
an uneven batch); only the compile time torch records per frame tells of
them. The summary most processes share is the reference (of equals, the
lowest rank's, else the first process's to report); each process whose
summary differs is named, with each function that differs and the first
recompile that made it differ.

A process where dynamo compiled nothing in the call (no frame, no graph
break, no recompile) is not compared: it wrote nothing
(:mod:`.observe.event_files`), or only in setup or teardown (a fixture's).
Where the processes say their job's world size (or at least their ranks),
each rank of it that compiled nothing is named.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from ...vocabulary.events import code_place
from ...vocabulary.measures import plural
from ..compile_cost.kinds import COMPILE_SECONDS

if TYPE_CHECKING:
    from ...record.snapshot import ProcessSnapshot
    from ...vocabulary.events import CodeLocation, ProcessInfo, RecompileEvent
    from ...vocabulary.module_names import CompiledModule

# a compile whose function torch did not show (a lazily compiled backward)
UNKNOWN = "a graph compiled outside a frame compile"


class Compiled(NamedTuple):
    """How one function compiled in one process's call phase."""

    graphs: int  # graphs compiled: first compiles, recompiles, graph-break pieces
    recompiles: int
    graphless: int  # frame compiles that made no graph


Summary = dict[str, Compiled]  # function place: how it compiled


def summary(process: ProcessSnapshot) -> Summary:
    """The process's call-phase compiles, recompiles and graphless frame compiles,
    per compiled function."""
    graphs = Counter(_compiled_function(event.compiling, event.module) for event in process.compiles
                     if event.phase == "call")
    recompiles = Counter(event.code_place for event in process.recompiles if event.phase == "call")
    # One compile time per frame dynamo compiled (a lazily compiled backward has no frame): frames
    # beyond the function's graphs made none.
    frames = Counter(_compiled_function(event.compiling, event.module) for event in process.health
                     if (event.what == COMPILE_SECONDS and event.phase == "call"
                         and event.compiling is not None))
    return {function: Compiled(graphs[function], recompiles[function],
                               max(frames[function] - graphs[function], 0))
            for function in sorted({*graphs, *recompiles, *frames})}


def _compiled_function(code: Optional[CodeLocation],
                       module: Optional[CompiledModule] = None) -> str:
    return UNKNOWN if code is None else code_place(code.function, code.filename, code.line, module)


def _dynamo_ran(process: ProcessSnapshot, found: Summary) -> bool:
    """Whether dynamo compiled anything in the process's call: a frame, a graph break, a
    recompile the limit refused."""
    return (bool(found) or any(event.phase == "call" for event in process.graph_breaks)
            or any(hit.phase == "call" for hit in process.limit_hits))


def differences(processes: list[ProcessSnapshot],
                label: Callable[[Optional[ProcessInfo]], str]) -> list[str]:
    """The lines saying which processes compiled unlike the others, and how; empty
    when all compiled alike."""
    summaries = [(process, summary(process)) for process in processes]
    # else compiled nothing in the call
    summaries = [(process, found) for process, found in summaries if _dynamo_ran(process, found)]
    lines: list[str] = []
    if summaries:
        reference_process, reference = _reference(summaries)
        for process, found in summaries:
            if found != reference:
                lines += _difference(process, found, reference_process, reference, label)
    missing = _missing_ranks([process.info for process, _ in summaries],
                             max((process.world or 0 for process in processes), default=0))
    if missing:
        ranks = ", ".join(map(str, missing))
        names = ", ".join(_short(process.info, label(process.info)) for process, _ in sorted(
            summaries, key=lambda pair: _order(pair[0].info)))
        lines.append(f"rank{'s' if len(missing) > 1 else ''} {ranks} compiled nothing in the call, "
                     f"while {names} compiled")
    return lines


def _reference(summaries: list[tuple[ProcessSnapshot, Summary]]) -> tuple[ProcessSnapshot, Summary]:
    """The summary most processes share; of equals, the one of the lowest rank
    (else the first to report)."""
    ordered = sorted(summaries, key=lambda pair: _order(pair[0].info))
    shares = Counter(_key(found) for _, found in ordered)
    return max(ordered, key=lambda pair: shares[_key(pair[1])])  # max keeps the first of equals


def _key(found: Summary) -> tuple[tuple[str, Compiled], ...]:
    return tuple(sorted(found.items()))


def _order(info: Optional[ProcessInfo]) -> tuple[int, int]:
    rank = info.rank if info is not None else None
    return (0, rank) if rank is not None else (1, 0)


def _difference(process: ProcessSnapshot, found: Summary, reference_process: ProcessSnapshot,
                reference: Summary, label: Callable[[Optional[ProcessInfo]], str]) -> list[str]:
    name, other = label(process.info), label(reference_process.info)
    lines = [f"{name} compiled unlike {other}"]
    short, short_other = _short(process.info, name), _short(reference_process.info, other)
    for function in sorted({*found, *reference}):
        mine, theirs = found.get(function), reference.get(function)
        if mine == theirs:
            continue
        lines.append(f"    {function}: {_counts(mine)} in {short}, {_counts(theirs)} in "
                     f"{short_other}")
        first = _first_recompile(process, function) or _first_recompile(reference_process, function)
        if first is not None:
            lines.append("        first recompile "
                         f"({_short(first.process, label(first.process))}): guard failed: "
                         f"{first.first_reason}")
            if first.user_code is not None:
                lines.append(f"        triggered by: {first.user_code}")
    return lines


def _counts(counts: Optional[Compiled]) -> str:
    """``2 compiles (1 recompile)``, ``2 compiles without a graph (1 recompile)``,
    ``1 compile and 1 without a graph (...)``."""
    if counts is None:
        return "never compiled"
    graphs, recompiles, graphless = counts
    if graphs and graphless:
        compiled = f"{plural(graphs, 'compile')} and {graphless} without a graph"
    elif graphless:
        compiled = f"{plural(graphless, 'compile')} without a graph"
    else:
        # a recompile seen, its frame's time not
        compiled = plural(graphs, "compile") if graphs else "no graph compiled"
    return f"{compiled} ({plural(recompiles, 'recompile')})"


def _short(info: Optional[ProcessInfo], name: str) -> str:
    """``rank 1``, or the process's full name where it has no rank."""
    return f"rank {info.rank}" if info is not None and info.rank is not None else name


def _first_recompile(process: ProcessSnapshot, function: str) -> Optional[RecompileEvent]:
    return next((event for event in process.recompiles
                 if event.phase == "call" and event.code_place == function), None)


def _missing_ranks(infos: list[Optional[ProcessInfo]], world: int) -> list[int]:
    """The ranks of the job (``world``, else up to the highest rank seen) that
    compiled nothing in the call."""
    ranks = {info.rank for info in infos if info is not None and info.rank is not None}
    if not ranks:
        return []
    return [rank for rank in range(max(world, max(ranks) + 1)) if rank not in ranks]
