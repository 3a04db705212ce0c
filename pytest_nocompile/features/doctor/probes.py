"""The doctor's probes: tiny functions compiled through the capture a watched test counts from, and
what each witness of each signal showed of them.

Each probe starts from empty dynamo caches (``torch._dynamo.reset()``) and a
record of its own, attached to this process's capture as a watched test's is
(:data:`...observe.capture.DYNAMO_LOGS`). Every config a probe lowers is put
back when it ends. The plugin's own readers decide what was read: a probe
reads the events the record holds, never torch's text itself.
"""

from __future__ import annotations

import random
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ...observe.sources.swallowed_errors import COMPILE_ERROR
from ...vocabulary.events import UNKNOWN_FILE, UNPARSED
from ...vocabulary.kinds import KINDS_BY_KEY, LOGS_NOT_READ, why_not_measured
from ...vocabulary.resume_names import RESUME_PREFIX
from .findings import DARK, NOT_HERE, NOT_ON_THIS_TORCH, Finding, read_if, seen_if

if TYPE_CHECKING:
    from ...record.process_events import ProcessEvents
    from ...vocabulary.kinds import BudgetKind

_ATTEMPT = re.compile(r"(\d+)/(\d+)")  # a compile id's frame and attempt: "0/1"


@contextmanager
def _captured(signals: tuple[str, ...] = ()) -> Iterator[ProcessEvents]:
    """A record of its own for the block, from empty dynamo caches, with ``signals`` wanted; its
    events as of the block's end."""
    import torch._dynamo

    from ...observe import wanted_signals
    from ...observe.capture import DYNAMO_LOGS
    from ...record.record import RecompileRecord

    torch._dynamo.reset()
    if signals:
        wanted_signals.want(signals)
    record = RecompileRecord()
    DYNAMO_LOGS.attach(record)
    record.start_call()
    try:
        yield record.own
    finally:
        DYNAMO_LOGS.settle(record)
        record.end_call()
        DYNAMO_LOGS.detach(record)
        torch._dynamo.reset()


def _why_not_read(artifact: str) -> str:
    """Why the capture could not switch dynamo's ``artifact`` log on here, or ""."""
    return LOGS_NOT_READ.get(artifact, "")


def _health(events: ProcessEvents, *signals: str) -> list[Any]:
    return events.signals(signals, None)


def _kind_signals(*keys: str) -> tuple[str, ...]:
    """The signals of the kinds named (those registered), to want for a probe."""
    return tuple(signal for key in keys if key in KINDS_BY_KEY
                 for signal in KINDS_BY_KEY[key].health_signals)


def compiles_and_recompiles() -> list[Finding]:
    """A function compiled, then called with a new int: one compile, one recompile."""
    import torch

    with _captured(_kind_signals("compile_seconds", "compile_instructions")) as events:
        scaled = torch.compile(lambda x, n: x * n, backend="eager")
        scaled(torch.ones(2), 2)
        scaled(torch.ones(2), 3)
    ids = [event.compile_id for event in events.compiles if event.compile_id is not None]
    attempts = [int(found[2]) for found in map(_ATTEMPT.search, ids) if found]
    # the log's own records, not those a second witness (the compile id) made
    logged = [event for event in events.recompiles if event.witness is None]
    recompile = logged[0] if logged else None
    findings = [
        seen_if("compile", "graph handed to the backend (graph_code log)", bool(events.compiles),
                _why_not_read("graph_code")),
        read_if("compile", "compile id", bool(ids), bool(attempts), ", ".join(ids)),
        *_compile_cost(events),
        read_if("recompile", "recompile log record, its guard and reason", recompile is not None,
                recompile is not None and recompile.function != UNPARSED
                and bool(recompile.reasons),
                recompile.message if recompile is not None else "", _why_not_read("recompiles")),
        seen_if("recompile", "compile id's attempt number (0/1)", any(attempts),
                f"compile ids seen: {', '.join(ids) or 'none'}"),
    ]
    return findings


def _compile_cost(events: ProcessEvents) -> list[Finding]:
    """What torch's compilation metrics gave of the compiles above."""
    findings = []
    seconds = KINDS_BY_KEY.get("compile_seconds")
    if seconds is not None:
        totals = _health(events, *seconds.signals)
        parts = _health(events, *seconds.shown_signals)
        findings.append(_unless_absent(seconds, lambda: read_if(
            "compile", "compilation-metrics entry, its time fields", bool(totals),
            bool(parts), "an entry with none of the time fields the plugin knows")))
    instructions = KINDS_BY_KEY.get("compile_instructions")
    if instructions is not None:
        counted = _health(events, *instructions.signals)
        findings.append(_unless_absent(instructions, lambda: seen_if(
            "compile instructions", "torch's instruction counter", bool(counted)), machine=True))
    return findings


def graph_breaks() -> list[Finding]:
    """A function with an explicit graph break: the break, and the resume function after it."""
    import torch

    def broken(x: Any) -> Any:
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    with _captured() as events:
        torch.compile(broken, backend="eager")(torch.ones(2))
    logged = [event for event in events.graph_breaks if event.witness is None]
    event = logged[0] if logged else None
    resumed = [compiled for compiled in events.compiles if compiled.compiling is not None
               and compiled.compiling.function.startswith(RESUME_PREFIX)]
    return [
        read_if("graph break", "graph-break log record, its place and reason", event is not None,
                event is not None and event.filename != UNKNOWN_FILE and bool(event.reason),
                event.message if event is not None else "", _why_not_read("graph_breaks")),
        seen_if("graph break", "resume function compiled after it", bool(resumed)),
    ]


