"""Block-scoped budget assertions, one per budget kind.

Two ways in: the fixtures (``with nocompile_assert_max_recompiles(0): ...``)
and the plain functions (``with assert_max_recompiles(0): ...`` or
``@assert_max_recompiles(0)``), which need no fixture and so work in a
``unittest.TestCase`` method, in a helper a test calls, and outside pytest.
Inside a test the plugin watches, a block counts from that test's record;
anywhere else it captures on its own for its duration and restores torch's
logging state on exit.
"""

from __future__ import annotations

from contextlib import ContextDecorator, contextmanager
from typing import Any, Callable, ContextManager, Iterator, Optional, Protocol

from ...exceptions import (
    BudgetExceeded,
    CompileBudgetExceeded,
    GraphBreakBudgetExceeded,
    RecompileBudgetExceeded,
    TooFewCompiles,
)
from ...judge.budget import validate_count
from ...judge.torch_support import refuse_where_torch_lacks
from ...judge.verdict import over_budget
from ...output.report import explain, lower_bound
from ...record.log import RecompileLog
from ...record.process_events import ProcessEvents
from ...record.record import RecompileRecord
from ...vocabulary.events import ProcessInfo
from ...vocabulary.graph_break_events import GraphBreakEvent
from ...vocabulary.kinds import (
    COMPILES,
    GRAPH_BREAKS,
    KINDS,
    KINDS_BY_MARKER,
    MIN_COMPILES,
    RECOMPILES,
    BudgetKind,
)
from ...vocabulary.measures import Amount

__all__ = [  # the exceptions live in .exceptions; importing them from here keeps working
    "AssertMaxRecompiles", "BlockLog", "BudgetExceeded", "CompileBudgetExceeded",
    "GraphBreakBudgetExceeded", "RecompileBudgetExceeded", "TooFewCompiles",
    "assert_max_compiles", "assert_max_graph_breaks", "assert_max_recompiles",
    "assert_min_compiles", "block_assertion",
]


class BlockLog(RecompileLog):
    """What a ``with`` block recorded: its recompiles (as a sequence), and once it has ended,
    ``graph_breaks`` and ``counted``, the block's count of the asserted kind."""

    def __init__(self) -> None:
        super().__init__([])
        self.graph_breaks: list[GraphBreakEvent] = []
        self.counted: Optional[Amount] = None


class AssertMaxRecompiles(Protocol):
    """Type of the ``nocompile_assert_max_*`` fixtures, for annotations.

    ``with nocompile_assert_max_recompiles(0) as block: ...`` raises
    :class:`RecompileBudgetExceeded` on leaving the block when it recompiled
    more than allowed (exactly that many with ``exact=True``); ``block``
    lists the block's recompiles. The compile and graph-break fixtures work
    the same way, raising :class:`CompileBudgetExceeded` and
    :class:`GraphBreakBudgetExceeded` (all three are :class:`BudgetExceeded`).
    """

    def __call__(self, allowed: int, /, *, exact: bool = False) -> ContextManager[BlockLog]: ...


