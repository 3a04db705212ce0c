"""Budgets per torch version: a budget marker's ``torch=`` entries, read and matched against the
installed torch. Pure code.

``@pytest.mark.max_recompiles(0, torch={"<2.8": 1})`` allows 1 recompile on
torch older than 2.8 and 0 elsewhere. Each key is a spec, a comparison and a
torch ``major.minor``: ``<X.Y``, ``<=X.Y``, ``>X.Y``, ``>=X.Y`` or ``==X.Y``.
Only major and minor are compared: on torch ``2.7.1+cu124`` both ``==2.7``
and ``<2.8`` match. The first entry that matches, in the order written,
gives the budget; a value of None takes the test out of that budget there.
The installed version is read from torch's metadata, never by importing it.
"""

from __future__ import annotations

import operator
import re
from typing import TYPE_CHECKING, Callable, Optional

from ...judge import installed_versions
from ...judge.budget import BudgetUsageError
from ...judge.installed_versions import major_minor

if TYPE_CHECKING:
    from ...vocabulary.kinds import BudgetKind
    from ...vocabulary.measures import Amount, Measure

_COMPARISONS: dict[str, Callable[[tuple[int, int], tuple[int, int]], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


class VersionSpec:
    """One key of ``torch=``: it :meth:`matches` a torch ``(major, minor)``, and reads as written
    without spaces (``<2.8``)."""

    __slots__ = ("comparison", "release")

    def __init__(self, comparison: str, release: tuple[int, int]) -> None:
        self.comparison = comparison
        self.release = release

    def matches(self, release: tuple[int, int]) -> bool:
        return _COMPARISONS[self.comparison](release, self.release)

    def __str__(self) -> str:
        return f"{self.comparison}{self.release[0]}.{self.release[1]}"


def parse_spec(text: object) -> Optional[VersionSpec]:
    """``text`` as a spec, or None where it is none (not a str, no
    comparison, a patch number, ...)."""
    if not isinstance(text, str):
        return None
    found = re.fullmatch(r"\s*(<=|>=|==|<|>)\s*(\d+)\.(\d+)\s*", text)
    return VersionSpec(found[1], (int(found[2]), int(found[3]))) if found else None


def installed_torch() -> Optional[tuple[int, int]]:
    """The installed torch's ``(major, minor)``, from its metadata; None where
    torch is not installed."""
    return major_minor(installed_versions.distribution_version("torch"))


def entry_in_force(
    entries: object, measure: Measure, torch: Optional[tuple[int, int]],
) -> Optional[tuple[VersionSpec, Optional[Amount]]]:
    """The first of ``entries`` (the ``torch=`` argument) whose spec matches ``torch``, as
    (spec, N); None if none does.

    Every entry is checked, matching or not, so a bad one fails on every
    torch: a ValueError says which and why.
    """
    if not isinstance(entries, dict):
        raise ValueError(f"torch must be a dict, got {entries!r} ({type(entries).__name__})")
    found = None
    for text, allowed in entries.items():
        spec = parse_spec(text)
        if spec is None:
            raise ValueError(f"torch key {text!r} is not a version spec")
        if allowed is not None and not measure.takes(allowed):
            raise ValueError(f"torch[{text!r}]: {measure.why_not(allowed)}")
        if found is None and torch is not None and spec.matches(torch):
            found = (spec, allowed)
    return found


def torch_form(kind: BudgetKind) -> str:
    """The accepted form of ``torch=``, for its usage errors."""
    symbol = kind.measure.symbol
    return (f'@pytest.mark.{kind.marker}({symbol}, torch={{"<X.Y": {symbol}, ...}}), each key '
            "<X.Y, <=X.Y, >X.Y, >=X.Y or ==X.Y (torch's major.minor; the first that matches "
            f"applies), each {symbol} {kind.measure.accepts} or None")


def read_torch_entries(entries: object, kind: BudgetKind,
                       shown: str) -> Optional[tuple[Optional[Amount], str]]:
    """A budget marker's ``torch=`` (``shown``: the marker as written): the N of the entry that
    matches the installed torch, and ``torch <spec>`` for where the budget came from; None where
    none matches (the marker's N stays). A bad entry is a usage error on every torch."""
    try:
        entry = entry_in_force(entries, kind.measure, installed_torch())
    except ValueError as error:
        raise BudgetUsageError(f"{shown}: {error}; use {torch_form(kind)}") from None
    if entry is None:
        return None
    spec, count = entry
    return count, f"torch {spec}"
