"""The pytest layer: the run's settings, per-test planning, the watching lifecycle (setup, call, teardown, report),
fixtures, block assertions and warm starts; it drives every step below it.

May import: every subpackage. Imported by plugin.py and the package's public face.
"""
