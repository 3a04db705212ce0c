"""What a compile cost, as health signals: seconds (with their breakdown) and instructions.
Pure code.

:mod:`..observe.sources.compile_metrics` emits, for each entry torch records in its
compilation metrics (a frame compiled, a backward compiled lazily, an
autotuning at run time), one :data:`COMPILE_SECONDS` event (the entry's
total, its reason the breakdown in words) and one event per part of
:data:`PARTS` it reports, and one :data:`COMPILE_INSTRUCTIONS` event where
torch's instruction counter runs. The parts do not overlap: they add up to
the total.
"""

from __future__ import annotations

from typing import Iterable, Mapping

COMPILE_SECONDS = "compile_seconds"
COMPILE_INSTRUCTIONS = "compile_instructions"

# Each part's signal and how users read it, in the order torch runs them.
PARTS: tuple[tuple[str, str], ...] = (
    (f"{COMPILE_SECONDS}.dynamo", "dynamo"),  # tracing the frame, building guards and bytecode
    # torch times the whole backend call in this column: AOT autograd for inductor and aot_eager,
    # nearly nothing for backend="eager".
    (f"{COMPILE_SECONDS}.aot_autograd", "AOT autograd"),
    (f"{COMPILE_SECONDS}.inductor", "inductor"),  # lowering, code generation, compiling kernels
    (f"{COMPILE_SECONDS}.autotune", "autotuning"),  # inductor's, at compile time and at run time
    # a backward graph compiled at its first backward()
    (f"{COMPILE_SECONDS}.backward", "backward"),
)
PART_SIGNALS = tuple(signal for signal, _ in PARTS)
PART_LABELS = dict(PARTS)

# The first torch whose dynamo counts compile instructions
# (torch._dynamo.utils.CompileTimeInstructionCounter).
INSTRUCTIONS_SINCE = (2, 5)


def format_seconds(seconds: float) -> str:
    """``38.0 s``, ``0.10 s``, ``4.6 ms``, ``0 s``: three significant figures at most, the unit
    always."""
    if seconds <= 0:
        return "0 s"
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 0.1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms"


def breakdown_text(parts: Mapping[str, float]) -> str:
    """``dynamo 0.12 s, AOT autograd 1.50 s, inductor 36.4 s`` from ``{part signal: seconds}``, in
    :data:`PARTS` order."""
    return ", ".join(f"{PART_LABELS[signal]} {format_seconds(parts[signal])}"
                     for signal in PART_SIGNALS if parts.get(signal, 0) > 0)


def sum_by_signal(amounts: Iterable[tuple[str, float]]) -> dict[str, float]:
    """``{signal: total}`` from ``(signal, amount)`` pairs."""
    totals: dict[str, float] = {}
    for signal, amount in amounts:
        totals[signal] = totals.get(signal, 0.0) + amount
    return totals
