"""How a failure lists syncs and kernels: syncs grouped by the user's line, kernels by graph.
Pure code.

A test over ``max_syncs`` may sync a thousand times from one line of a
scheduler: one line per place in the user's code, counted
(``3 × sched.py:88 in step: t = self.timesteps[i].item()``), says more than a
thousand entries. A test over ``max_kernels`` lists each graph inductor
compiled, named by the function dynamo was compiling, with its kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from .measures import plural

if TYPE_CHECKING:
    from .events import HealthEvent

SYNC_SIGNAL = "sync"  # one health event per synchronizing CUDA operation (observe.sync_warnings)
# one per synchronizing CUDA operation made while dynamo compiled a frame: shown, not counted
COMPILE_SYNC_SIGNAL = "compile_sync"
# Where its process cannot see the syncs torch warns of outside Python (observe.cpp_syncs), one
# event says why: a lower bound.
SYNCS_UNSEEN_SIGNAL = "syncs_unseen"
# Where a sync made in torch's C++ code is listed (its event's reason): no line of the user's is on
# any stack then.
CPP_SYNC_PLACE = ("in torch's C++ code outside Python (DDP's reducer, a communication hook): no "
                  "line of yours known")
# one health event per graph inductor compiled or took from its cache, its kernels the amount
KERNELS_SIGNAL = "kernels"
NO_USER_LINE = "(no line outside torch on the stack)"


def sync_lines(events: Sequence[HealthEvent]) -> list[str]:
    """``3 × sched.py:88 in step: t = self.timesteps[i].item()``: one line per place (and thread),
    first seen first.

    A sync with no line of the user's is listed by its reason, where it has one
    (:data:`CPP_SYNC_PLACE`)."""
    counts: dict[tuple[str, Optional[str]], int] = {}
    for event in events:
        place = (str(event.user_code) if event.user_code is not None
                 else event.reason or NO_USER_LINE, event.thread)
        counts[place] = counts.get(place, 0) + int(event.amount)
    return [f"{count} × {where}" + (f" (in thread {thread})" if thread else "")
            for (where, thread), count in counts.items()]


# The part of a training step a graph's kernels are of (observe.sources.kernel_counts says which
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
