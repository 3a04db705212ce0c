"""The second witness of a cache miss: what torch's compilation metrics say the call's compiles
missed, against what torch's counters rose by.

torch counts a miss twice: ``counters["inductor"]["fxgraph_cache_miss"]``
(and AOT autograd's ``autograd_cache_miss``), which the counter source
reports as it rises, and, on a newer torch, in the compilation-metrics entry
of the compile that missed (``inductor_fx_local_cache_miss_count``,
``aotautograd_local_cache_miss_count``; torch 2.10 has neither field, 2.13
has both). Read in torch's sources and on 2.13: the two agree, a backward
compiled lazily counting in an entry of its own. A local
miss that the remote cache then served is a hit to the counter: its
``*_remote_cache_hit_count`` is taken off.

Where the entries of the call tell of more misses of a cache than its
counter rose by (a counter renamed, a future torch that counts elsewhere),
the difference is counted as misses of that cache, each event naming this
witness, and the count is a lower bound. A witness of at least: entries the
deque dropped are not seen, and one that saw fewer says nothing.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from ...observe.metrics_entries import entry_frame
from ...vocabulary.events import CodeLocation, HealthEvent
from ...vocabulary.measures import plural
from .kind import CACHE_MISSES_UNSEEN


class WitnessedCache(NamedTuple):
    """A cache whose misses an entry counts: the counter's signal, the entry's field of local
    misses, of remote hits, and the cache as users know it."""

    signal: str
    misses: str
    remote_hits: str
    name: str


WITNESSED_CACHES = (
    WitnessedCache("inductor.fxgraph_cache_miss", "inductor_fx_local_cache_miss_count",
                   "inductor_fx_remote_cache_hit_count", "inductor's FX graph cache"),
    WitnessedCache("aot_autograd.autograd_cache_miss", "aotautograd_local_cache_miss_count",
                   "aotautograd_remote_cache_hit_count", "the AOTAutograd cache"),
)


def witnessed(entries: Sequence[Any], counted: Mapping[str, float]) -> list[HealthEvent]:
    """The kind's :attr:`~...vocabulary.kinds.BudgetKind.metrics_witness`: the misses ``entries``
    tell of and the counters did not (:func:`unseen_misses`), and the event that makes the count a
    lower bound, where there are any."""
    unseen = unseen_misses(entries, counted)
    return [*unseen, lower_bound_event(unseen)] if unseen else []


def metrics_count_misses() -> bool:
    """Whether this torch's compilation-metrics entries count the caches' misses (a field of
    theirs names them)."""
    entry_class = getattr(sys.modules.get("torch._dynamo.utils"), "CompilationMetrics", None)
    fields = getattr(entry_class, "__dataclass_fields__", None) or {}
    return any(cache.misses in fields for cache in WITNESSED_CACHES)


def entry_misses(entry: Any, cache: WitnessedCache) -> int:
    """The misses of ``cache`` an entry counts (0 where it has no such field)."""
    misses, served = getattr(entry, cache.misses, None), getattr(entry, cache.remote_hits, None)
    if not isinstance(misses, int) or isinstance(misses, bool):
        return 0
    return max(misses - (served if isinstance(served, int) else 0), 0)


def unseen_misses(entries: Sequence[Any], counted: Mapping[str, float]) -> list[HealthEvent]:
    """The call's misses that its compilation-metrics ``entries`` (oldest first) tell of past what
    each cache's counter rose by (``counted``, by signal): one event per entry holding some, the
    counter taken to have seen the oldest."""
    events = []
    for cache in WITNESSED_CACHES:
        seen = counted.get(cache.signal, 0)
        for entry in entries:
            misses = entry_misses(entry, cache)
            told, seen = min(misses, seen), max(seen - misses, 0)
            if misses > told:
                compile_id = getattr(entry, "compile_id", None)
                events.append(HealthEvent(
                    cache.signal, misses - told,
                    f"no rise of torch's counter {cache.signal}: counted from the compilation "
                    f"metrics entry of compile {compile_id}",
                    compile_id=None if compile_id is None else str(compile_id),
                    compiling=_compiled(entry)))
    return events


def lower_bound_event(unseen: Sequence[HealthEvent]) -> HealthEvent:
    """The event that makes the count a lower bound, saying why."""
    caches = " and ".join(cache.name for cache in WITNESSED_CACHES
                       if any(event.what == cache.signal for event in unseen))
    total = sum(event.amount for event in unseen)
    return HealthEvent(CACHE_MISSES_UNSEEN, 1,
                       f"{plural(int(total), 'cache miss')} of {caches} with no rise of torch's "
                       "counters, counted from compilation metrics")


def _compiled(entry: Any) -> Optional[CodeLocation]:
    """The frame an entry's compile was of, where it names one."""
    function, filename, line = entry_frame(entry)
    return CodeLocation(filename, line, function) if function else None
