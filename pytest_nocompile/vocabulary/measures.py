"""How a budget kind's amounts are given, checked and shown: whole counts, or seconds. Pure code.

A count kind (recompiles, graph breaks, compiles, instructions) takes an int
N >= 0, and ``max_recompiles(0.5)`` stays a usage error. A seconds kind
(compile time) takes any number S >= 0, an int or a float.
"""

from __future__ import annotations

import math
from typing import Iterable, Union

Amount = Union[int, float]


def plural(count: Amount, noun: str) -> str:
    """``1 recompile``, ``2 recompiles``, ``2 cache misses``."""
    return f"{count} {plural_noun(count, noun)}"


def plural_noun(count: Amount, noun: str) -> str:
    if count == 1:
        return noun
    return f"{noun}es" if noun.endswith("s") else f"{noun}s"


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


def sum_by_signal(amounts: Iterable[tuple[str, float]]) -> dict[str, float]:
    """``{signal: total}`` from ``(signal, amount)`` pairs (a health signal's amounts)."""
    totals: dict[str, float] = {}
    for signal, amount in amounts:
        totals[signal] = totals.get(signal, 0.0) + amount
    return totals


class Measure:
    """Whole counts: ``N an int >= 0``; ``grouped`` shows thousands separated (``12,345,678
    instructions``)."""

    __slots__ = ("grouped",)
    symbol = "N"
    accepts = "an int >= 0"
    numbers: tuple[type, ...] = (int,)  # the types a budget may have (bool apart)

    def __init__(self, grouped: bool = False) -> None:
        self.grouped = grouped

    def takes(self, value: object) -> bool:
        """Whether ``value`` is a valid budget (the marker's fast path; None is checked apart)."""
        return type(value) is int and value >= 0

    def why_not(self, value: object) -> str:
        """Why ``value`` is not a valid budget, e.g. ``expected an int >= 0, got 0.5 (float)``."""
        if isinstance(value, bool) or not isinstance(value, self.numbers):
            return f"expected {self.accepts}, got {value!r} ({type(value).__name__})"
        return f"expected {self.accepts}, got {value!r}"

    def parse(self, text: str) -> Amount:
        """An option's or ini key's text as a budget; raises ValueError naming what is accepted."""
        try:
            value: Amount = int(text.strip())
        except ValueError:
            raise ValueError(f"expected {self.accepts}, got {text!r}") from None
        if value < 0:
            raise ValueError(f"expected {self.accepts}, got {value}")
        return value

    def amount(self, value: Amount, noun: str) -> str:
        """A failure's amount, e.g. ``3 recompiles``."""
        return f"{self.cell(value)} {plural_noun(value, noun)}"

    def cell(self, value: Amount) -> str:
        """The summary table's cell."""
        return f"{int(value):,}" if self.grouped else str(int(value))

    def event_amount(self, value: Amount) -> str:
        """Beside one event in a failure's list: nothing for a single unit."""
        return "" if value == 1 else f" ({value:g})"

    def for_json(self, value: Amount) -> Amount:
        return int(value)


class Seconds(Measure):
    """Seconds: ``S a number >= 0``, an int or a float; shown to three significant figures with the
    unit."""

    __slots__ = ()
    symbol = "S"
    accepts = "a number of seconds >= 0 (an int or a float)"
    numbers = (int, float)

    def takes(self, value: object) -> bool:
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and value >= 0)

    def parse(self, text: str) -> Amount:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError(f"expected {self.accepts}, got {text!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"expected {self.accepts}, got {text.strip()}")
        return int(value) if value.is_integer() and "." not in text else value

    def amount(self, value: Amount, noun: str) -> str:
        return f"{format_seconds(value)} of {noun}"

    def cell(self, value: Amount) -> str:
        return f"{value:.2f}"

    def event_amount(self, value: Amount) -> str:
        return f" ({format_seconds(value)})"

    def for_json(self, value: Amount) -> Amount:
        return round(float(value), 3)  # milliseconds: finer is noise


COUNT = Measure()
INSTRUCTIONS = Measure(grouped=True)
SECONDS = Seconds()
