"""The CUDA-graph kinds: re-records and skips under ``mode="reduce-overhead"``. Pure code."""

from __future__ import annotations

from ...exceptions import CudagraphRerecordBudgetExceeded, CudagraphSkipBudgetExceeded
from ...vocabulary.kinds import BudgetKind

CUDAGRAPH_RERECORDS = BudgetKind(
    key="cudagraph_rerecords",
    marker="max_cudagraph_rerecords",
    events="health",
    noun="CUDA-graph re-record",
    counts="CUDA-graph re-recordings (mode='reduce-overhead': a function's graph recorded again "
    "after its first recording; needs CUDA)",
    column="cg rerecords",
    short="cg rerecords",
    signals=("cudagraph_rerecord",),  # cudagraph_messages.RERECORD
    short_option="--max-cg-rerecords",
    exceeded=CudagraphRerecordBudgetExceeded,
    source=f"{__package__}.cudagraph_logs:CudagraphLogs",
)
CUDAGRAPH_SKIPS = BudgetKind(
    key="cudagraph_skips",
    marker="max_cudagraph_skips",
    events="health",
    noun="CUDA-graph skip",
    counts="graphs that inductor ran without CUDA graphs under mode='reduce-overhead' (mutated "
    "inputs, CPU tensors, ...; needs CUDA)",
    column="cg skips",
    short="cg skips",
    signals=("cudagraph_skip",),  # cudagraph_messages.SKIP
    short_option="--max-cg-skips",
    exceeded=CudagraphSkipBudgetExceeded,
    source=f"{__package__}.cudagraph_logs:CudagraphLogs",
)

CUDA_GRAPH_KINDS = (CUDAGRAPH_RERECORDS, CUDAGRAPH_SKIPS)
