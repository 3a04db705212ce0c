"""The kernels kind: what it counts, and how a failure lists its graphs. Pure code.

A test over ``max_kernels`` lists each graph inductor compiled, named by the
function dynamo was compiling, with its kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from ...exceptions import KernelBudgetExceeded
from ...vocabulary.kinds import BudgetKind
from ...vocabulary.measures import plural

if TYPE_CHECKING:
    from ...vocabulary.events import HealthEvent

# one health event per graph inductor compiled or took from its cache, its kernels the amount
KERNELS_SIGNAL = "kernels"
# The part of a training step a graph's kernels are of (.kernel_counts says which
# is a backward: its event's reason starts so).
KERNELS_BACKWARD = "backward"
KERNELS_FORWARD = "forward"


def _is_backward(event: HealthEvent) -> bool:
    return (event.reason or "").startswith(KERNELS_BACKWARD)


def kernel_lines(events: Sequence[HealthEvent]) -> list[str]:
    """``f (test_x.py:4), compile 0/0: 2 kernels``: one line per graph, with its part of a training
    step (``forward``, ``backward``) and where its code came from when not compiled anew.

    A backward compiled at the first ``backward()`` runs outside the frame of its forward: it is
    named by the forward of its compile id."""
    lines = []
    places: dict[Optional[str], str] = {event.compile_id: event.compiling_place for event in events
                                        if event.compiling_place and event.compile_id}
    with_backward = {event.compile_id for event in events
                     if _is_backward(event) and event.compile_id}
    for event in events:
        graph = (event.compiling_place or places.get(event.compile_id)
                 or "a graph compiled outside a frame (a backward)")
        compile_id = f", compile {event.compile_id}" if event.compile_id else ""
        reason = event.reason
        if event.compile_id in with_backward and not _is_backward(event):  # the backward's forward
            reason = ", ".join(word for word in (KERNELS_FORWARD, reason) if word)
        origin = f" ({reason})" if reason else ""
        lines.append(f"{graph}{compile_id}: {plural(event.amount, 'kernel')}{origin}")
    return lines


KERNELS = BudgetKind(
    key="kernels",
    marker="max_kernels",
    events="health",
    noun="kernel",
    counts="kernels inductor generated for the graphs compiled (a graph from the FX graph cache "
    "counts the kernels it holds)",
    column="kernels",
    short="kernels",
    signals=(KERNELS_SIGNAL,),
    describe_events=kernel_lines,
    exceeded=KernelBudgetExceeded,
    gated_by_baseline=False,
    # Every inductor compile has some (as every compile has seconds): a table column and junit
    # property only where budgeted.
    shown_only_where_budgeted=True,
    source=f"{__package__}.kernel_counts:KernelCounts",
    why_not_measured=f"{__package__}.kernel_counts:kernels_not_measured",
    unmeasured_shown_without_compiles=True,
)
