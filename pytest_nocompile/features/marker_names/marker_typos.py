"""Marker typos: a mark a keystroke or two off a marker of the plugin is an error of its tests.

pytest only warns of an unknown mark (an error only under ``--strict-markers``),
so ``@pytest.mark.max_recompile(0)`` would leave its test unbudgeted and green.
After collection, every mark name of the tests and of their classes and
modules is compared with the plugin's marker names; a name the user
registered (ini ``markers``, ``config.addinivalue_line``) is theirs and left
alone, as is every name pytest or another plugin registered. Each test marked
with a near miss fails at setup, as a bad marker argument does
(:mod:`...watching.planning`), naming the test, where the mark is, and the marker meant.
"""

from __future__ import annotations

from typing import Generator, Iterable, Iterator, Optional, Sequence

import pytest

from ...vocabulary.kinds import (
    CONTRACT_MARKERS,
    DYNAMIC_DIMS,
    KINDS,
    KINDS_BY_MARKER,
    SAME_ACROSS_RANKS,
    BudgetKind,
)
from ...watching.planning import _marked_on


def _plugin_markers(kinds: Sequence[BudgetKind]) -> tuple[str, ...]:
    return (*(kind.marker for kind in kinds), *CONTRACT_MARKERS)
# Edits (a letter added, dropped, changed, or two neighbours swapped) that still make a typo.
# The plugin's shortest marker has 9 letters: two edits never reach a short name of the
# user's (`slow`, `gpu`) or pytest's (`skip`, `xfail`).
MAX_EDITS = 2
TYPO_ERRORS = pytest.StashKey[list[str]]()


class MarkerTypos:
    """Made after collection where some node has a marker of its own: finds the tests a near miss
    marks."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # By mark name: the plugin's markers it is a typo of (none: not a typo); a registered
        # name is the user's, or pytest's, or another plugin's.
        self._meant: dict[str, tuple[str, ...]] = dict.fromkeys(_registered_markers(config), ())

    def find(self, session: pytest.Session,
             marked: Sequence[pytest.Item | pytest.Collector]) -> None:
        """Mark each test a near miss marks with its errors, given the nodes that carry markers of
        their own (:func:`...watching.planning.marked_nodes`)."""
        # Each node's own marks once; each test's whole chain of marks only in a run where some
        # mark is a typo.
        if not any(self._any_typo(node.own_markers) for node in marked):
            return
        for item in session.items:
            errors = []
            for node, mark in item.iter_markers_with_node():  # closest first, as a budget is read
                meant = self._typo_of(mark.name)
                if meant:
                    errors.append(typo_error(mark.name, meant, node, item))
            if errors:
                item.stash[TYPO_ERRORS] = errors
        self.config.pluginmanager.register(FailTypodTests(), "nocompile-marker-typos")

    def _any_typo(self, marks: Iterable[pytest.Mark]) -> bool:
        return any(self._typo_of(mark.name) for mark in marks)

    def _typo_of(self, name: str) -> tuple[str, ...]:
        meant = self._meant.get(name)
        if meant is None:
            meant = self._meant[name] = nearest_markers(name)
        return meant


class FailTypodTests:
    """Fails each test a near miss marks, at its setup (registered only in a run that has one)."""

    # A wrapper, as the watcher's for a bad marker argument: before the skip and xfail marks are
    # read, and the innermost, inside the other wrappers (pytest's logging one's teardown expects
    # its setup to have run).
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        errors = item.stash.get(TYPO_ERRORS, None)
        if errors:
            pytest.fail("\n".join(errors), pytrace=False)
        return (yield)


def _registered_markers(config: pytest.Config) -> Iterator[str]:
    """The names of every registered marker, read as pytest reads them (``name(args): help``)."""
    for line in config.getini("markers"):
        yield line.split(":", 1)[0].split("(", 1)[0].strip()


def nearest_markers(name: str) -> tuple[str, ...]:
    """The plugin's markers that ``name`` is a typo of, the nearest (none: not a typo)."""
    markers = KINDS.derived(_plugin_markers)
    if name in markers:
        return ()
    distances = {marker: edit_distance(name.lower(), marker) for marker in markers}
    nearest = min(distances.values())
    if nearest > MAX_EDITS:
        return ()
    return tuple(marker for marker, distance in distances.items() if distance == nearest)


def edit_distance(typed: str, meant: str) -> int:
    """Damerau-Levenshtein distance (optimal string alignment): swapping two neighbours is one
    edit."""
    before: Optional[list[int]] = None  # the row of two letters back, for a swap
    previous = list(range(len(meant) + 1))
    for i, letter in enumerate(typed, 1):
        row = [i]
        for j, wanted in enumerate(meant, 1):
            changed = previous[j - 1] + (letter != wanted)
            row.append(min(previous[j] + 1, row[j - 1] + 1, changed))
            if before is not None and j > 1 and letter == meant[j - 2] and typed[i - 2] == wanted:
                row[j] = min(row[j], before[j - 2] + 1)
        before, previous = previous, row
    return previous[-1]


def typo_error(typed: str, meant: tuple[str, ...], node: object, item: pytest.Item) -> str:
    """The test's usage error, e.g. ``unknown marker max_recompile on t.py::test_a: did you mean
    max_recompiles? use @pytest.mark.max_recompiles(N), ...; if max_recompile is a marker of your
    own, register it (ini markers)``."""
    on = item.nodeid if node is item else f"{item.nodeid} ({_marked_on(node, item)})"
    yours = f"; if {typed} is a marker of your own, register it (ini markers)"
    if len(meant) > 1:  # as near to two markers: neither form is the one meant
        return f"unknown marker {typed} on {on}: did you mean {' or '.join(meant)}?{yours}"
    return f"unknown marker {typed} on {on}: did you mean {meant[0]}? use {_form(meant[0])}{yours}"


def _form(marker: str) -> str:
    """The marker's accepted form, as its usage errors give it."""
    kind = KINDS_BY_MARKER.get(marker)
    if kind is not None:
        return kind.marker_form
    # Only a typo loads them.
    from ...vocabulary.kinds import DYNAMIC_DIMS_FORM, SAME_ACROSS_RANKS_FORM

    return {DYNAMIC_DIMS: DYNAMIC_DIMS_FORM, SAME_ACROSS_RANKS: SAME_ACROSS_RANKS_FORM}[marker]
