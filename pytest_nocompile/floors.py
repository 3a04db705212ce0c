"""Lower bounds (``min_compiles``): judged on the test as a whole, and what a miss is explained by. Pure code.

A ``max_`` budget applies to each process a test starts; a floor cannot: a
test that spawns ranks compiles in the ranks, never in its own process. So a
floor counts the call-phase compiles of all the test's processes together,
and a compile error dynamo swallowed in any of them fails it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional

from .budget import KINDS_BY_KEY, BudgetKind, plural

if TYPE_CHECKING:
    from .events import HealthEvent, Phase
    from .process_events import ProcessEvents
    from .record import RecompileRecord

COMPILE_ERROR = "compile_error"  # the health signal of a compile error dynamo swallowed (observe.swallowed_errors)
FRAMES_SEEN = "frames.total"  # torch's counter of frames dynamo was asked to convert (cache misses)


def compile_errors(process: ProcessEvents, phase: Optional[Phase] = "call") -> list[HealthEvent]:
    """The compile errors dynamo swallowed in one process, of one phase (None: every phase)."""
    return process.signals((COMPILE_ERROR,), phase)


def floor_count(record: RecompileRecord, kind: BudgetKind) -> int:
    """The floor's count: its counted kind's call-phase count in every process of the test, together."""
    return sum(counts[kind.count_key] for counts in record.counts_by_process().values())


def floors_missed(record: RecompileRecord) -> tuple[str, ...]:
    """The keys of the record's floor kinds that its test missed, in table order."""
    floors = [(KINDS_BY_KEY[key], allowed) for key, allowed in record.budget.limits if KINDS_BY_KEY[key].is_floor]
    if not floors:
        return ()
    errors = any(compile_errors(process) for process in record.processes())
    return tuple(kind.key for kind, allowed in floors
                 if floor_count(record, kind) < allowed or (errors and kind.compile_error_fails))


def why_too_few(processes: Iterable[ProcessEvents], compiled: int, stance: Optional[str] = None) -> list[str]:
    """The lines under a floor's headline: why so little compiled, as far as the recorded events say.

    ``processes``: the test's (their call-phase events are read), ``compiled``: the floor's count,
    ``stance``: torch.compiler's stance when the call ended, when not the default.
    """
    from .events import display_path

    lines: list[str] = []
    frames = 0
    for process in processes:
        where = f"{process.info}: " if process.info is not None else ""
        for event in compile_errors(process, None):
            if event.phase != "call":
                continue
            lines.append(f"    {where}dynamo swallowed a compile error (suppress_errors) and ran the code uncompiled: {event.reason}")
            if event.user_code is not None:
                lines.append(f"        called from: {event.user_code}")
        for hit in process.limit_hits:
            if hit.phase == "call":
                lines.append(f"    {where}dynamo hit config.{hit.limit_name} ({hit.limit}) for {hit.function_name}: "
                             "later calls run uncompiled")
        for graph_break in process.graph_breaks:
            if graph_break.phase == "call":
                lines.append(f"    {where}graph break at {display_path(graph_break.filename)}:{graph_break.line}: {graph_break.reason}")
        frames += int(sum(event.amount for event in process.signals((FRAMES_SEEN,))))
    if stance:
        lines.append(f'    torch.compiler.set_stance("{stance}") was in force when the call ended')
    if compiled:
        pass  # some code compiled: what did not is not known beyond the lines above
    elif frames:
        lines.append(f"    dynamo was asked to compile {plural(frames, 'frame')} and kept no graph of "
                     f"{'it' if frames == 1 else 'them'} (torch's skip rules, or nothing to compile)")
    elif not lines:
        lines.append("    dynamo was asked to compile nothing: the compiled code did not run, ran under "
                     'torch.compiler.disable or set_stance("force_eager"), or ran from dynamo\'s cache, '
                     "compiled before the call (in a fixture, or by an earlier test without isolation)")
    return ["why:", *lines] if lines else []
