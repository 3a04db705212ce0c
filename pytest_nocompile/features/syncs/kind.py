"""The syncs kind: what it counts, and how a failure lists syncs, grouped by the user's line. Pure
code.

A test over ``max_syncs`` may sync a thousand times from one line of a
scheduler: one line per place in the user's code, counted
(``3 × sched.py:88 in step: t = self.timesteps[i].item()``), says more than a
thousand entries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from ...exceptions import SyncBudgetExceeded
from ...vocabulary.kinds import BudgetKind

if TYPE_CHECKING:
    from ...vocabulary.events import HealthEvent

SYNC_SIGNAL = "sync"  # one health event per synchronizing CUDA operation (.sync_warnings)
# one per synchronizing CUDA operation made while dynamo compiled a frame: shown, not counted
COMPILE_SYNC_SIGNAL = "compile_sync"
# Where its process cannot see the syncs torch warns of outside Python (.cpp_syncs), one
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


# "1" in the environment of the processes a test starts where the test's run reads syncs: only
# then does a child turn torch's sync debug mode on.
READS_SYNCS_VAR = "PYTEST_NOCOMPILE_SYNCS"
# what this process's stderr passes through (..sync_relay.stderr_relay.RELAY_VAR, named here
# without loading the relay)
RELAY_VAR = "PYTEST_NOCOMPILE_STDERR_RELAY"


def _compile_syncs(totals: Mapping[str, float]) -> str:
    return f"{int(totals.get(COMPILE_SYNC_SIGNAL, 0))} while dynamo compiled"


SYNCS = BudgetKind(
    key="syncs",
    marker="max_syncs",
    events="health",
    noun="sync",
    counts="device-to-host syncs (each synchronizing CUDA operation torch's sync debug mode warns "
    "of; needs CUDA)",
    column="syncs",
    short="syncs",
    signals=(SYNC_SIGNAL,),  # .sync_warnings
    # A compile's own syncs (inductor compiling, autotuning) are paid once, not per step: shown
    # beside the count, not in it.
    shown_signals=(COMPILE_SYNC_SIGNAL,),
    describe_shown=_compile_syncs,
    shown_label="not counted",
    shown_key="syncs_while_compiling",
    describe_events=sync_lines,
    exceeded=SyncBudgetExceeded,
    gated_by_baseline=False,
    # .cpp_syncs: the syncs torch warns of outside Python, where not seen
    lower_bound_signal=SYNCS_UNSEEN_SIGNAL,
    source=f"{__package__}.sync_warnings:SyncWarnings",
    needs_dynamo=False,
    why_not_measured=f"{__package__}.sync_warnings:why_syncs_not_observed",
    unmeasured_shown_without_compiles=True,
    # The sync debug mode changes what a process does (a warning at each sync): a child turns it
    # on only where its test's run reads syncs.
    children_told_by=READS_SYNCS_VAR,
    children_read_variables=(RELAY_VAR,),
)
