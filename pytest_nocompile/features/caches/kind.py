"""The cache-misses kind: what it counts, and the cache hits shown beside it. Pure code."""

from __future__ import annotations

from ...exceptions import CacheMissBudgetExceeded
from ...vocabulary.kinds import BudgetKind

# The event saying a count of misses is a lower bound: compilation metrics told of misses that
# torch's counters did not count (.cache_witness).
CACHE_MISSES_UNSEEN = "cache_misses_unseen"

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
    lower_bound_signal=CACHE_MISSES_UNSEEN,
    metrics_witness=f"{__package__}.cache_witness:witnessed",
    source=f"{__package__}.cache_bypass_reasons:CacheBypassReasons",
)
