"""Budgets: what markers, options and ini keys allow, for each kind of
:mod:`.kinds`, validated and resolved.

Pure code: no torch, no pytest. Bad input raises :class:`BudgetUsageError`
with a message that says what was given and what is accepted; the plugin turns
it into an error of the test (markers) or a usage error of the run (options).

Precedence, lowest first: ini key < command-line option < marker. A marker
with ``None`` takes the test out of that kind's budget. The keywords the
features add to every marker (``pytest_nocompile_marker_keywords``: the
built-in ``torch=``, a budget per torch version) may give another N.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from ..vocabulary.kinds import (
    GRAPH_BREAKS,
    KINDS,
    KINDS_BY_KEY,
    KINDS_BY_MARKER,
    RECOMPILES,
    USER_ONLY,
    BudgetKind,
)
from ..vocabulary.measures import COUNT, Amount, Measure


class BudgetUsageError(ValueError):
    """A budget was given in a form the plugin does not accept."""


class MarkerBudget:
    """What one marker says: a count (None opts out), its keyword options (None: not given),
    and where a feature's keyword gave the count.

    ``note`` is None where the count is the marker's N, else what a feature's
    keyword says of it (``torch <2.8``), said after where the marker sits. A
    plain class, not a NamedTuple: making a NamedTuple class costs about
    0.4 ms at import, which every pytest run that loads the plugin would pay.
    """

    __slots__ = ("count", "isolate", "strict", "user_only", "note")

    def __init__(self, count: Optional[Amount], isolate: Optional[bool] = None,
                 strict: Optional[bool] = None, user_only: Optional[bool] = None) -> None:
        self.count = count
        self.isolate = isolate
        self.strict = strict
        self.user_only = user_only  # max_graph_breaks's: count only the graph breaks outside torch
        self.note: Optional[str] = None


# A keyword a feature adds to every budget marker (pytest_nocompile_marker_keywords): a function
# of its value, the marker's kind and the marker as written, giving the count in force and a note
# on it, or None where the marker's N stays.
KeywordReader = Callable[[object, BudgetKind, str], Optional[tuple[Optional[Amount], str]]]
_NO_KEYWORDS: Mapping[str, KeywordReader] = {}


@dataclass(frozen=True)
class RecompileBudget:
    """A test's resolved budgets, one per kind; a kind absent (or None) is unbudgeted.

    ``limits`` holds ``(kind key, N)`` pairs in :data:`KINDS` order; read a
    kind's budget with :meth:`allowed` or as ``budget.max_recompiles``
    (the kind's marker name). ``isolate``/``strict`` None: the run's default.
    ``sources`` holds ``(kind key, where)`` pairs saying where a kind's N was
    set (e.g. ``from --max-recompiles``, ``marker on class TestStep``), so
    that a failure can send the reader to it. ``user_only``: the graph-break
    budget counts only the breaks in the user's code, not those inside torch
    (the marker's ``user_only=``, else the run's option or ini key).
    """

    limits: tuple[tuple[str, Amount], ...] = ()
    isolate: Optional[bool] = None
    strict: Optional[bool] = None
    sources: tuple[tuple[str, str], ...] = ()
    user_only: bool = False
    # Derived once: allowed() runs several times for every watched test, and
    # every result carries by_key(); budgets are shared between tests.
    _by_key: dict[str, Amount] = field(init=False, repr=False, compare=False, hash=False)
    _every_kind: dict[str, Optional[Amount]] = field(init=False, repr=False, compare=False,
                                                     hash=False)
    _has_floor: bool = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        by_key = dict(self.limits)
        object.__setattr__(self, "_by_key", by_key)
        object.__setattr__(self, "_has_floor", any(KINDS_BY_KEY[key].is_floor for key in by_key))
        object.__setattr__(self, "_every_kind", {kind.key: by_key.get(kind.key) for kind in KINDS})

    @classmethod
    def of(cls, allowed: Mapping[str, Optional[Amount]], isolate: Optional[bool] = None,
           strict: Optional[bool] = None, sources: Mapping[str, str] | None = None,
           user_only: bool = False) -> RecompileBudget:
        """A budget from ``{kind key: N or None}``, and where each N was set
        (``{kind key: where}``)."""
        limits = tuple((kind.key, allowed[kind.key]) for kind in KINDS
                       if allowed.get(kind.key) is not None)
        where = tuple((key, sources[key]) for key, _ in limits if key in sources) if sources else ()
        # The None values were dropped (the ignore below).
        return cls(limits, isolate, strict, where, user_only)  # type: ignore[arg-type]

    def allowed(self, kind: BudgetKind) -> Optional[Amount]:
        """This kind's N, or None when the test has no budget of that kind."""
        return self._by_key.get(kind.key)

    def by_key(self) -> dict[str, Optional[Amount]]:
        """Every kind's N (None: unbudgeted), by kind key; shared, so read it, do not change it."""
        return self._every_kind

    def __getattr__(self, name: str) -> Optional[Amount]:
        kind = KINDS_BY_MARKER.get(name)
        if kind is None or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return self.allowed(kind)

    @property
    def budgeted(self) -> bool:
        return bool(self.limits)

    @property
    def has_floor(self) -> bool:
        """A lower bound is set: a test that recorded nothing can fail it, so it
        is judged all the same."""
        return self._has_floor

    def source(self, kind: BudgetKind) -> Optional[str]:
        """Where this kind's N was set, e.g. ``from --max-recompiles`` or
        ``marker on the test``; None if not known."""
        return next((where for key, where in self.sources if key == kind.key), None)

    def counts_user_only(self, kind: BudgetKind) -> bool:
        """Whether this kind's budget counts only the user's events (graph breaks outside torch)."""
        return self.user_only and USER_ONLY in kind.keywords

    def describe(self, kind: BudgetKind = RECOMPILES) -> str:
        """The budget as a marker call and where it was set, e.g.
        ``max_recompiles(0) (from --max-recompiles)``."""
        source = self.source(kind)
        keyword = f", {USER_ONLY}=True" if self.counts_user_only(kind) else ""
        return f"{kind.marker}({self.allowed(kind)}{keyword})" + (f" ({source})" if source else "")


def validate_count(value: object, what: str, form: str, measure: Measure = COUNT) -> Amount:
    """Return ``value`` if the measure takes it (a non-negative int for counts, bool
    excluded), else raise."""
    if not measure.takes(value):
        raise BudgetUsageError(f"{what}: {measure.why_not(value)}; use {form}")
    return value  # type: ignore[return-value]  # checked by takes()


def parse_option_count(text: str, option: str, measure: Measure = COUNT) -> Amount:
    """An option or ini value given as text: a non-negative int (a number, for seconds)."""
    try:
        return measure.parse(text)
    except ValueError as error:
        raise BudgetUsageError(f"{option}: {error}") from None


def budget_from_marker(args: Sequence[Any], kwargs: Mapping[str, Any],
                       kind: BudgetKind = RECOMPILES,
                       keywords: Mapping[str, KeywordReader] = _NO_KEYWORDS) -> MarkerBudget:
    """Read a budget marker's arguments, e.g. ``max_recompiles(N, isolate=..., strict=...)``, and
    the features' ``keywords`` among them (``torch={"<2.8": N}``), each read last."""
    if len(args) == 1 and not kwargs.keys() - kind.keywords and all(
        value is None or isinstance(value, bool) for value in kwargs.values()
    ) and (args[0] is None or kind.measure.takes(args[0])):  # the usual case, checked cheaply
        return MarkerBudget(args[0], kwargs.get("isolate"), kwargs.get("strict"),
                            kwargs.get(USER_ONLY))
    shown = render_call(kind.marker, args, kwargs)
    form = kind.marker_form
    unknown = sorted(set(kwargs) - set(kind.keywords) - set(keywords))
    if unknown:
        raise BudgetUsageError(f"{shown}: unknown keyword {', '.join(unknown)}; use {form}")
    if len(args) != 1:
        raise BudgetUsageError(f"{shown}: expected exactly one positional N, got "
                               f"{len(args)}; use {form}")
    for keyword in kind.keywords:
        value = kwargs.get(keyword)
        if value is not None and not isinstance(value, bool):
            raise BudgetUsageError(f"{shown}: {keyword} must be True or False, got "
                                   f"{value!r}; use {form}")
    count = None if args[0] is None else validate_count(args[0], shown, form, kind.measure)
    read = MarkerBudget(count, kwargs.get("isolate"), kwargs.get("strict"), kwargs.get(USER_ONLY))
    for name, value in kwargs.items():
        reader = keywords.get(name)
        answer = None if reader is None else reader(value, kind, shown)
        if answer is not None:
            read.count, read.note = answer
    return read


def resolve(ini: Optional[Amount], cli: Optional[Amount],
            marker: Optional[MarkerBudget]) -> Optional[Amount]:
    """The budget in force: the marker's if there is one (None opting out), else CLI, else ini."""
    if marker is not None:
        return marker.count
    return cli if cli is not None else ini


def with_markers(default: RecompileBudget, markers: Mapping[str, MarkerBudget],
                 marked_on: Mapping[str, str] | None = None) -> RecompileBudget:
    """A test's budget: its markers (by kind key) over the run's defaults (ini and CLI).

    ``marked_on`` says, by kind key, where each marker was found (e.g.
    ``marker on class TestStep``). A graph-break marker's ``user_only=`` wins over the run's.
    """
    recompile_marker = markers.get(RECOMPILES.key)
    isolate = recompile_marker.isolate if recompile_marker else None
    strict = recompile_marker.strict if recompile_marker else None
    graph_break_marker = markers.get(GRAPH_BREAKS.key)
    marked_user_only = graph_break_marker.user_only if graph_break_marker else None
    user_only = default.user_only if marked_user_only is None else marked_user_only
    marked_on = marked_on or {}
    key = (default, isolate, strict, user_only,
           *((kind_key, marker.count, marked_on.get(kind_key))
             for kind_key, marker in markers.items()))
    # Most tests of a suite share a few budgets: made once each, not once per test.
    budget = _MERGED.get(key)
    if budget is None:
        sources = {**dict(default.sources), **marked_on}
        allowed = {kind.key: resolve(None, default.allowed(kind), markers.get(kind.key))
                   for kind in KINDS}
        budget = _MERGED[key] = RecompileBudget.of(allowed, isolate, strict, sources, user_only)
    return budget


_MERGED: dict[tuple[object, ...], RecompileBudget] = {}


def render_call(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """A marker's call as written, e.g.
    ``max_recompiles(0, torch={'<2.8': 1})``, for usage errors."""
    return (
        f"{name}("
        f"{', '.join([*map(repr, args), *(f'{key}={value!r}' for key, value in kwargs.items())])})")
