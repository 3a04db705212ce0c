"""What the capture hands its sinks (a test's record, a block assertion's, a child's reporter): one
call per record.

Typing only: the capture imports it under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol

if TYPE_CHECKING:
    from ..vocabulary.events import CodeLocation
    from ..vocabulary.module_names import CompiledModule


class Sink(Protocol):
    """What a sink takes: each method runs in the thread that compiled, once per record.

    ``compiling`` is the function dynamo was compiling (its first line) and
    ``module`` the module whose method that is, where dynamo compiled one
    (:mod:`.compiled_modules`).
    """

    def add_recompile(self, message: str, compile_id: Optional[str],
                      user_code: Optional[CodeLocation], thread: Optional[str],
                      module: Optional[CompiledModule] = None) -> None: ...
    def add_compile(self, compile_id: Optional[str], user_code: Optional[CodeLocation],
                    thread: Optional[str], compiling: Optional[CodeLocation] = None,
                    module: Optional[CompiledModule] = None) -> None: ...
    def add_limit_warning(self, message: str, compile_id: Optional[str],
                          thread: Optional[str]) -> None: ...
    def add_graph_break(self, message: str, module: Optional[CompiledModule] = None) -> None: ...
    def add_health(self, what: str, amount: float, reason: Optional[str],
                   compile_id: Optional[str], user_code: Optional[CodeLocation],
                   thread: Optional[str], compiling: Optional[CodeLocation] = None,
                   module: Optional[CompiledModule] = None) -> None: ...
