"""The kinds of budget: what each counts, and how its marker, option, failure and report read.
Pure code.

Every kind of budget (recompiles, graph breaks, compiles, a floor on
compiles, the compile-health kinds) is one entry of :data:`KINDS`. Markers,
options, ini keys, the summary table's columns, the JSON report, junit
properties and baselines all loop over that table, so a new kind is one
entry a gate adds (its ``pytest_nocompile_kinds``) plus the events it counts
(a health kind: the source its entry names, which reports its signals). The
budgets users give for them are read in :mod:`..judge.budget`.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Collection,
    Iterator,
    Literal,
    Mapping,
    Optional,
    Sequence,
    TypeVar,
)

from ..exceptions import (
    BudgetExceeded,
    CompileBudgetExceeded,
    GraphBreakBudgetExceeded,
    RecompileBudgetExceeded,
    TooFewCompiles,
)
from .measures import COUNT, Amount, Measure

if TYPE_CHECKING:
    from .events import HealthEvent

PLUGIN = "[pytest-nocompile]"
_Derived = TypeVar("_Derived")
_Item = TypeVar("_Item")


@dataclass(frozen=True)
class BudgetKind:
    """One kind of budget: what it counts and every name users see it by.

    ``key`` names the count (the JSON count key, the junit property
    ``nocompile_<key>``, the baseline's key and the record's tally);
    ``marker`` names the marker, the ini key, the option ``--<marker>`` and
    the JSON budget key. Only the call phase counts, for every kind.
    """

    key: str
    marker: str
    # The record's event list this kind counts, one event per unit: "compiles",
    # "recompiles" or "graph_breaks" (see record.ProcessEvents); or "health": the
    # sum of the amounts of the health events named in ``signals``.
    events: str
    noun: str  # singular; plural adds "s" ("es" after an s)
    counts: str  # what it counts, for help texts
    column: str  # the summary table's column header
    short: str  # the summary table's budget cell: f"{short}<={N}"
    keywords: tuple[str, ...] = ()  # the marker's keyword options besides N
    keyword_help: str = ""
    gated_by_baseline: bool = True
    limit_hit_fails: bool = False  # dynamo's recompile limit makes the count a lower bound
    # The recorded events that explain a count over budget, listed in its failure:
    # "recompiles" (with limit hits), "graph_breaks", or both.
    explained_by: tuple[str, ...] = ()
    exceeded: type[BudgetExceeded] = BudgetExceeded  # what a block assertion of this kind raises
    # For events="health": the signals counted (a torch counter as "group.name", or a source's own
    # name), and those only shown beside them (cache hits beside misses).
    # Sources report only signals some kind names.
    signals: tuple[str, ...] = ()
    shown_signals: tuple[str, ...] = ()
    # How the shown signals' call-phase totals read in a failure, after its headline (default: "name
    # total, ...").
    describe_shown: Optional[Callable[[Mapping[str, float]], str]] = None
    # The lines a failure lists for the events it counts (default: one entry per event).
    # A kind with its own lines also shows its events outside the call phase (in fixtures), not
    # counted.
    describe_events: Optional[Callable[[Sequence[HealthEvent]], list[str]]] = None
    # Every compile has some (seconds, instructions): its table column and junit properties only
    # where a test budgets it.
    shown_only_where_budgeted: bool = False
    shown_label: str = "shown"  # the word before the shown signals' totals, e.g. "breakdown"
    # the JSON report's key for those totals by signal (none without), e.g.
    # "compile_seconds_breakdown"
    shown_key: str = ""
    # a summary table column for the shown signals' total (from the totals under shown_key), where a
    # listed test has any
    shown_column: str = ""
    measure: Measure = COUNT  # how N is given and amounts are shown: whole counts, or seconds
    # The first torch whose dynamo gives what this kind counts;
    # an older torch makes its marker a usage error.
    since_torch: Optional[tuple[int, int]] = None
    # what that torch was the first to have, for the usage error ("with the ... counters")
    since_torch_has: str = ""
    # "max": N is the most allowed; "min": N is the fewest (min_compiles, "this really ran
    # compiled").
    bound: Literal["max", "min"] = "max"
    # The key of the kind whose count this one judges, when it has none of its own (min_compiles
    # judges "compiles"): no column, JSON count or junit property of its own, and no baseline entry.
    same_count_as: str = ""
    # a compile error dynamo swallowed (suppress_errors) fails it, whatever its count
    compile_error_fails: bool = False
    # A signal whose event says its process's count is a lower bound (its reason: why some were not
    # seen); the failure, the table (">=") and the JSON report (lower_bound) say so.
    lower_bound_signal: str = ""
    # "module:function" reading the compilation-metrics entries of a test's call for what its
    # signals did not count: function(entries, counted) gives the events to add (its signals', and
    # a lower_bound_signal one saying why), where ``counted`` is the call's totals by signal.
    # Asked at the call's end where a signal of the kind was read and dynamo recorded entries.
    metrics_witness: str = ""
    # The source of its signals, besides dynamo's logs and torch's counters: "module:Class", made
    # in every process that captures (children too) as Class(emit_health, wanted_signals), where
    # one of its ``signals`` is wanted. Kinds that share a source name the same one.
    source: str = ""
    # The source reports without dynamo (a test that never compiles can sync): armed for a record
    # attached before dynamo is imported.
    needs_dynamo: bool = True
    # "module:function" telling why this process cannot measure it (no GPU, a torch that moved
    # what it reads), or None where it can: asked where a test budgets it, which is then warned of
    # and has no count.
    why_not_measured: str = ""
    # A test that compiled nothing still says it was not measured (where budgeted, or in a run that
    # reports every count): syncs happen without compiling, compile time does not.
    unmeasured_shown_without_compiles: bool = False
    # The warning category that says it is not measured, "module:Class" (default
    # NotMeasuredWarning), and advice after it.
    not_measured_warning: str = ""
    not_measured_advice: str = ""
    # An environment variable, "1" in the processes a run's tests start where the run reads this
    # kind: a child process reads it only then, for a source that changes what a process does
    # (syncs turn torch's sync debug mode on). A kind without one a child reads always: it cannot
    # know what its test reads.
    children_told_by: str = ""
    # More variables of its source's that a child process reads (the stderr relay's): child_env()
    # passes them on, with children_told_by.
    children_read_variables: tuple[str, ...] = ()

    @property
    def is_floor(self) -> bool:
        return self.bound == "min"

    @property
    def count_key(self) -> str:
        """The key its count is shown and stored under (its own, or the kind's it judges)."""
        return self.same_count_as or self.key

    def budget_cell(self, allowed: Amount) -> str:
        """The summary table's budget cell, e.g. ``recompiles<=0`` or ``compiles>=1``."""
        return f"{self.short}{'>=' if self.is_floor else '<='}{allowed}"
    # The option's name where the marker's is too long for it: past 20 characters with "=N",
    # pytest's --help (80 columns) moves the help, and the "nocompile" in it, to the next line, out
    # of `pytest --help | grep nocompile`.
    short_option: Optional[str] = None

    @property
    def marker_form(self) -> str:
        options = "".join(f" and {word}=True/False" for word in self.keywords[1:])
        extra = f", with optional {self.keywords[0]}=True/False{options}" if self.keywords else ""
        symbol = self.measure.symbol
        return (f"@pytest.mark.{self.marker}({symbol}), {symbol} {self.measure.accepts} "
                f"or None{extra}")

    @property
    def marker_help(self) -> str:
        signature = "".join(f", {word}={'True' if word == 'isolate' else 'False'}"
                            for word in self.keywords)
        symbol = self.measure.symbol
        return (f"{self.marker}({symbol}{signature}): fail the test when its call phase has "
                f"{'fewer' if self.is_floor else 'more'} than {symbol} {self.counts} "
                f"({symbol} {self.measure.accepts}; None: no budget).{self.keyword_help} "
                f'torch={{"<X.Y": {symbol}}} gives another {symbol} on those torch versions. '
                f'{PLUGIN}')

    @property
    def health_signals(self) -> tuple[str, ...]:
        """The health events a failure of this kind lists (its signals), sums up (its shown signals)
        or reads as a lower bound."""
        return (*self.signals, *self.shown_signals,
                *((self.lower_bound_signal,) if self.lower_bound_signal else ()))

    @property
    def option(self) -> str:
        return self.short_option or "--" + self.marker.replace("_", "-")

    @property
    def assertion(self) -> str:
        """The block-assertion fixture's name, e.g. ``nocompile_assert_max_recompiles``."""
        return f"nocompile_assert_{self.marker}"

    def headline(self, count: Amount, allowed: Amount, budget: str, exact: bool = False) -> str:
        """First line of a failure, e.g. ``3 recompiles > max_recompiles(0)``, for a count already
        judged over."""
        counted = self.measure.amount(count, self.noun)
        if self.is_floor:
            if count < allowed:
                return f"{counted} < {budget}"
            return f"{counted} within {budget}, but dynamo swallowed a compile error"
        if count > allowed:
            return f"{counted} > {budget}"
        if exact and count != allowed:
            return f"{counted} != {budget}"
        return f"{counted} within {budget}, but dynamo hit its recompile limit"


# The keyword of a kind whose events can be torch's own (graph breaks inside torch): True counts
# only the user's; the option and ini key that say so for the run (a marker's keyword wins).
USER_ONLY = "user_only"
USER_ONLY_OPTION = "--nocompile-graph-breaks-user-only"
USER_ONLY_INI = "nocompile_graph_breaks_user_only"

# The logs of dynamo this process's capture could not switch on, by artifact (``recompiles``,
# ``graph_breaks``, ``graph_code``): why (a torch that moved what it calls). Written by the capture;
# empty nearly always, and only then do the core kinds below go unmeasured, as a gate does on a
# torch too old for it.
LOGS_NOT_READ: dict[str, str] = {}
_LOG_NOT_READ = __name__ + ":{}_not_read"  # each core kind's BudgetKind.why_not_measured


def _log_not_read(artifact: str) -> Optional[str]:
    why = LOGS_NOT_READ.get(artifact)
    return None if why is None else f"{why}; run `python -m pytest_nocompile doctor`"


def recompiles_not_read() -> Optional[str]:
    return _log_not_read("recompiles")


def graph_breaks_not_read() -> Optional[str]:
    return _log_not_read("graph_breaks")


def compiles_not_read() -> Optional[str]:
    return _log_not_read("graph_code")


RECOMPILES = BudgetKind(
    key="recompiles",
    marker="max_recompiles",
    events="recompiles",
    noun="recompile",
    counts="TorchDynamo recompiles",
    column="recompiles",
    short="recompiles",
    keywords=("isolate", "strict"),
    keyword_help=" isolate=False skips the torch._dynamo.reset() before the test; "
    "strict=True raises at the recompiling call.",
    limit_hit_fails=True,
    explained_by=("recompiles",),
    exceeded=RecompileBudgetExceeded,
    why_not_measured=_LOG_NOT_READ.format("recompiles"),
    unmeasured_shown_without_compiles=True,
)
GRAPH_BREAKS = BudgetKind(
    key="graph_breaks",
    marker="max_graph_breaks",
    events="graph_breaks",
    noun="graph break",
    counts="TorchDynamo graph breaks",
    column="graph breaks",
    short="breaks",
    keywords=(USER_ONLY,),
    keyword_help=" user_only=True counts only the graph breaks in your code, not those inside "
    "torch (a compiled optimizer step's).",
    explained_by=("graph_breaks",),
    exceeded=GraphBreakBudgetExceeded,
    why_not_measured=_LOG_NOT_READ.format("graph_breaks"),
    unmeasured_shown_without_compiles=True,
)
COMPILES = BudgetKind(
    key="compiles",
    marker="max_compiles",
    events="compiles",
    noun="compile",
    counts="graphs compiled by TorchDynamo (first compiles, recompiles and each piece a graph "
    "break makes)",
    column="compiles",
    short="compiles",
    explained_by=("recompiles", "graph_breaks"),  # the graphs beyond one per compiled frame
    exceeded=CompileBudgetExceeded,
    why_not_measured=_LOG_NOT_READ.format("compiles"),
    unmeasured_shown_without_compiles=True,
)

# A lower bound: the test for "this really ran compiled" (a compile=True test that ran eager passes
# every max_).
MIN_COMPILES = BudgetKind(
    key="min_compiles",
    marker="min_compiles",
    events="compiles",
    noun="compile",
    counts="graphs compiled by TorchDynamo; a compile error dynamo swallowed (suppress_errors) "
    "fails it too",
    column="",
    short="compiles",
    # A fall in compiles is as often a fix (fewer graph breaks, a recompile gone) as a loss: the
    # marker states the floor, a baseline gates rises only.
    gated_by_baseline=False,
    exceeded=TooFewCompiles,
    bound="min",
    same_count_as="compiles",
    compile_error_fails=True,
    why_not_measured=_LOG_NOT_READ.format("compiles"),
    unmeasured_shown_without_compiles=True,
)


def resolve(path: str) -> Any:
    """The object a kind names by ``"module:attribute"`` (its source, its not-measured reason),
    imported when first asked for: a run that never reads a kind never loads its source."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def why_not_measured(kind: BudgetKind) -> Optional[str]:
    """Why ``kind`` cannot be measured in this process
    (``syncs were not observed: torch.cuda.is_available() is False``), or None when it can."""
    return resolve(kind.why_not_measured)() if kind.why_not_measured else None


class KindTable(Sequence[BudgetKind]):
    """The kinds of budget, in the summary table's column order: the core's own (compiles,
    recompiles, graph breaks, the compile floor), then those each gate adds.

    A gate is a plugin whose ``pytest_nocompile_kinds`` hook returns its kinds
    (:mod:`..hookspecs`). The built-in gates are named by module in the
    package's ``__init__`` and loaded the first time the table is read, so a
    script, a ``unittest`` run or a child process (which have no pytest hooks)
    know them too; a child also loads the gates its parent's run named
    (:data:`GATES_VAR`). The table is read-only to everything but
    :meth:`add` and :meth:`remove`, which the plugin calls as plugins come and
    go; whatever is derived from it (:meth:`derived`) is made again after a change.
    """

    def __init__(self, core: Sequence[BudgetKind]) -> None:
        self._kinds: tuple[BudgetKind, ...] = tuple(core)
        self._gate_modules: Optional[list[str]] = None  # None: not loaded yet
        self._derived: dict[Callable[[Sequence[BudgetKind]], Any], Any] = {}

    def _loaded(self) -> tuple[BudgetKind, ...]:
        if self._gate_modules is None:
            self._gate_modules = []
            for name in _built_in_gates():
                self._load_gate(importlib.import_module(name))
            for name in _gates_named_by_parent():
                try:
                    module = importlib.import_module(name)
                except ImportError:  # a conftest's gate, in a child started elsewhere: left out
                    continue
                self._load_gate(module)
        return self._kinds

    def _load_gate(self, module: types.ModuleType) -> None:
        """The kinds of the gate ``module``, from its own ``pytest_nocompile_kinds``."""
        self._gate_modules.append(module.__name__)  # type: ignore[union-attr]
        self.add(module.pytest_nocompile_kinds() or ())

    def __iter__(self) -> Iterator[BudgetKind]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    def __getitem__(self, index: Any) -> Any:
        return self._loaded()[index]

    def __repr__(self) -> str:
        return f"KindTable({', '.join(kind.key for kind in self)})"

    def add(self, kinds: Sequence[BudgetKind]) -> list[BudgetKind]:
        """Add ``kinds`` at the end; returns those new to the table (a kind already there is not
        added again; another kind whose key or marker is taken raises ValueError)."""
        self._loaded()  # the built-in gates' columns come first
        added = []
        for kind in kinds:
            known = {known.key: known for known in self._kinds}
            if known.get(kind.key) is kind:
                continue
            markers = {known.marker for known in self._kinds}
            if kind.key in known or kind.marker in markers:
                raise ValueError(f"{PLUGIN} a budget kind with the key {kind.key!r} or the "
                                 f"marker {kind.marker!r} is already there")
            self._kinds = (*self._kinds, kind)
            added.append(kind)
        if added:
            self._derived.clear()
        return added

    def remove(self, kinds: Collection[BudgetKind]) -> None:
        """Take ``kinds`` out again (the gates of a run that ended: a nested run's conftest)."""
        if kinds:
            self._kinds = tuple(kind for kind in self._kinds if kind not in kinds)
            self._derived.clear()

    def derived(self, make: Callable[[Sequence[BudgetKind]], _Derived]) -> _Derived:
        """``make(kinds)``, kept until the table changes (``make``: a module-level function)."""
        try:
            return self._derived[make]
        except KeyError:
            value = self._derived[make] = make(self._loaded())
            return value

    def gate_modules(self) -> list[str]:
        """The gate modules loaded by name (built in, or named by a parent)."""
        self._loaded()
        return list(self._gate_modules or ())


# The environment variable by which a run names its gates' modules to its child processes
# (comma-separated), besides the built-in ones.
GATES_VAR = "PYTEST_NOCOMPILE_GATES"


def _built_in_gates() -> tuple[str, ...]:
    """The built-in gates' modules, as the package names them (see its ``__init__``)."""
    package = sys.modules[__package__.rpartition(".")[0]]
    return tuple(getattr(package, "BUILT_IN_GATES", ()))


def _gates_named_by_parent() -> list[str]:
    return [name for name in os.environ.get(GATES_VAR, "").split(",") if name]


class _Index(Mapping[str, BudgetKind]):
    """The table's kinds by one attribute (``marker`` or ``key``), as the table is now."""

    def __init__(self, table: KindTable, make: Callable[[Sequence[BudgetKind]],
                                                        dict[str, BudgetKind]]) -> None:
        self._table = table
        self._make = make

    def __getitem__(self, name: str) -> BudgetKind:
        return self._table.derived(self._make)[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table.derived(self._make))

    def __len__(self) -> int:
        return len(self._table.derived(self._make))


class Selection(Sequence[_Item]):
    """What ``make`` picks from the table (some of its kinds, their keys), as the table is now."""

    def __init__(self, table: KindTable,
                 make: Callable[[Sequence[BudgetKind]], tuple[_Item, ...]]) -> None:
        self._table = table
        self._make = make

    def __iter__(self) -> Iterator[_Item]:
        return iter(self._table.derived(self._make))

    def __len__(self) -> int:
        return len(self._table.derived(self._make))

    def __getitem__(self, index: Any) -> Any:
        return self._table.derived(self._make)[index]


def kind_sources(kinds: Sequence[BudgetKind]) -> tuple[str, ...]:
    """The sources the kinds name, each once, in the table's order."""
    return tuple(dict.fromkeys(kind.source for kind in kinds if kind.source))


def health_signals(kinds: Sequence[BudgetKind]) -> frozenset[str]:
    """Every health signal the kinds name (counted or shown)."""
    return frozenset(signal for kind in kinds for signal in kind.health_signals)


def told_to_children(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    """The kinds a child process reads only where its test's run reads them
    (``children_told_by``)."""
    return tuple(kind for kind in kinds if kind.children_told_by)


def _by_marker(kinds: Sequence[BudgetKind]) -> dict[str, BudgetKind]:
    return {kind.marker: kind for kind in kinds}


def _by_key(kinds: Sequence[BudgetKind]) -> dict[str, BudgetKind]:
    return {kind.key: kind for kind in kinds}


def _counted(kinds: Sequence[BudgetKind]) -> tuple[BudgetKind, ...]:
    return tuple(kind for kind in kinds if not kind.same_count_as)


# The core's own kinds, counted from dynamo's logs: unmeasured only where LOGS_NOT_READ says so.
LOG_KINDS = (COMPILES, RECOMPILES, GRAPH_BREAKS, MIN_COMPILES)
KINDS = KindTable(LOG_KINDS)
KINDS_BY_MARKER: Mapping[str, BudgetKind] = _Index(KINDS, _by_marker)
KINDS_BY_KEY: Mapping[str, BudgetKind] = _Index(KINDS, _by_key)
# The kinds with a count of their own: the table's columns, the JSON report's counts, junit
# properties.
COUNTED_KINDS: Sequence[BudgetKind] = Selection(KINDS, _counted)


# The contracts' markers: they judge how a test compiled rather than how much. The contracts
# feature reads and judges them (pytest_nocompile_read_contract).
DYNAMIC_DIMS = "dynamic_dims"
SAME_ACROSS_RANKS = "same_across_ranks"
CONTRACT_MARKERS = (DYNAMIC_DIMS, SAME_ACROSS_RANKS)  # in the order their failures are listed
# dynamic_dims's one keyword that is not an argument name: dynamo's own 0/1 specialisation breaks
# the contract too.
FRAMEWORK_KEYWORD = "framework_specialisation"
CONTRACT_MARKER_HELP = (
    f"{DYNAMIC_DIMS}(x=0, y=(0, 1), {FRAMEWORK_KEYWORD}=False): fail the test when a recompile "
    "in its call phase specialised one of these dims of these arguments of a compiled function "
    "(the user's code branching on the size, or the dim compiled static); "
    f"{FRAMEWORK_KEYWORD}=True fails dynamo's own 0/1 specialisation too. {PLUGIN}",
    f"{SAME_ACROSS_RANKS}: fail the test when the processes it starts (ranks, spawned children) "
    f"did not compile the same functions with the same compile and recompile counts. {PLUGIN}",
)
DYNAMIC_DIMS_FORM = (f"@pytest.mark.{DYNAMIC_DIMS}(x=0, y=(0, 1)), each keyword an argument of the "
                     "compiled function and each value a dim or a tuple of dims (ints >= 0), with "
                     f"optional {FRAMEWORK_KEYWORD}=True/False")
SAME_ACROSS_RANKS_FORM = f"@pytest.mark.{SAME_ACROSS_RANKS}, without arguments"


class ContractUsageError(ValueError):
    """A contract marker was given in a form the plugin does not accept."""
