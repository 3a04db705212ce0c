"""Recompile budgets: what a marker or fixture call allows, validated.

Pure code: no torch, no pytest. Bad input raises :class:`BudgetUsageError`
with a message that says what was given and what is accepted; the plugin turns
it into an error of the test that carries it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

MARKER_NAME = "max_recompiles"
MARKER_FORM = "@pytest.mark.max_recompiles(N) or max_recompiles(N, isolate=False), N an int >= 0"
MARKER_HELP = (
    "max_recompiles(N, isolate=True): fail the test when its call phase has more than N "
    "TorchDynamo recompiles (N an int >= 0). isolate=False skips the torch._dynamo.reset() "
    "done before the test. [pytest-nocompile]"
)


class BudgetUsageError(ValueError):
    """A budget was given in a form the plugin does not accept."""


@dataclass(frozen=True)
class RecompileBudget:
    """How many recompiles a test may make; ``isolate`` None means the session default."""

    max_recompiles: int
    isolate: bool | None = None

    def describe(self) -> str:
        return f"max_recompiles({self.max_recompiles})"


def validate_count(value: object, what: str, form: str) -> int:
    """Return ``value`` if it is a non-negative int (bool excluded), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetUsageError(f"{what}: expected an int >= 0, got {value!r} ({type(value).__name__}); use {form}")
    if value < 0:
        raise BudgetUsageError(f"{what}: expected an int >= 0, got {value!r}; use {form}")
    return value


def budget_from_marker(args: Sequence[Any], kwargs: Mapping[str, Any]) -> RecompileBudget:
    """Read ``max_recompiles(N, isolate=True)`` marker arguments into a budget."""
    shown = _render_call(MARKER_NAME, args, kwargs)
    unknown = sorted(set(kwargs) - {"isolate"})
    if unknown:
        raise BudgetUsageError(f"{shown}: unknown keyword {', '.join(unknown)}; use {MARKER_FORM}")
    if len(args) != 1:
        raise BudgetUsageError(f"{shown}: expected exactly one positional N, got {len(args)}; use {MARKER_FORM}")
    isolate = kwargs.get("isolate")
    if isolate is not None and not isinstance(isolate, bool):
        raise BudgetUsageError(f"{shown}: isolate must be True or False, got {isolate!r}; use {MARKER_FORM}")
    return RecompileBudget(validate_count(args[0], shown, MARKER_FORM), isolate)


def _render_call(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    rendered = [repr(arg) for arg in args] + [f"{key}={value!r}" for key, value in kwargs.items()]
    return f"{name}({', '.join(rendered)})"
