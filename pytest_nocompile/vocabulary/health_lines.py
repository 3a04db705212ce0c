"""How a failure lists syncs: grouped by the user's line. Pure code.

A test over ``max_syncs`` may sync a thousand times from one line of a
scheduler: one line per place in the user's code, counted
(``3 × sched.py:88 in step: t = self.timesteps[i].item()``), says more than a
thousand entries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

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
