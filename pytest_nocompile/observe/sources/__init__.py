"""The health sources: one module each, armed with the capture where one of their signals is wanted,
reporting through ``DYNAMO_LOGS.emit_health`` (torch's counters, swallowed compile errors, syncs).
The gates' sources are in their islands (``features/``).

May import: the rest of observe/ (not capture.py, which makes them), vocabulary/.
"""
