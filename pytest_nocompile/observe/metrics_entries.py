"""torch's compilation-metrics entries: where dynamo keeps them, which are a frame's, and which
compiled a graph. The second witness of a compile, and where the compile-cost gates read time.

dynamo records one entry per frame it compiles, one per backward graph compiled lazily, and from
torch 2.7 one per autotuning at run time, appending each to the module-level deque
``torch._dynamo.utils._compilation_metrics`` (64 entries at most; user code clears it with
``clear_compilation_metrics()``). A frame's entry whose ``graph_op_count`` is 1 or more compiled a
graph, which dynamo also logged to ``graph_code``: torch 2.4 to 2.15 alike. From torch 2.11 an
entry also counts the compile caches' hits and misses of its compile (the caches feature's second
witness of a cache miss; 2.10 has no such field).
"""

from __future__ import annotations

import collections
import sys
from typing import Any, NamedTuple, Optional

UTILS = "torch._dynamo.utils"
METRICS_DEQUE = "_compilation_metrics"
_NO_ENTRY = object()  # a mark of an empty deque: every entry found later is new


def metrics_deque() -> Optional[collections.deque[Any]]:
    """dynamo's deque of entries, or None (dynamo not imported, or a torch without it)."""
    entries = getattr(sys.modules.get(UTILS), METRICS_DEQUE, None)
    return entries if isinstance(entries, collections.deque) else None


def is_frame(entry: Any) -> bool:
    """A frame dynamo compiled, not a lazily compiled backward (2.4/2.5: its own class) nor a
    run-time entry."""
    return (getattr(entry, "is_forward", None) is not False
            and not getattr(entry, "is_runtime", False)
            and type(entry).__name__ != "BwdCompilationMetrics")


class MetricsGraph(NamedTuple):
    """A graph a frame's entry says dynamo compiled: its compile id (None where torch gives none)
    and the frame's code."""

    compile_id: Optional[str]
    function: str
    filename: str
    line: int


def entry_frame(entry: Any) -> tuple[str, str, int]:
    """The frame an entry's compile was of: its function (``""`` where the entry names none), file
    and first line (0 where not a number)."""
    line = getattr(entry, "co_firstlineno", None)
    return (str(getattr(entry, "co_name", None) or ""),
            str(getattr(entry, "co_filename", None) or "?"),
            line if isinstance(line, int) and not isinstance(line, bool) else 0)


def metrics_mark() -> object:
    """Where the entries stand now, for :func:`graphs_since`: the newest one (the deque may be
    replaced by a copy, or cleared, meanwhile); before dynamo came, or with none, a mark that
    every entry found later is past."""
    entries = metrics_deque()
    return entries[-1] if entries else _NO_ENTRY


def entries_since(mark: object) -> list[Any]:
    """The entries recorded after ``mark`` (:func:`metrics_mark`), oldest first. Entries the deque
    dropped meanwhile (cleared, over 64) are not seen: a witness of at least, never of more."""
    entries = metrics_deque()
    if not entries or entries[-1] is mark:
        return []
    since = []
    for entry in reversed(entries):
        if entry is mark:
            break
        since.append(entry)
    since.reverse()
    return since


def graphs_since(mark: object) -> list[MetricsGraph]:
    """The graphs the entries recorded after ``mark`` say were compiled, oldest first (after None:
    every entry's, dynamo came later)."""
    return graphs_in(entries_since(mark))


def graphs_in(entries: list[Any]) -> list[MetricsGraph]:
    """The graphs ``entries`` say were compiled, in their order."""
    graphs = []
    for entry in entries:
        ops = getattr(entry, "graph_op_count", None)
        compile_id = getattr(entry, "compile_id", None)
        # compiled autograd's ("!0/0/0") is left out: its graphs are not the frames' of the test
        if (isinstance(ops, int) and ops > 0 and is_frame(entry)
                and not str(compile_id).startswith("!")):
            function, filename, line = entry_frame(entry)
            graphs.append(MetricsGraph(None if compile_id is None else str(compile_id),
                                       function or "?", filename, line))
    return graphs
