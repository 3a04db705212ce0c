"""Compile cost: ``max_compile_seconds(S)`` fails a test whose compiles took more than S seconds
(each frame dynamo compiled, its backward, autotuning at run time), its failure with the breakdown
by part (dynamo, AOT autograd, inductor, autotuning, backward); ``max_compile_instructions(N)``
one whose frame compiles took more than N CPU instructions (torch's own counter, Linux with perf
events only).

The kinds and their signals are in :mod:`.kinds`; their source, which reads
each entry of torch's compilation metrics as it is recorded, in
:mod:`.compile_metrics`, with torch's instruction counter in
:mod:`.instruction_counter`.

Hooks: ``pytest_nocompile_kinds`` (the ``compile_seconds`` and ``compile_instructions`` kinds).
"""

from __future__ import annotations

from typing import Sequence

from ...vocabulary.kinds import BudgetKind
from .kinds import COMPILE_INSTRUCTIONS_KIND, COMPILE_SECONDS_KIND


def pytest_nocompile_kinds() -> Sequence[BudgetKind]:
    return (COMPILE_SECONDS_KIND, COMPILE_INSTRUCTIONS_KIND)