class _BudgetBlock(ContextDecorator):
    """One ``with`` block (or decorated call): counts one kind in a record between enter and exit.

    ``record`` None: the record of the watched test now running, else a
    capture of the block's own.
    """

    def __init__(self, kind: BudgetKind, record: Optional[RecompileRecord], allowed: int,
                 exact: bool, name: str) -> None:
        __tracebackhide__ = True  # a bad argument's error points at the user's line
        self._shown = f"{name}({allowed!r}{', exact=True' if exact else ''})"
        symbol = kind.measure.symbol
        validate_count(allowed, self._shown,
                       f"{name}({symbol}) or {name}({symbol}, exact=True), {symbol} "
                       f"{kind.measure.accepts}",
                       kind.measure)
        if not isinstance(exact, bool) or exact and kind.is_floor:
            accepted = "False (a floor has no exact form)" if kind.is_floor else "True or False"
            raise TypeError(f"{self._shown}: exact must be {accepted}, got {exact!r}")
        refuse_where_torch_lacks(kind, name)
        self._kind = kind
        self._given_record = record
        self._allowed = allowed
        self._exact = exact
        self._name = name
        self._log = BlockLog()
        self._own: Optional[_OwnCapture] = None

    def _recreate_cm(self) -> _BudgetBlock:
        # As a decorator: each call of the function is a block of its own.
        return _BudgetBlock(self._kind, self._given_record, self._allowed, self._exact, self._name)

    def __enter__(self) -> BlockLog:
        signals = self._kind.health_signals
        if signals:
            from ...observe import wanted_signals

            # before its own capture arms: the sources it reads arm with it
            wanted_signals.want(signals)
        record = self._given_record or _recording_now()
        if record is None:
            self._own = _OwnCapture(signals)
            record = self._own.record
        elif signals:
            _heard_before_dynamo(record)
        self._record = record
        record.read_children()
        # By pid (and which of that pid's processes): a child's rank may be known only later
        # (torch.distributed initialised in the block).
        self._start = {_pid(process.info): process.sizes() for process in record.processes()}
        return self._log

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        __tracebackhide__ = True  # the traceback should end at the user's with-block
        # what a source reports late (the syncs torch warns of outside Python) reaches the record
        signals = self._kind.health_signals
        if signals:
            from ...observe.capture import DYNAMO_LOGS

            DYNAMO_LOGS.settle(signals=signals)
        if self._own is not None:
            self._own.stop()
            self._own = None
        record, log = self._record, self._log
        record.read_children()
        new = {process.info: _new_events(process, self._start.get(_pid(process.info)))
               for process in record.processes()}
        counts = {process: events.count(self._kind, phase=None) for process, events in new.items()}
        log._events += [event for events in new.values() for event in events.recompiles]
        log.graph_breaks += [event for events in new.values() for event in events.graph_breaks]
        log.counted = sum(counts.values()) if self._kind.is_floor else max(counts.values())
        if exc_type is not None:
            return  # the block's own error wins
        from ...watching.watch import say_if_block_not_measured

        # (syncs without CUDA) once per run, as a marker's budget
        say_if_block_not_measured(self._kind, self._shown)
        if self._kind.is_floor:
            self._judge_floor(list(new.values()), int(log.counted))
            return
        over = [process for process, count in counts.items()
                if over_budget(self._kind, count, self._allowed, exact=self._exact,
                               limit_hit=bool(new[process].limit_hits))]
        if over:
            parts = []
            for process in over:
                headline = self._kind.headline(counts[process], self._allowed, self._shown,
                                               self._exact)
                if len(counts) > 1:  # children reported: say which process
                    headline = f"{record.process_label(process)}: {headline}"
                parts.append(explain(self._kind, headline, new[process].recompiles,
                                     new[process].limit_hits, new[process].graph_breaks,
                                     health=new[process].signals(self._kind.health_signals, None)
                                     + lower_bound(record.process_of(process), self._kind)))
            error = self._kind.exceeded("\n\n".join(parts))
            if "recompiles" in self._kind.explained_by:  # its text lists them: the section need not
                listed = [(*new[process].recompiles, *new[process].limit_hits) for process in over]
                setattr(error, _SHOWN, [event for events in listed for event in events])
            raise error

    def _judge_floor(self, new: list[ProcessEvents], count: int) -> None:
        """A floor is judged on the block's processes together (see .floors); a swallowed compile
        error fails it too."""
        __tracebackhide__ = True
        from ...judge.floors import compile_errors, why_too_few

        errors = any(compile_errors(events) for events in new)
        if over_budget(self._kind, count, self._allowed, compile_error=errors):
            headline = self._kind.headline(count, self._allowed, self._shown)
            raise self._kind.exceeded("\n".join([headline, *why_too_few(new, count)]))


# The recompiles (and limit hits) a block's failure lists, kept on the error it raises.
_SHOWN = "_nocompile_events_shown"


def events_shown_by(error: Optional[BaseException]) -> list[object]:
    """The events a failed block's error lists in its text (none for any other error), so that a
    report shows them once."""
    return getattr(error, _SHOWN, [])


def _heard_before_dynamo(record: RecompileRecord) -> None:
    """A watched test's record not attached yet (no dynamo so far): a source that needs none (syncs)
    hears it from now on. Whoever owns the record detaches it (the test's watch, at its end)."""
    from ...observe.capture import DYNAMO_LOGS

    if not DYNAMO_LOGS.attached(record):
        DYNAMO_LOGS.attach_early(record)


def _pid(process: Optional[ProcessInfo]) -> Optional[tuple[int, int]]:
    return None if process is None else (process.pid, process.nth)


def _new_events(process: ProcessEvents,
                start: Optional[tuple[int, int, int, int, int]]) -> ProcessEvents:
    """What a process recorded since ``start`` (its sizes when the block began; None: it had not
    reported then)."""
    recompiles, hits, breaks, compiles, health = start or (0, 0, 0, 0, 0)
    new = ProcessEvents(process.info)
    new.recompiles, new.limit_hits = process.recompiles[recompiles:], process.limit_hits[hits:]
    new.graph_breaks, new.compiles = process.graph_breaks[breaks:], process.compiles[compiles:]
    new.health = process.health[health:]
    return new


