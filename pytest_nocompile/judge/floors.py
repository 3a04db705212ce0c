"""Lower bounds (``min_compiles``): judged on the test as a whole, and what a miss
is explained by. Pure code.

A ``max_`` budget applies to each process a test starts; a floor cannot: a
test that spawns ranks compiles in the ranks, never in its own process. So a
floor counts the call-phase compiles of all the test's processes together,
and a compile error dynamo swallowed in any of them fails it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional, Union

from ..observe.sources.swallowed_errors import COMPILE_ERROR
from ..vocabulary.kinds import KINDS_BY_KEY, BudgetKind

if TYPE_CHECKING:
    from ..record.process_events import ProcessEvents
    from ..record.snapshot import ProcessSnapshot, TestSnapshot
    from ..vocabulary.events import HealthEvent, Phase
    from .budget import RecompileBudget

    # A test's process as judged (a snapshot's), or a block's new events (the block assertions').
    Process = Union[ProcessSnapshot, ProcessEvents]


def compile_errors(process: Process, phase: Optional[Phase] = "call") -> list[HealthEvent]:
    """The compile errors dynamo swallowed in one process, of one phase (None: every phase)."""
    return process.signals((COMPILE_ERROR,), phase)


def floor_count(snapshot: TestSnapshot, kind: BudgetKind) -> int:
    """The floor's count: its counted kind's call-phase count in every process
    of the test, together."""
    return int(sum(process.counts[kind.count_key] for process in snapshot.processes))


def floors_missed(snapshot: TestSnapshot, budget: RecompileBudget) -> tuple[str, ...]:
    """The keys of the budget's floor kinds that the test missed, in table order."""
    floors = [(KINDS_BY_KEY[key], allowed) for key, allowed in budget.limits
              if KINDS_BY_KEY[key].is_floor]
    errors = any(compile_errors(process) for process in snapshot.processes)
    return tuple(kind.key for kind, allowed in floors
                 if floor_count(snapshot, kind) < allowed or (errors and kind.compile_error_fails))


def floor_cause(snapshot: TestSnapshot, budget: RecompileBudget, kind: BudgetKind) -> str:
    """A missed floor in one line, for the summary table: the headline and the first
    thing that explains it."""
    count, allowed = floor_count(snapshot, kind), budget.allowed(kind) or 0
    headline = kind.headline(count, allowed, budget.describe(kind))
    # met, but an error was swallowed: the headline says so, the error says which
    if count >= allowed:
        error = next(event for process in snapshot.processes for event in compile_errors(process))
        return f"{headline}: {error.reason}"
    why = why_too_few(snapshot.processes, count)
    return f"{headline}: {why[1].strip()}" if why else headline


def why_too_few(processes: Iterable[Process], compiled: int,
                stance: Optional[str] = None) -> list[str]:
    """The lines under a floor's headline: why so little compiled, as far
    as the recorded events say.

    ``processes``: the test's (their call-phase events are read), ``compiled``: the floor's count,
    ``stance``: torch.compiler's stance when the call ended, when not the default.
    """
    lines: list[str] = []
    for process in processes:
        where = f"{process.info}: " if process.info is not None else ""
        for event in compile_errors(process):
            lines.append(f"    {where}compile error swallowed (suppress_errors), the code ran "
                         f"uncompiled: {event.reason}")
            if event.user_code is not None:
                lines.append(f"        called from: {event.user_code}")
        for hit in process.limit_hits:
            if hit.phase == "call":
                lines.append(f"    {where}{hit.headline}: later calls run uncompiled")
        for graph_break in process.graph_breaks:
            if graph_break.phase == "call":
                lines.append(f"    {where}graph break at {graph_break.place}: "
                             f"{graph_break.reason}")
    if stance:
        lines.append(f'    torch.compiler.set_stance("{stance}") was in force when the call ended')
    if not (lines or compiled):  # nothing recorded says why: what can make dynamo compile nothing
        lines.append("    nothing recorded says why; dynamo compiles no graph when the compiled "
                     "code does not run, runs under torch.compiler.disable or "
                     'set_stance("force_eager"), runs from dynamo\'s cache (compiled before the '
                     "call: in a fixture, or by an earlier test without isolation), or holds no "
                     "tensor operation")
    return ["why:", *lines] if lines else []
