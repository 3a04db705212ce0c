"""Which health signals this process's sources report: every kind's, unless a pytest run narrowed
them to what it reads.

Apart from :mod:`.capture`, which loads only once something is captured: a run
narrows the set when collection ends and widens it as its tests and block
assertions ask, before dynamo is imported or without it ever being. A source
arms only where some signal of its own is wanted, so a watched test pays for
no source its run never reads. A process that reports to a parent (a child of
a watched test) narrows away only the kinds it is told of
(``BudgetKind.children_told_by``: syncs), where its parent says the run reads
none: it does not know what else its test reads.
"""

from __future__ import annotations

import sys
from typing import Collection, Optional

_CAPTURE = __package__ + ".capture"
_wanted: Optional[frozenset[str]] = None  # None: every kind's


def wanted_signals() -> frozenset[str]:
    """The signals the sources report now (one object until it changes)."""
    return every_kinds_signals() if _wanted is None else _wanted


def narrow(signals: Optional[frozenset[str]]) -> Optional[frozenset[str]]:
    """From the next arming on, sources report only ``signals`` (None: every kind's);
    returns what was wanted before."""
    global _wanted
    before, _wanted = _wanted, signals
    return before


def want(signals: Collection[str]) -> None:
    """Report ``signals`` too from now on; a capture with sinks arms the sources they need at
    once."""
    global _wanted
    if _wanted is None or _wanted.issuperset(signals):
        return
    _wanted = _wanted.union(signals)
    # not loaded: nothing is armed yet, and it reads the set when it arms
    capture = sys.modules.get(_CAPTURE)
    if capture is not None:
        capture.DYNAMO_LOGS.wanted_widened()


def every_kinds_signals() -> frozenset[str]:
    """The signals the kinds name (counted or shown): the cache kind's include every cache outcome a
    warm start reads. One object until the kinds change."""
    from ..vocabulary.kinds import KINDS, health_signals

    return KINDS.derived(health_signals)
