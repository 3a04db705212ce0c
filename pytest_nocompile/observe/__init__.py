"""The sources in this process: dynamo's logs captured once and fanned out to each test's record,
its arrival, compile metrics, syncs, kernels and CUDA graphs; the one place that touches torch's
internals.

May import: vocabulary/. Imported by processes/ and the steps after it.
"""
