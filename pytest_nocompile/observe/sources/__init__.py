"""The health sources: one module each, armed with the capture where one of their signals is wanted,
reporting through ``DYNAMO_LOGS.emit_health`` (torch's counters, compile metrics and instruction
counter, cache-bypass reasons, swallowed compile errors, syncs, kernels, CUDA-graph logs).

May import: the rest of observe/ (not capture.py, which makes them), vocabulary/.
"""
