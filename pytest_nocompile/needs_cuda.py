"""A test whose marker budgets CUDA-graph re-records or skips is skipped, saying why, where CUDA graphs cannot be recorded.

On such a machine those counts are always 0: the test would pass without
having been judged. Only a marker does this: a budget from an option or an
ini key applies to every test, most of which never ask for CUDA graphs.
A bad marker is left to the plugin's usage error.
"""

from __future__ import annotations

from typing import Optional

import pytest

from .budget import CUDAGRAPH_RERECORDS, CUDAGRAPH_SKIPS, BudgetUsageError, budget_from_marker

CUDA_GRAPH_KINDS = (CUDAGRAPH_RERECORDS, CUDAGRAPH_SKIPS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    asking = [(item, budget) for item in items if (budget := _cuda_graph_budget(item)) is not None]
    if not asking:
        return
    from .observe.cuda import why_no_cuda_graphs

    why = why_no_cuda_graphs()
    if why is None:
        return
    for item, budget in asking:
        item.add_marker(pytest.mark.skip(reason=f"{budget} needs CUDA graphs: {why}"))


def _cuda_graph_budget(item: pytest.Item) -> Optional[str]:
    """The first CUDA-graph marker budgeting this test, as written (``max_cudagraph_skips(0)``); None if none does."""
    for kind in CUDA_GRAPH_KINDS:
        marker = item.get_closest_marker(kind.marker)
        if marker is None:
            continue
        try:
            count = budget_from_marker(marker.args, marker.kwargs, kind).count
        except BudgetUsageError:
            continue  # reported as the test's usage error
        if count is not None:
            return f"{kind.marker}({count})"
    return None