def block_assertion(kind: BudgetKind, record: RecompileRecord) -> AssertMaxRecompiles:
    """Make a fixture's callable for one kind and one test's record."""

    def assert_within(allowed: int, /, *, exact: bool = False) -> _BudgetBlock:
        __tracebackhide__ = True
        return _BudgetBlock(kind, record, allowed, exact, kind.assertion)

    assert_within.__name__ = kind.assertion
    return assert_within


def _standalone(kind: BudgetKind) -> Callable[..., _BudgetBlock]:
    name = kind.assertion.removeprefix("nocompile_")

    def assert_within(allowed: int, /, *, exact: bool = False) -> _BudgetBlock:
        __tracebackhide__ = True
        return _BudgetBlock(kind, None, allowed, exact, name)

    assert_within.__name__ = assert_within.__qualname__ = name
    bound = "fewer than N" if kind.is_floor else "more than N"
    exact = "" if kind.is_floor else " (with ``exact=True``: other than N)"
    assert_within.__doc__ = (
        f"``with {name}(N):`` or ``@{name}(N)``: raise {kind.exceeded.__name__} when the block "
        f"(or each call of the decorated function) has {bound} {kind.counts}{exact}. Needs no "
        "fixture: inside a test the plugin watches it counts from that test's record, anywhere "
        "else it captures on its own."
    )
    return assert_within


assert_max_recompiles = _standalone(RECOMPILES)
assert_max_graph_breaks = _standalone(GRAPH_BREAKS)
assert_max_compiles = _standalone(COMPILES)
assert_min_compiles = _standalone(MIN_COMPILES)


def __getattr__(name: str) -> Any:
    """``assert_max_<kind>`` of a kind a gate adds (``assert_max_kernels``), made when first asked
    for (PEP 562), as the core's kinds' are above."""
    kind = KINDS_BY_MARKER.get(name.removeprefix("assert_")) if name.startswith("assert_") else None
    if kind is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    assertion = globals()[name] = _standalone(kind)
    return assertion


# the gates' own too, for `from ... import *`
__all__ += [name for kind in KINDS if (name := kind.assertion.removeprefix("nocompile_"))
            not in __all__]


# Blocks with a capture of their own, innermost last: a nested block counts from the outer one's
# record.
_OWN_RECORDS: list[RecompileRecord] = []


def _recording_now() -> Optional[RecompileRecord]:
    """The record a fixture-less block counts from: an enclosing own capture's, else the watched
    test's."""
    if _OWN_RECORDS:
        return _OWN_RECORDS[-1]
    from ...watching.watch import recording_now

    return recording_now()


@contextmanager
def own_capture() -> Iterator[RecompileRecord]:
    """A record of its own, attached to this process's capture for the block, inside a watched test
    or not (the test's record, if any, hears the same events); blocks nested in it still count from
    their own record."""
    capture = _OwnCapture(nested_blocks_count_here=False)
    try:
        yield capture.record
    finally:
        capture.stop()


class _OwnCapture:
    """Capture for one block outside any watched test; ``stop`` restores torch's logging state (when
    no other sink is attached).

    A block of signals that need no dynamo (syncs) imports none: it captures them alone until
    something else imports dynamo.
    """

    def __init__(self, signals: tuple[str, ...] = (),
                 nested_blocks_count_here: bool = True) -> None:
        from ...observe import arrival, dynamo_state
        from ...observe.capture import DYNAMO_LOGS

        problem = dynamo_state.torch_problem()
        if problem is not None:
            raise RuntimeError(f"pytest-nocompile cannot count: {problem}")
        self.record = RecompileRecord()
        if signals and not arrival.dynamo_imported() and not DYNAMO_LOGS.needs_dynamo(signals):
            DYNAMO_LOGS.attach_early(self.record)
        else:
            DYNAMO_LOGS.attach(self.record)
        self.record.start_call()
        self._nested = nested_blocks_count_here
        if nested_blocks_count_here:
            _OWN_RECORDS.append(self.record)

    def stop(self) -> None:
        from ...observe.capture import DYNAMO_LOGS

        self.record.end_call()
        DYNAMO_LOGS.detach(self.record)
        if self._nested:
            _OWN_RECORDS.remove(self.record)
