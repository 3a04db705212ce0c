"""The kinds of budget: what each counts, and how its marker, option, failure and report read.
Pure code.

Every kind of budget (recompiles, graph breaks, compiles, a floor on
compiles, the compile-health kinds) is one entry of :data:`KINDS`. Markers,
options, ini keys, the summary table's columns, the JSON report, junit
properties and baselines all loop over that table, so a new kind is one
entry here plus the events it counts (a health kind: a source in
``observe/`` that reports its signals). The budgets users give for them are
read in :mod:`..judge.budget`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal, Mapping, Optional, Sequence

from ..exceptions import (
    BudgetExceeded,
    CacheMissBudgetExceeded,
    CompileBudgetExceeded,
    CompileInstructionBudgetExceeded,
    CompileTimeBudgetExceeded,
    CudagraphRerecordBudgetExceeded,
    CudagraphSkipBudgetExceeded,
    GraphBreakBudgetExceeded,
    KernelBudgetExceeded,
    RecompileBudgetExceeded,
    SyncBudgetExceeded,
    TooFewCompiles,
)
from .compile_cost import COMPILE_INSTRUCTIONS, COMPILE_SECONDS, PART_SIGNALS, breakdown_text
from .health_lines import (
    COMPILE_SYNC_SIGNAL,
    KERNELS_SIGNAL,
    SYNC_SIGNAL,
    SYNCS_UNSEEN_SIGNAL,
    kernel_lines,
    sync_lines,
)
from .measures import COUNT, INSTRUCTIONS, SECONDS, Amount, Measure

if TYPE_CHECKING:
    from .events import HealthEvent

PLUGIN = "[pytest-nocompile]"


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
)

COMPILE_SECONDS_KIND = BudgetKind(
    key="compile_seconds",
    marker="max_compile_seconds",
    events="health",
    noun="compile time",
    counts="seconds of compile time (each frame dynamo compiled: dynamo, AOT autograd, inductor, "
    "autotuning; and backward graphs compiled at their first backward())",
    column="compile s",
    short="compile s",
    # seconds vary from run to run: max_compile_instructions is the steady one
    gated_by_baseline=False,
    exceeded=CompileTimeBudgetExceeded,
    signals=(COMPILE_SECONDS,),
    shown_signals=PART_SIGNALS,
    describe_shown=breakdown_text,
    shown_label="breakdown",
    shown_key="compile_seconds_breakdown",
    shown_only_where_budgeted=True,
    measure=SECONDS,
)
COMPILE_INSTRUCTIONS_KIND = BudgetKind(
    key="compile_instructions",
    marker="max_compile_instructions",
    events="health",
    noun="compile instruction",
    counts="CPU instructions dynamo counted compiling frames (torch's own counter; Linux with perf "
    "events only)",
    column="compile instr",
    short="instructions",
    gated_by_baseline=False,
    exceeded=CompileInstructionBudgetExceeded,
    signals=(COMPILE_INSTRUCTIONS,),
    measure=INSTRUCTIONS,
    since_torch=(2, 5),
    shown_only_where_budgeted=True,
)

CACHE_MISSES = BudgetKind(
    key="cache_misses",
    marker="max_cache_misses",
    events="health",
    noun="cache miss",
    counts="compile-cache misses (inductor's FX graph cache and the AOTAutograd cache, each miss "
    "and bypass)",
    column="cache misses",
    short="misses",
    # A bypass pays a cold compile as a miss does: it counts, and shows torch's reason.
    signals=("aot_autograd.autograd_cache_miss", "aot_autograd.autograd_cache_bypass",
             "inductor.fxgraph_cache_miss", "inductor.fxgraph_cache_bypass"),
    shown_signals=("aot_autograd.autograd_cache_hit", "inductor.fxgraph_cache_hit"),
    shown_column="cache hits",
    exceeded=CacheMissBudgetExceeded,
    # Misses depend on what the cache held before the run (another machine, an earlier run), not on
    # the code alone.
    gated_by_baseline=False,
    shown_label="not counted",
    shown_key="cache_hits",
    since_torch=(2, 5),
    since_torch_has="with the AOTAutograd cache's counters",
)

CUDAGRAPH_RERECORDS = BudgetKind(
    key="cudagraph_rerecords",
    marker="max_cudagraph_rerecords",
    events="health",
    noun="CUDA-graph re-record",
    counts="CUDA-graph re-recordings (mode='reduce-overhead': a function's graph recorded again "
    "after its first recording; needs CUDA)",
    column="cg rerecords",
    short="cg rerecords",
    signals=("cudagraph_rerecord",),  # cudagraph_messages.RERECORD
    short_option="--max-cg-rerecords",
    exceeded=CudagraphRerecordBudgetExceeded,
)
CUDAGRAPH_SKIPS = BudgetKind(
    key="cudagraph_skips",
    marker="max_cudagraph_skips",
    events="health",
    noun="CUDA-graph skip",
    counts="graphs that inductor ran without CUDA graphs under mode='reduce-overhead' (mutated "
    "inputs, CPU tensors, ...; needs CUDA)",
    column="cg skips",
    short="cg skips",
    signals=("cudagraph_skip",),  # cudagraph_messages.SKIP
    short_option="--max-cg-skips",
    exceeded=CudagraphSkipBudgetExceeded,
)

SYNCS = BudgetKind(
    key="syncs",
    marker="max_syncs",
    events="health",
    noun="sync",
    counts="device-to-host syncs (each synchronizing CUDA operation torch's sync debug mode warns "
    "of; needs CUDA)",
    column="syncs",
    short="syncs",
    signals=(SYNC_SIGNAL,),  # observe.sync_warnings
    # A compile's own syncs (inductor compiling, autotuning) are paid once, not per step: shown
    # beside the count, not in it.
    shown_signals=(COMPILE_SYNC_SIGNAL,),
    describe_shown=lambda totals: (f"{int(totals.get(COMPILE_SYNC_SIGNAL, 0))} "
                                   f"while dynamo compiled"),
    shown_label="not counted",
    shown_key="syncs_while_compiling",
    describe_events=sync_lines,
    exceeded=SyncBudgetExceeded,
    gated_by_baseline=False,
    # observe.cpp_syncs: the syncs torch warns of outside Python, where not seen
    lower_bound_signal=SYNCS_UNSEEN_SIGNAL,
)
KERNELS = BudgetKind(
    key="kernels",
    marker="max_kernels",
    events="health",
    noun="kernel",
    counts="kernels inductor generated for the graphs compiled (a graph from the FX graph cache "
    "counts the kernels it holds)",
    column="kernels",
    short="kernels",
    signals=(KERNELS_SIGNAL,),  # observe.kernel_counts
    describe_events=kernel_lines,
    exceeded=KernelBudgetExceeded,
    gated_by_baseline=False,
    # Every inductor compile has some (as every compile has seconds): a table column and junit
    # property only where budgeted.
    shown_only_where_budgeted=True,
)

# In the summary table's column order; new kinds go at the end.
KINDS: tuple[BudgetKind, ...] = (COMPILES, RECOMPILES, GRAPH_BREAKS, MIN_COMPILES,
                                 COMPILE_SECONDS_KIND, COMPILE_INSTRUCTIONS_KIND, CACHE_MISSES,
                                 CUDAGRAPH_RERECORDS, CUDAGRAPH_SKIPS, SYNCS, KERNELS)
KINDS_BY_MARKER: dict[str, BudgetKind] = {kind.marker: kind for kind in KINDS}
KINDS_BY_KEY: dict[str, BudgetKind] = {kind.key: kind for kind in KINDS}
# The kinds with a count of their own: the table's columns, the JSON report's counts, junit
# properties.
COUNTED_KINDS: tuple[BudgetKind, ...] = tuple(kind for kind in KINDS if not kind.same_count_as)


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
