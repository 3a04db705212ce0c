"""What the plugin writes for people and machines from a test's snapshot and result: failure text,
the summary table, JSON, junit properties, baselines and their merge, traces, and pytest's captured
logs.

May import: judge/, record/, processes/, observe/, vocabulary/. Imported by the pytest layer.
"""
