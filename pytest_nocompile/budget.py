"""Budgets: what markers, command-line options and ini keys allow, validated and resolved.

Pure code: no torch, no pytest. Bad input raises :class:`BudgetUsageError`
with a message that says what was given and what is accepted; the plugin turns
it into an error of the test (markers) or a usage error of the run (options).

Precedence, lowest first: ini key < command-line option < marker. A marker
with ``None`` takes the test out of the budget the run set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

RECOMPILES = "max_recompiles"
GRAPH_BREAKS = "max_graph_breaks"

MARKER_FORMS = {
    RECOMPILES: "@pytest.mark.max_recompiles(N), N an int >= 0 or None, "
    "with optional isolate=True/False and strict=True/False",
    GRAPH_BREAKS: "@pytest.mark.max_graph_breaks(N), N an int >= 0 or None",
}
MARKER_KEYWORDS = {RECOMPILES: ("isolate", "strict"), GRAPH_BREAKS: ()}
MARKER_HELP = {
    RECOMPILES: "max_recompiles(N, isolate=True, strict=False): fail the test when its call phase has more "
    "than N TorchDynamo recompiles (N an int >= 0; None: no budget). isolate=False skips the "
    "torch._dynamo.reset() before the test; strict=True raises at the recompiling call. [pytest-nocompile]",
    GRAPH_BREAKS: "max_graph_breaks(N): fail the test when its call phase has more than N TorchDynamo "
    "graph breaks (N an int >= 0; None: no budget). [pytest-nocompile]",
}


class BudgetUsageError(ValueError):
    """A budget was given in a form the plugin does not accept."""


class MarkerBudget:
    """What one marker says: a count (None opts out) and its keyword options.

    A plain class, not a NamedTuple: making a NamedTuple class costs about
    0.4 ms at import, which every pytest run that loads the plugin would pay.
    """

    __slots__ = ("count", "isolate", "strict")

    def __init__(self, count: Optional[int], isolate: Optional[bool] = None, strict: Optional[bool] = None) -> None:
        self.count = count
        self.isolate = isolate
        self.strict = strict


@dataclass(frozen=True)
class RecompileBudget:
    """A test's resolved budgets; None means unbudgeted. ``isolate``/``strict`` None: the run's default."""

    max_recompiles: Optional[int] = None
    max_graph_breaks: Optional[int] = None
    isolate: Optional[bool] = None
    strict: Optional[bool] = None

    @property
    def budgeted(self) -> bool:
        return self.max_recompiles is not None or self.max_graph_breaks is not None

    def describe(self) -> str:
        return f"max_recompiles({self.max_recompiles})"


def validate_count(value: object, what: str, form: str) -> int:
    """Return ``value`` if it is a non-negative int (bool excluded), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetUsageError(f"{what}: expected an int >= 0, got {value!r} ({type(value).__name__}); use {form}")
    if value < 0:
        raise BudgetUsageError(f"{what}: expected an int >= 0, got {value!r}; use {form}")
    return value


def parse_option_count(text: str, option: str) -> int:
    """An option or ini value given as text: a non-negative int."""
    try:
        value = int(text.strip())
    except ValueError:
        raise BudgetUsageError(f"{option}: expected an int >= 0, got {text!r}") from None
    if value < 0:
        raise BudgetUsageError(f"{option}: expected an int >= 0, got {value}")
    return value


def budget_from_marker(args: Sequence[Any], kwargs: Mapping[str, Any], name: str = RECOMPILES) -> MarkerBudget:
    """Read ``max_recompiles(N, isolate=..., strict=...)`` or ``max_graph_breaks(N)`` arguments."""
    shown = _render_call(name, args, kwargs)
    form = MARKER_FORMS[name]
    unknown = sorted(set(kwargs) - set(MARKER_KEYWORDS[name]))
    if unknown:
        raise BudgetUsageError(f"{shown}: unknown keyword {', '.join(unknown)}; use {form}")
    if len(args) != 1:
        raise BudgetUsageError(f"{shown}: expected exactly one positional N, got {len(args)}; use {form}")
    for keyword in MARKER_KEYWORDS[name]:
        value = kwargs.get(keyword)
        if value is not None and not isinstance(value, bool):
            raise BudgetUsageError(f"{shown}: {keyword} must be True or False, got {value!r}; use {form}")
    count = None if args[0] is None else validate_count(args[0], shown, form)
    return MarkerBudget(count, kwargs.get("isolate"), kwargs.get("strict"))


def resolve(ini: Optional[int], cli: Optional[int], marker: Optional[MarkerBudget]) -> Optional[int]:
    """The budget in force: the marker's if there is one (None opting out), else CLI, else ini."""
    if marker is not None:
        return marker.count
    return cli if cli is not None else ini


def _render_call(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    rendered = [repr(arg) for arg in args] + [f"{key}={value!r}" for key, value in kwargs.items()]
    return f"{name}({', '.join(rendered)})"
