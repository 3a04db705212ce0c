"""The core's fixture, ``nocompile_recompiles``, and the watched test's record that the fixtures
of the features read (:func:`record_of`).

Registered with pytest by :mod:`..plugin`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..record.log import RecompileLog
    from ..record.record import RecompileRecord


@pytest.fixture
def nocompile_recompiles(request: pytest.FixtureRequest) -> RecompileLog:
    """The dynamo recompiles recorded so far in this test, as a live sequence of RecompileEvent.

    Recompiles of the processes the test started are included (``event.process``
    names each one's pid and rank) once they are written, as each happens.
    """
    return record_of(request).log


def record_of(request: pytest.FixtureRequest) -> RecompileRecord:
    """The record of the watched test that requested a fixture; a usage failure elsewhere."""
    from .watch import watch_of

    watch = watch_of(request.config, request.node.nodeid)
    if watch is None or watch.record is None:
        pytest.fail("pytest-nocompile fixtures work in test functions only (requested by "
                    f"{request.node.nodeid})", pytrace=False)
    return watch.record
