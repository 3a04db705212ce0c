"""What the capture hands its sinks (a test's record, a block assertion's, a child's reporter): one
event value per record dynamo logs, parsed once, for every sink.

Typing only: the capture imports it under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Union

if TYPE_CHECKING:
    from ..vocabulary.events import CompileEvent, HealthEvent, RecompileEvent, RecompileLimitHit
    from ..vocabulary.graph_break_events import GraphBreakEvent

    Event = Union[RecompileEvent, CompileEvent, GraphBreakEvent, RecompileLimitHit, HealthEvent]


class Sink(Protocol):
    """What a sink takes: run in the thread that compiled, once per record.

    The event is made as of the test's call phase (``phase="call"``) and of the
    test's own process: each sink places it in its own phase and process. Its
    ``compiling`` is the function dynamo was compiling (its first line) and
    ``module`` the module whose method that is, where dynamo compiled one
    (:mod:`.compiled_modules`).
    """

    def add(self, event: Event) -> None: ...
