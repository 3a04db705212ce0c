"""Cold start, then warm start: a user's code in two fresh processes that share one private compile
cache.

What the ``nocompile_warm_start`` fixture runs. The first process starts
with an empty cache folder of its own (:mod:`.compile_caches`: every
on-disk cache of torch's there, the temp folder too, remote caches off); the
second starts with the same folder, as a restarted job would. Each is
watched the way a test's child processes are (its own report folder,
:mod:`~pytest_nocompile.processes.event_files`), and its counts are what the plugin saw it
compile (compile events, recompiles, graph breaks, the health events of
cache hits, misses and bypasses, and compile seconds), summed over the
process and any it started. Every process reports the caches' counters: the
``max_cache_misses`` kind names them all (misses and bypasses counted, hits shown).
Nothing is read from torch's counters at the end.

A run that fails, does not end in time, or could not be watched raises
:class:`~pytest_nocompile.exceptions.WarmStartFailed`, with the end of its output: counts of
a run that did not happen as asked would pass a test for the wrong reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Protocol, Union

from ...exceptions import WarmStartFailed
from ...judge.torch_support import refuse_where_torch_lacks
from ...record.record import RecompileRecord
from ...vocabulary.kinds import COMPILES, GRAPH_BREAKS, RECOMPILES
from ..child_events.event_files import EventDirectory
from ..child_startup.event_writer import ENV_VAR
from ..compile_cost.kinds import COMPILE_SECONDS
from .compile_caches import private_process_env
from .kind import CACHE_MISSES

Target = Union[Callable[[], Any], str, "os.PathLike[str]"]

# torch's counters end in _cache_hit, _cache_miss, _cache_bypass
_CACHE_OUTCOMES = ("hit", "miss", "bypass")
_OUTPUT_LINES = 30  # of a failed run's output, in the failure


@dataclass(frozen=True)
class CompileRun:
    """What one fresh process compiled, as the plugin watched it.

    ``compiles``, ``recompiles`` and ``graph_breaks`` count as the budgets do;
    ``recompile_limit_hits`` the frames dynamo stopped compiling (they ran eagerly after);
    ``cache_hits``, ``cache_misses`` and ``cache_bypasses`` add up torch's
    FX-graph and AOT-autograd cache outcomes (``signals`` has them one by
    one, e.g. ``"inductor.fxgraph_cache_miss"``); ``compile_seconds`` is
    the time torch says it spent compiling (None where it says nothing);
    ``seconds`` the process's whole run, start-up and imports included.
    """

    name: str  # "cold" or "warm"
    compiles: int
    recompiles: int
    graph_breaks: int
    recompile_limit_hits: int
    cache_hits: int
    cache_misses: int
    cache_bypasses: int
    compile_seconds: Optional[float]
    seconds: float
    signals: dict[str, float] = field(default_factory=dict)
    output: str = field(default="", repr=False)  # its stdout and stderr


class WarmStart(NamedTuple):
    """Both runs: ``cold, warm = nocompile_warm_start(step)``."""

    cold: CompileRun
    warm: CompileRun


class WarmStartRunner(Protocol):
    """Type of the ``nocompile_warm_start`` fixture, for annotations.

    ``nocompile_warm_start(target, timeout=None)`` runs ``target`` (a
    top-level function of an importable module, ``"module:function"``, or a
    script's path) in a fresh process with an empty private compile cache,
    then in another sharing that cache, and returns both runs' counts.
    """

    def __call__(self, target: Target, /, *, timeout: Optional[float] = None) -> WarmStart: ...


def cold_then_warm(target: Target, folder: Path, timeout: Optional[float] = None) -> WarmStart:
    """Run ``target`` cold, then warm, with their cache (and reports) in ``folder``, a new empty
    folder."""
    # a failure shows the test's line and the child's traceback, not this module
    __tracebackhide__ = True
    # else a warm start would seem to miss nothing
    refuse_where_torch_lacks(CACHE_MISSES, "nocompile_warm_start")
    spec, shown = target_spec(target)
    caches = private_process_env(folder / "caches")
    cold = _run_once("cold", spec, shown, caches, folder / "cold", timeout)
    return WarmStart(cold, _run_once("warm", spec, shown, caches, folder / "warm", timeout))


def target_spec(target: Target) -> tuple[dict[str, Any], str]:
    """What the child runs (:mod:`..child_startup.run_target`'s argument), and its name
    for messages."""
    if isinstance(target, (str, os.PathLike)):
        return _spec_from_text(os.fspath(target))
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if not (callable(target) and isinstance(module, str) and isinstance(qualname, str)) \
            or "<" in qualname or module == "__main__" or not _resolves(module, qualname):
        raise ValueError(f"nocompile_warm_start: {target!r} is not a top-level function of an "
                         "importable module; pass one, 'module:function', or a script's path (a "
                         "fresh process imports it by name)")
    file = getattr(sys.modules[module], "__file__", None)
    return ({"module": module, "qualname": qualname, "file": file, "sys_path": list(sys.path)},
            f"{module}.{qualname}")


def _spec_from_text(text: str) -> tuple[dict[str, Any], str]:
    if text.endswith(".py") or os.sep in text:
        if not os.path.isfile(text):
            raise ValueError(f"nocompile_warm_start: no script at {text}")
        return {"script": os.path.abspath(text)}, text
    module, _, qualname = text.partition(":")
    if not (module and qualname):
        raise ValueError(f"nocompile_warm_start: {text!r} is neither 'module:function' nor a "
                         "script's path")
    return {"module": module, "qualname": qualname, "file": None, "sys_path": list(sys.path)}, text


def _resolves(module: str, qualname: str) -> bool:
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found is not None


def _run_once(name: str, spec: dict[str, Any], shown: str, caches: dict[str, str], folder: Path,
              timeout: Optional[float]) -> CompileRun:
    __tracebackhide__ = True
    events = folder / "events"
    events.mkdir(parents=True)
    record = RecompileRecord()
    record.read_children_from(EventDirectory(str(events)))
    record.start_call()
    command = [sys.executable, "-m", "pytest_nocompile.features.child_startup.run_target",
               json.dumps({**spec, "events": str(events)})]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, env={**os.environ, **caches, ENV_VAR: str(events)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        raise WarmStartFailed(_failure(f"the {name} run of {shown} did not end within "
                                       f"{timeout:g} s", _text(expired.output))) from None
    seconds = time.perf_counter() - started
    record.read_children(final=True)
    record.end_call()
    output = _text(done.stdout)
    if done.returncode != 0:
        # A negative status is the signal that killed it (the OOM killer's 9, an abort's 6).
        status = (f"killed by signal {-done.returncode}" if done.returncode < 0
                  else f"exit status {done.returncode}")
        raise WarmStartFailed(_failure(f"the {name} run of {shown} failed ({status})", output))
    problems = record.child_problems() + [str(warning) for warning in record.child_warnings()]
    if problems:
        raise WarmStartFailed(f"nocompile_warm_start: the {name} run of {shown} could not be "
                              "watched, so its counts would be wrong:\n"
                              + "\n".join(f"    {problem}" for problem in problems))
    return _counted(name, record, seconds, output)


def _counted(name: str, record: RecompileRecord, seconds: float, output: str) -> CompileRun:
    processes = list(record.processes())
    signals: dict[str, float] = {}
    for process in processes:
        for event in process.health:
            if event.phase == "call":
                signals[event.what] = signals.get(event.what, 0) + event.amount
    caches = {outcome: int(sum(amount for what, amount in signals.items()
                               if what.endswith(f"_cache_{outcome}")))
              for outcome in _CACHE_OUTCOMES}
    return CompileRun(
        name=name,
        compiles=int(sum(process.count(COMPILES) for process in processes)),
        recompiles=int(sum(process.count(RECOMPILES) for process in processes)),
        graph_breaks=int(sum(process.count(GRAPH_BREAKS) for process in processes)),
        recompile_limit_hits=sum(1 for process in processes for hit in process.limit_hits
                                 if hit.phase == "call"),
        cache_hits=caches["hit"],
        cache_misses=caches["miss"],
        cache_bypasses=caches["bypass"],
        compile_seconds=signals.get(COMPILE_SECONDS),
        seconds=seconds,
        signals=signals,
        output=output,
    )


# the run's output is bytes (not run with text=True), or None
def _text(output: Optional[bytes]) -> str:
    return (output or b"").decode("utf-8", "replace")


def _failure(what: str, output: str) -> str:
    lines = output.rstrip().splitlines()[-_OUTPUT_LINES:]
    if not lines:
        return f"nocompile_warm_start: {what}; it wrote no output"
    return (f"nocompile_warm_start: {what}; its output ends:\n"
            + "\n".join(f"    {line}" for line in lines))
