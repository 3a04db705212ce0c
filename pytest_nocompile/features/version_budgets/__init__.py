"""Budgets per torch version: the ``torch=`` keyword of every budget marker
(:mod:`.version_budgets`). ``@pytest.mark.max_recompiles(0, torch={"<2.8": 1})`` allows 1
recompile on torch older than 2.8 and 0 elsewhere; a failure says where its budget came from
(``marker on the test, torch <2.8``).

Hooks: ``pytest_nocompile_marker_keywords`` (``torch``, read after the core checked the marker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional

if TYPE_CHECKING:
    from ...judge.budget import KeywordReader
    from ...vocabulary.kinds import BudgetKind
    from ...vocabulary.measures import Amount


def pytest_nocompile_marker_keywords() -> Mapping[str, KeywordReader]:
    return {"torch": _torch_entries}


def _torch_entries(entries: object, kind: BudgetKind,
                   shown: str) -> Optional[tuple[Optional[Amount], str]]:
    from .version_budgets import read_torch_entries  # here: a run whose markers have none

    return read_torch_entries(entries, kind, shown)
