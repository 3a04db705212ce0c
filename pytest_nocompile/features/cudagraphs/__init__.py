"""CUDA graphs: a test whose marker budgets CUDA-graph counts (``max_cudagraph_rerecords``,
``max_cudagraph_skips``) is skipped, saying why, where CUDA graphs cannot be recorded (no GPU),
instead of passing unjudged: those counts are then always 0. Only a marker does this: an option
or ini key budgets every test, most of which never ask for CUDA graphs. A bad marker is left to
the plugin's usage error.

(The kinds, their source of CUDA-graph logs and the parser of their messages are still the
core's, in ``vocabulary/kinds.py``, ``observe/sources/cudagraph_logs.py`` and
``vocabulary/cudagraph_messages.py``.)

Hooks: ``pytest_collection_modifyitems`` (the skips).
"""

from __future__ import annotations

from typing import Optional

import pytest

from ...judge.budget import BudgetUsageError, budget_from_marker
from ...vocabulary.kinds import CUDAGRAPH_RERECORDS, CUDAGRAPH_SKIPS

CUDA_GRAPH_KINDS = (CUDAGRAPH_RERECORDS, CUDAGRAPH_SKIPS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    budgeted = [(item, budget) for item in items
                if (budget := _cuda_graph_budget(item)) is not None]
    if not budgeted:
        return
    from ...observe.cuda import why_no_cuda_graphs

    why = why_no_cuda_graphs()
    if why is None:
        return
    for item, budget in budgeted:
        item.add_marker(pytest.mark.skip(reason=f"{budget} needs CUDA graphs: {why}"))


def _cuda_graph_budget(item: pytest.Item) -> Optional[str]:
    """The first CUDA-graph marker budgeting this test, as written (``max_cudagraph_skips(0)``);
    None if none does."""
    for kind in CUDA_GRAPH_KINDS:  # asked of every collected test: the tuple made once
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
