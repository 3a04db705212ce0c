"""A source of health events: the kernels inductor generated for each graph, one event per graph.

``torch._inductor.metrics.generated_kernel_count`` is one module global for
the process, bumped during code generation and cleared by torch's own tests
(``metrics.reset()``): a difference read from it around a test is wrong
wherever anything reset it. This source reads no total. Inductor itself
works out each graph's share: ``CachedMetricsHelper`` snapshots the metrics
before a graph's code generation, and its ``get_deltas()`` is what the graph
added, saved with the graph in the FX graph cache; a cache hit replays that
saved share through ``CachedMetricsHelper.apply_deltas()``, as does a graph
compiled in a compile subprocess (read in torch's sources, 2.4 to 2.15:
``compile_fx``, ``codecache.FxGraphCache``, ``compile_fx_ext``). While armed,
both are wrapped on the class and each reports its graph's
``generated_kernel_count`` as it passes: a fresh graph and the same graph
from a warm cache count alike. Disarming puts torch's functions back.

A training step compiles two graphs under one compile id, the forward and
the backward (at the first ``backward()``, or with the forward where it
saves sizes for the backward): a backward's count says so (its reason
``backward``), told by inductor's own ``is_backward`` on the call that
compiles or loads it (``compile_fx_inner``'s argument, ``_compile_fx_inner``'s
``graph_kwargs``, ``FxGraphCache.load_with_key``'s argument, or the class of
AOT autograd's cache entry, ``CompiledBackward``), read from the stack as the
count passes. The failure text names the other graph of that
compile id its forward (``.kind.kernel_lines``).

``torch._inductor.metrics`` is imported at arming where it is not yet (some
6 ms once dynamo is there): inductor is often first imported in the middle
of a test's first compile, after the capture armed. Only a run that reads
kernel counts arms this source.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Collection, Optional

from ...observe.dynamo_state import torch_import_warnings_silenced
from ...observe.patches import Patches
from .kind import KERNELS_BACKWARD, KERNELS_SIGNAL

METRICS = "torch._inductor.metrics"
HELPER = "CachedMetricsHelper"
FIELD = "generated_kernel_count"


class KernelCounts:
    """The source: while armed, each graph's kernel count as inductor works it out or replays it."""

    signals = frozenset((KERNELS_SIGNAL,))

    def __init__(self, emit: Callable[[str, float, Optional[str]], None],
                 wanted: Optional[Callable[[], Collection[str]]] = None) -> None:
        self._emit = emit
        self._helper: Any = None  # torch's CachedMetricsHelper while armed
        # our get_deltas and apply_deltas in its place (wrapping the class __dict__'s)
        self._patches = Patches()

    def arm(self) -> None:
        if self._helper is not None:
            return
        helper = getattr(_metrics(), HELPER, None)
        if helper is None:
            return  # a torch without it: kernels_not_measured() says so
        self._patches.wrap(helper, "get_deltas", self._reporting_get_deltas)
        self._patches.wrap(helper, "apply_deltas", self._reporting_apply_deltas)
        self._helper = helper

    def disarm(self) -> None:
        self._helper = None
        self._patches.undo()

    def _report(self, deltas: Any, origin: Optional[str]) -> None:
        try:
            kernels = getattr(deltas, FIELD)
            if isinstance(kernels, int) and kernels > 0:
                part = graph_part(sys._getframe(2))
                reason = ", ".join(word for word in (part, origin) if word) or None
                self._emit(KERNELS_SIGNAL, kernels, reason)
        # a count we cannot read is a count we lack, not an error in the user's compile
        except Exception:
            pass

    def _reporting_get_deltas(self, original: Any) -> Any:
        def get_deltas(helper: Any, *args: Any, **kwargs: Any) -> Any:
            deltas = original(helper, *args, **kwargs)
            self._report(deltas, None)  # a graph code-generated now
            return deltas

        return get_deltas

    def _reporting_apply_deltas(self, original: Any) -> Any:
        function = original.__func__ if isinstance(original, staticmethod) else original

        def apply_deltas(deltas: Any, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_code.co_name
            # compile_fx_ext's _postprocess: a graph code-generated in a compile subprocess;
            # else the FX graph cache's hit.
            self._report(deltas, "compiled in a subprocess" if caller == "_postprocess"
                         else "from the FX graph cache")
            return function(deltas, *args, **kwargs)

        return staticmethod(apply_deltas)


# inductor's functions that take a graph's is_backward (as an argument, or in graph_kwargs or
# kwargs), one of them on the stack of every graph it compiles or loads from its cache.
_COMPILE_FRAMES = frozenset(("compile_fx_inner", "_compile_fx_inner", "fx_codegen_and_compile",
                             "load_with_key"))
_FRAMES_LOOKED_AT = 60  # a graph's count is reported some 10 to 20 frames below them


def graph_part(frame: Any) -> Optional[str]:
    """``"backward"`` for a backward graph inductor compiles (or loads) below ``frame``; None for
    any other graph, or where the stack does not say."""
    for _ in range(_FRAMES_LOOKED_AT):
        if frame is None:
            return None
        code = frame.f_code
        backward = None
        if code.co_name in _COMPILE_FRAMES and "_inductor" in code.co_filename:
            backward = _is_backward(frame.f_locals)
        elif code.co_name == "load" and "_aot_autograd" in code.co_filename:
            backward = _cache_entry_is_backward(frame.f_locals)
        if backward is not None:
            return KERNELS_BACKWARD if backward else None
        frame = frame.f_back
    return None


def _cache_entry_is_backward(local: dict[str, Any]) -> Optional[bool]:
    """AOT autograd's cache loading a graph (torch 2.5 on): its entry's class says which it is,
    where the FX graph cache's lookup below it is not told (before torch 2.8 or so)."""
    entry = type(local.get("self")).__name__
    return True if entry == "CompiledBackward" else False if entry == "CompiledForward" else None


def _is_backward(local: dict[str, Any]) -> Optional[bool]:
    """``is_backward`` as one of inductor's compile functions holds it; None where it holds none."""
    for holder in (local, local.get("graph_kwargs"), local.get("kwargs")):
        if isinstance(holder, dict) and isinstance(holder.get("is_backward"), bool):
            return bool(holder["is_backward"])
    return None


def _metrics() -> Any:
    """torch's inductor metrics module, imported if need be; None where it cannot be."""
    module = sys.modules.get(METRICS)
    if module is not None or "torch" not in sys.modules:
        return module
    try:
        with torch_import_warnings_silenced():
            return importlib.import_module(METRICS)
    except Exception:  # a torch without inductor: nothing generates kernels
        return None


def kernels_not_measured() -> Optional[str]:
    """Why each graph's kernels cannot be read in this process (a torch that moved them);
    None when they can, or inductor never came."""
    module = sys.modules.get(METRICS)
    if module is None:
        return None  # inductor never imported: no kernel was generated
    helper = getattr(module, HELPER, None)
    deltas = getattr(module, "CachedMetricsDeltas", None)
    if (helper is not None and hasattr(helper, "get_deltas") and hasattr(helper, "apply_deltas")
            and FIELD in getattr(deltas, "__dataclass_fields__", {})):
        return None
    return (f"torch {getattr(sys.modules.get('torch'), '__version__', '?')} gives no "
            f"{METRICS}.{HELPER} with each graph's {FIELD}, "
            "where the plugin reads each graph's kernels (torch 2.4 to 2.15 do)")
