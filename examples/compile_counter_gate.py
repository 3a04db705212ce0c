"""A gate of a library's own: budget the graphs a library's compile counter counts (as vLLM's
``CompilationCounter`` does), with its own marker, option, ini key, block assertion, table column
and JSON entry. Load it as a plugin: ``pytest -p compile_counter_gate``, or ``pytest_plugins``
in a conftest."""

from typing import Any, Callable, Sequence

from pytest_nocompile import BudgetKind

SIGNAL = "library_graphs"  # one health event per rise of the counter, the rise its amount


class CompilationCounter:
    """Stands in for the library's counter: its code adds to ``num_graphs_seen``."""

    num_graphs_seen = 0


COUNTER = CompilationCounter()


class _Reporting(CompilationCounter):
    emit: Callable[..., None] = staticmethod(lambda *_: None)

    def __setattr__(self, name: str, value: Any) -> None:
        rise = value - self.num_graphs_seen if name == "num_graphs_seen" else 0
        super().__setattr__(name, value)
        if rise > 0:
            _Reporting.emit(SIGNAL, rise)


class CounterSource:
    """The source: while armed, each rise of the counter is a health event."""

    signals = frozenset((SIGNAL,))
    needs_dynamo = False  # the library counts whether or not dynamo is imported

    def __init__(self, emit: Callable[..., None], wanted: Callable[[], Any]) -> None:
        self._emit = emit

    def arm(self) -> None:
        _Reporting.emit = staticmethod(self._emit)
        COUNTER.__class__ = _Reporting

    def disarm(self) -> None:
        COUNTER.__class__ = CompilationCounter


LIBRARY_GRAPHS = BudgetKind(
    key="library_graphs", marker="max_library_graphs", events="health", noun="library graph",
    counts="graphs the library's compilation counter counted", column="lib graphs",
    short="lib graphs", signals=(SIGNAL,), source=f"{__name__}:CounterSource",
    needs_dynamo=False,
    describe_events=lambda events: [f"+{event.amount:g}" + (f" at {event.user_code}" if
                                                             event.user_code else "")
                                    for event in events])


def pytest_nocompile_kinds() -> Sequence[BudgetKind]:
    return (LIBRARY_GRAPHS,)
