"""Notices a run says once, as lines of its summary, where a warning would fail a user's test.

A budget that cannot be checked on this machine (syncs without CUDA) is a
``NotMeasuredWarning``; where warnings are errors (``-W error``, ini
``filterwarnings = error``) it is said here instead (:mod:`.watch`). An xdist
worker's notices reach its controller, which shows the run's summary, with the
worker's output.
"""

from __future__ import annotations

from typing import Any

import pytest

from .watch import said_in_summary

WORKER_OUTPUT_KEY = "nocompile_notices"


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # an xdist worker: its controller says them
        output[WORKER_OUTPUT_KEY] = dict(said_in_summary())


@pytest.hookimpl(optionalhook=True)  # an xdist hook: a run without xdist never calls it
def pytest_testnodedown(node: Any, error: object) -> None:
    said = said_in_summary()
    for key, line in getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY, {}).items():
        said.setdefault(key, line)  # each kind once per run, whichever worker said it first


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workeroutput"):
        return
    for line in said_in_summary().values():
        terminalreporter.write_line(f"nocompile: {line}")
