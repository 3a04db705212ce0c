"""The per-test record: each process's events, placed in setup, call or teardown, and counted per
kind; taken once as a :class:`~.snapshot.TestSnapshot` for the judge and the outputs.

May import: processes/, observe/, vocabulary/. Imported by judge/ and the steps after it.
"""
