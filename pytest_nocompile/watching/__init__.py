"""The pytest layer: the run's settings, per-test planning, the watching lifecycle (setup, call,
teardown, report), fixtures and block assertions; it drives every step below it, and calls the
features (features/) through the hooks of hookspecs.py.

May import: every subpackage but features/. Imported by plugin.py, the features and the package's
public face.
"""