def limit_hits() -> list[Finding]:
    """A function called with three ints under a recompile limit of 1: dynamo refuses the
    recompile and runs the rest uncompiled."""
    import torch
    import torch._dynamo.config as config

    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    with _captured() as events, config.patch(**{name: 1}):
        scaled = torch.compile(lambda x, n: x * n, backend="eager")
        for n in (2, 3, 4):
            scaled(torch.ones(2), n)
    hits = events.limit_hits
    return [
        read_if("recompile limit", f"limit warning ({name})", bool(hits),
                all(hit.read for hit in hits), hits[0].message if hits else ""),
        seen_if("recompile limit", "refused attempt compiled no graph",
                len(events.compiles) == 1, f"{len(events.compiles)} graphs compiled, 1 expected"),
    ]


def swallowed_errors() -> list[Finding]:
    """A backend that raises, under ``suppress_errors``: dynamo runs the frame eager."""
    import torch
    import torch._dynamo.config as config

    def failing_backend(graph: Any, inputs: Any) -> Any:
        raise RuntimeError("the doctor's probe of a swallowed error")

    with _captured() as events, config.patch(suppress_errors=True):
        torch.compile(lambda x: x + 1, backend=failing_backend)(torch.ones(2))
    errors = _health(events, COMPILE_ERROR)
    return [read_if("swallowed compile error", "WON'T CONVERT warning", bool(errors),
                    any(error.reason for error in errors))]


def inductor() -> list[Finding]:
    """A function inductor compiles, whose constant is new to this run: a cache miss, and its
    kernels."""
    import torch
    import torch._inductor.config as inductor_config

    from ...observe.metrics_entries import entries_since, metrics_mark

    scale = random.random()  # a graph no earlier run cached
    kinds = [KINDS_BY_KEY[key] for key in ("cache_misses", "kernels") if key in KINDS_BY_KEY]
    with _captured(_kind_signals(*(kind.key for kind in kinds))) as events, \
            inductor_config.patch(fx_graph_cache=True):
        mark = metrics_mark()
        torch.compile(lambda x: (x * scale).sin() + 1)(torch.ones(8))
        entries = entries_since(mark)
    witnesses = {"cache_misses": "inductor's FX graph cache counters",
                 "kernels": "inductor's kernel metrics"}
    findings = [_unless_absent(kind, lambda kind=kind: seen_if(  # type: ignore[misc]
        kind.column, witnesses[kind.key], bool(_health(events, *kind.signals))))
        for kind in kinds]
    if "cache_misses" in KINDS_BY_KEY:
        findings.insert(1, _cache_misses_in_metrics(KINDS_BY_KEY["cache_misses"], entries))
    return findings


def _cache_misses_in_metrics(kind: BudgetKind, entries: list[Any]) -> Finding:
    """The second witness of the probe's cache misses: its compilation-metrics entries."""
    from ...vocabulary.kinds import resolve
    from ..caches.cache_witness import metrics_count_misses

    witness = "compilation-metrics entry's miss counts"
    if not metrics_count_misses():
        return Finding(kind.column, witness, NOT_ON_THIS_TORCH,
                       "its compilation-metrics entries count no cache misses")
    # what the witness finds where the counters counted nothing: every miss it saw
    return _unless_absent(kind, lambda: seen_if(
        kind.column, witness, bool(resolve(kind.metrics_witness)(entries, {}))))


def syncs() -> list[Finding]:
    """A CUDA tensor read on the host: one sync, where CUDA is there."""
    kind = KINDS_BY_KEY.get("syncs")
    if kind is None:
        return []
    import torch

    if not torch.cuda.is_available():
        return [Finding("syncs", "CUDA sync debug mode", NOT_HERE,
                        why_not_measured(kind) or "no CUDA")]
    with _captured(kind.health_signals) as events:
        torch.ones(2, device="cuda").sum().item()
    return [_unless_absent(kind, lambda: seen_if("syncs", "CUDA sync debug mode",
                                                 bool(_health(events, *kind.signals))),
                           machine=True)]


def _unless_absent(kind: Any, found: Callable[[], Finding], machine: bool = False) -> Finding:
    """``found()``, unless this torch is too old for ``kind``, or it cannot be measured in this
    process: a witness dark for that reason says it. ``machine``: the kind's reason is this
    machine's (no CUDA, no hardware counter), not the torch's, and reads "not here"."""
    from ...judge.torch_support import installed_torch_lacks

    finding = found()
    lacking = installed_torch_lacks(kind, "it")
    if lacking is not None:
        return Finding(finding.signal, finding.witness, NOT_ON_THIS_TORCH, lacking)
    why = why_not_measured(kind)
    if why is not None and finding.dark:
        return Finding(finding.signal, finding.witness, NOT_HERE if machine else DARK, why)
    return finding


EAGER_PROBES = (compiles_and_recompiles, graph_breaks, limit_hits, swallowed_errors, syncs)
INDUCTOR_PROBES = (inductor,)


def run_probes(with_inductor: bool = True) -> list[Finding]:
    """Every probe's findings, in order; a probe that raises is one dark row naming its error."""
    findings: list[Finding] = []
    for probe in (*EAGER_PROBES, *(INDUCTOR_PROBES if with_inductor else ())):
        try:
            findings += probe()
        except Exception as error:  # a torch that moved what a probe calls: said, not raised
            said = str(error).strip().splitlines()  # torch's own advice follows the first line
            findings.append(Finding(probe.__name__.replace("_", " "), "the probe itself", DARK,
                                    f"{type(error).__name__}: {said[0] if said else ''}"))
    return findings
