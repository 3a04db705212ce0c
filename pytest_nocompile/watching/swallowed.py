"""The warning every watched test gets for each compile error dynamo swallowed in it
(``suppress_errors``).

A swallowed error leaves a passing test that ran eager: no budget but
``min_compiles`` fails for it, so it is said as a pytest warning, which the
run's warnings summary shows whatever the test's outcome and which
``-W error::pytest_nocompile.SwallowedCompileErrorWarning`` makes an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..judge.floors import compile_errors

if TYPE_CHECKING:
    from ..record.record import RecompileRecord


class SwallowedCompileErrorWarning(pytest.PytestWarning):
    """dynamo swallowed a compile error (``suppress_errors``) in a watched test: that code ran
    uncompiled."""


def swallowed_error_warnings(record: RecompileRecord) -> list[SwallowedCompileErrorWarning]:
    """One warning per compile error any process of the test swallowed, in any phase."""
    warnings = []
    for process in record.processes():
        for event in compile_errors(process, None):
            where = f" in {process.info}" if process.info is not None else ""
            phase = "" if event.phase == "call" else f" (in {event.phase})"
            called = f"; called from {event.user_code}" if event.user_code is not None else ""
            warnings.append(SwallowedCompileErrorWarning(
                f"dynamo swallowed a compile error{where}{phase} (suppress_errors) and ran the "
                f"code uncompiled: {event.reason}{called}"))
    return warnings
