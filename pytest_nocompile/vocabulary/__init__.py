"""The words every step of the flow speaks: the kinds of budget (``KINDS``), events as plain data
and the parsers of dynamo's messages into them, the health signals and how amounts are measured.
Pure code, never imports torch.

May import: :mod:`pytest_nocompile.exceptions` only. Every other subpackage may import this one.
"""
