"""The tests that ask for CUDA-graph counts: they switch the reading of CUDA-graph logs on, and are skipped where it cannot count.

A test asks with a ``max_cudagraph_rerecords``/``max_cudagraph_skips``
marker or block-assertion fixture; a run asks with those budgets' options
or ini keys, or with a report (table, JSON, baseline) that shows every
count. A run that asks for none leaves the reading off: its watched tests
pay nothing for it.

Where CUDA graphs cannot be recorded (no GPU), those counts are always 0: a
test whose marker budgets them is skipped, saying why, instead of passing
unjudged. Only a marker does this: an option or ini key budgets every test,
most of which never ask for CUDA graphs. A bad marker is left to the
plugin's usage error.
"""

from __future__ import annotations

from typing import Optional

import pytest

from .budget import CUDAGRAPH_RERECORDS, CUDAGRAPH_SKIPS, BudgetUsageError, budget_from_marker

CUDA_GRAPH_KINDS = (CUDAGRAPH_RERECORDS, CUDAGRAPH_SKIPS)
CUDA_GRAPH_FIXTURES = frozenset(kind.assertion for kind in CUDA_GRAPH_KINDS)
# The options that show every watched test's counts (their dests).
_REPORTS = ("nocompile_report", "nocompile_json", "nocompile_save", "nocompile_compare")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    budgeted = [(item, budget) for item in items if (budget := _cuda_graph_budget(item)) is not None]
    from .observe.cudagraph_logs import CudagraphLogs

    CudagraphLogs.wanted = bool(budgeted) or _run_asks(config) or any(CUDA_GRAPH_FIXTURES.intersection(
        getattr(item, "fixturenames", ())) for item in items)
    if not budgeted:
        return
    from .observe.cuda import why_no_cuda_graphs

    why = why_no_cuda_graphs()
    if why is None:
        return
    for item, budget in budgeted:
        item.add_marker(pytest.mark.skip(reason=f"{budget} needs CUDA graphs: {why}"))


def _run_asks(config: pytest.Config) -> bool:
    if any(config.getoption(name, None) for name in _REPORTS):
        return True
    for kind in CUDA_GRAPH_KINDS:
        if config.getoption(kind.marker, None) is not None or (config.getini(kind.marker) or "").strip():
            return True
    return False


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
