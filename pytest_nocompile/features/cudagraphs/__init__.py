"""CUDA graphs: a test whose marker budgets CUDA-graph counts (``max_cudagraph_rerecords``,
``max_cudagraph_skips``) is skipped, saying why, where CUDA graphs cannot be recorded (no GPU),
instead of passing unjudged: those counts are then always 0. Only a marker does this: an option
or ini key budgets every test, most of which never ask for CUDA graphs. A bad marker is left to
the plugin's usage error.

The kinds are in :mod:`.kinds`; their source, which reads inductor's
``cudagraphs`` log artifact, in :mod:`.cudagraph_logs`, with the parser of its
messages in :mod:`.cudagraph_messages`; whether this process can record CUDA
graphs, in :mod:`.cuda`.

Hooks: ``pytest_nocompile_kinds`` (the ``cudagraph_rerecords`` and ``cudagraph_skips`` kinds);
``pytest_collection_modifyitems`` (the skips).
"""

from __future__ import annotations

from typing import Optional, Sequence

import pytest

from ...judge.budget import BudgetUsageError, budget_from_marker
from ...vocabulary.kinds import BudgetKind
from ...watching.planning import marked_nodes, marker_keywords
from .kinds import CUDA_GRAPH_KINDS


def pytest_nocompile_kinds() -> Sequence[BudgetKind]:
    return CUDA_GRAPH_KINDS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markers = {kind.marker for kind in CUDA_GRAPH_KINDS}
    # nearly every run: no test, class or module has a CUDA-graph marker, and no test is asked
    if not any(mark.name in markers for node in marked_nodes(items) for mark in node.own_markers):
        return
    budgeted = [(item, budget) for item in items
                if (budget := _cuda_graph_budget(item)) is not None]
    if not budgeted:
        return
    from .cuda import why_no_cuda_graphs

    why = why_no_cuda_graphs()
    if why is None:
        return
    for item, budget in budgeted:
        item.add_marker(pytest.mark.skip(reason=f"{budget} needs CUDA graphs: {why}"))


def _cuda_graph_budget(item: pytest.Item) -> Optional[str]:
    """The first CUDA-graph marker budgeting this test, as written (``max_cudagraph_skips(0)``);
    None if none does."""
    for kind in CUDA_GRAPH_KINDS:  # asked of every collected test of a run that has such a marker
        marker = item.get_closest_marker(kind.marker)
        if marker is None:
            continue
        try:
            count = budget_from_marker(marker.args, marker.kwargs, kind,
                                       marker_keywords(item.config)).count
        except BudgetUsageError:
            continue  # reported as the test's usage error
        if count is not None:
            return f"{kind.marker}({count})"
    return None
