"""The sources in this process: dynamo's logs captured once and fanned out to each test's record,
its arrival, torch's counters and syncs; with the gates' own sources (compile metrics, cache
bypasses, CUDA graphs, kernels: in their islands, ``features/``), the one place that touches
torch's internals.

May import: vocabulary/. Imported by processes/ and the steps after it.
"""
