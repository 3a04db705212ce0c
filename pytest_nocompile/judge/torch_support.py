"""Whether the installed torch gives what a budget kind counts, read from its
metadata: never imports torch."""

from __future__ import annotations

from typing import Optional

from ..vocabulary.kinds import BudgetKind
from ..vocabulary.measures import plural_noun


def too_old_for(kind: BudgetKind, installed: str, what: Optional[str] = None) -> Optional[str]:
    """Why torch ``installed`` (a version string) cannot give what ``kind`` counts, or None when it
    can (or is not installed).

    ``what`` names what needs it (default: the kind's marker), e.g. a block assertion or a fixture.
    """
    from .installed_versions import major_minor

    since = kind.since_torch
    release = major_minor(installed)
    # None: "not installed", the watch says so itself, once the test runs
    if since is None or release is None or release >= since:
        return None
    first = kind.since_torch_has or f"whose dynamo counts {plural_noun(2, kind.noun)}"
    return (f"{what or kind.marker} needs torch >= {since[0]}.{since[1]}, the first {first}; torch "
            f"{installed} is installed")


def installed_torch_lacks(kind: BudgetKind, what: Optional[str] = None) -> Optional[str]:
    """:func:`too_old_for` the torch installed in this environment."""
    if kind.since_torch is None:  # most kinds: no version to read
        return None
    from . import installed_versions

    return too_old_for(kind, installed_versions.distribution_version("torch"), what)


def refuse_where_torch_lacks(kind: BudgetKind, what: str) -> None:
    """Raise a ``RuntimeError`` naming the first torch that counts ``kind``, where
    the installed one does not: ``what`` (a block assertion, a fixture) would count
    nothing there, and pass."""
    __tracebackhide__ = True
    lacking = installed_torch_lacks(kind, what)
    if lacking is not None:
        raise RuntimeError(f"pytest-nocompile cannot count: {lacking}")
