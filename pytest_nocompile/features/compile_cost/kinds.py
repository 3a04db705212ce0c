"""What a compile cost, as health signals: seconds (with their breakdown) and instructions, and
their kinds of budget. Pure code.

:mod:`.compile_metrics` emits, for each entry torch records in its
compilation metrics (a frame compiled, a backward compiled lazily, an
autotuning at run time), one :data:`COMPILE_SECONDS` event (the entry's
total, its reason the breakdown in words) and one event per part of
:data:`PARTS` it reports, and one :data:`COMPILE_INSTRUCTIONS` event where
torch's instruction counter runs. The parts do not overlap: they add up to
the total.
"""

from __future__ import annotations

from typing import Mapping

from ...exceptions import CompileInstructionBudgetExceeded, CompileTimeBudgetExceeded
from ...vocabulary.kinds import BudgetKind
from ...vocabulary.measures import INSTRUCTIONS, SECONDS, format_seconds

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


def breakdown_text(parts: Mapping[str, float]) -> str:
    """``dynamo 0.12 s, AOT autograd 1.50 s, inductor 36.4 s`` from ``{part signal: seconds}``, in
    :data:`PARTS` order."""
    return ", ".join(f"{PART_LABELS[signal]} {format_seconds(parts[signal])}"
                     for signal in PART_SIGNALS if parts.get(signal, 0) > 0)


COMPILE_SECONDS_KIND = BudgetKind(
    key="compile_seconds",
    marker="max_compile_seconds",
    events="health",
    noun="compile time",
    counts="seconds of compile time (each frame dynamo compiled: dynamo, AOT autograd, inductor, "
    "autotuning; and backward graphs compiled at their first backward())",
    column="compile s",
    short="compile s",
    # seconds vary from run to run: max_compile_instructions is the steady one
    gated_by_baseline=False,
    exceeded=CompileTimeBudgetExceeded,
    signals=(COMPILE_SECONDS,),
    shown_signals=PART_SIGNALS,
    describe_shown=breakdown_text,
    shown_label="breakdown",
    shown_key="compile_seconds_breakdown",
    shown_only_where_budgeted=True,
    measure=SECONDS,
    source=f"{__package__}.compile_metrics:CompileMetricsSource",
    why_not_measured=f"{__package__}.compile_metrics:compile_time_not_measured",
    not_measured_warning="pytest_nocompile.watching.watch:CompileTimeWarning",
)
COMPILE_INSTRUCTIONS_KIND = BudgetKind(
    key="compile_instructions",
    marker="max_compile_instructions",
    events="health",
    noun="compile instruction",
    counts="CPU instructions dynamo counted compiling frames (torch's own counter; Linux with perf "
    "events only)",
    column="compile instr",
    short="instructions",
    gated_by_baseline=False,
    exceeded=CompileInstructionBudgetExceeded,
    signals=(COMPILE_INSTRUCTIONS,),
    measure=INSTRUCTIONS,
    since_torch=INSTRUCTIONS_SINCE,
    shown_only_where_budgeted=True,
    source=f"{__package__}.compile_metrics:CompileMetricsSource",
    why_not_measured=f"{__package__}.instruction_counter:instructions_not_counted",
    not_measured_warning="pytest_nocompile.watching.watch:CompileTimeWarning",
    not_measured_advice=" (max_compile_seconds measures compile time everywhere)",
)
