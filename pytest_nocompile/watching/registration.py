"""The plugin's options, ini keys and markers, registered by :mod:`..plugin` and, where
``-p no:nocompile`` blocks it, by the off switch (``features/off_switch/``), so that a suite
written for the plugin still parses and collects."""

from __future__ import annotations

import functools
import os
import types
from typing import Optional, Sequence

import pytest

from ..output.summary import LONG_TABLE, TABLE_CHOICES
from ..vocabulary.kinds import (
    CONTRACT_MARKER_HELP,
    GATES_VAR,
    KINDS,
    BudgetKind,
)
from .settings import GRAPH_BREAKS_USER_ONLY, STRICT, SWITCHES, count_argument, option_group

# The kinds each run's gates added (pytest_nocompile_kinds), by plugin manager, and the parser
# their options go to once it is there: a nested run's gates leave with it.
_ADDED: dict[pytest.PytestPluginManager, list[BudgetKind]] = {}
_PARSERS: dict[pytest.PytestPluginManager, pytest.Parser] = {}


def take_kinds_from_gates(pluginmanager: pytest.PytestPluginManager) -> None:
    """From now on, each plugin's ``pytest_nocompile_kinds`` adds its kinds to the table (those
    registered already too), and their options once :func:`add_options` made the plugin's."""
    pluginmanager.hook.pytest_nocompile_kinds.call_historic(
        result_callback=functools.partial(_add_gate_kinds, pluginmanager))


def _add_gate_kinds(pluginmanager: pytest.PytestPluginManager,
                    kinds: Optional[Sequence[BudgetKind]]) -> None:
    try:
        added = KINDS.add(kinds or ())
    except ValueError as error:  # a gate's kind clashes with one there: the gate's to fix
        raise pytest.UsageError(str(error)) from None
    _ADDED.setdefault(pluginmanager, []).extend(added)
    parser = _PARSERS.get(pluginmanager)
    if parser is not None:
        for kind in added:
            _add_kind_options(parser, kind)


def gates_left(pluginmanager: pytest.PytestPluginManager) -> None:
    """The run ended: the kinds its gates added leave the table."""
    KINDS.remove(_ADDED.pop(pluginmanager, ()))
    _PARSERS.pop(pluginmanager, None)


def name_gates_to_children(config: pytest.Config) -> None:
    """Name the run's gate modules beyond the built-in ones to its child processes
    (:data:`~..vocabulary.kinds.GATES_VAR`), so that they count those kinds too; set back when
    the run ends. A run without such gates leaves the environment alone."""
    known = KINDS.gate_modules()
    named = [plugin.__name__ for plugin in config.pluginmanager.get_plugins()
             if isinstance(plugin, types.ModuleType) and hasattr(plugin, "pytest_nocompile_kinds")
             and plugin.__name__ not in known]
    if not named:
        return
    before = os.environ.get(GATES_VAR)
    os.environ[GATES_VAR] = ",".join(dict.fromkeys([*(before or "").split(","), *named])).strip(",")

    def set_back() -> None:
        if before is None:
            os.environ.pop(GATES_VAR, None)
        else:
            os.environ[GATES_VAR] = before

    config.add_cleanup(set_back)


def _add_kind_options(parser: pytest.Parser, kind: BudgetKind) -> None:
    # "nocompile:" first, on the option's own line: `pytest --help | grep -i nocompile` finds
    # the budget options, whose names do not say whose they are.
    group = option_group(parser)
    budget = f"{kind.noun} floor (fewest allowed)" if kind.is_floor else f"{kind.noun} budget"
    group.addoption(kind.option, dest=kind.marker, type=count_argument(kind.measure),
                    default=None, metavar=kind.measure.symbol,
                    help=f"nocompile: default {budget} for every test (ini: {kind.marker}); a "
                    f"marker overrides it")
    parser.addini(kind.marker, type="string", default=None,
                  help=f"default {budget} for every test ({kind.measure.accepts}) "
                  f"[pytest-nocompile]")


def add_options(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """The options and ini keys (the off switch's too: addopts and ini files still parse)."""
    group = option_group(parser)
    for kind in KINDS:
        _add_kind_options(parser, kind)
    _PARSERS[pluginmanager] = parser
    STRICT.add_to(parser)
    GRAPH_BREAKS_USER_ONLY.add_to(parser)
    group.addoption("--nocompile-report", action="store_true", default=None,
                    help="watch every test and show the nocompile summary table even when no test "
                    "is budgeted")
    group.addoption("--nocompile-table", choices=TABLE_CHOICES, default=None,
                    help=f"which tests the nocompile summary table lists: all that compiled, "
                    f"failures only, or auto (default): failures only once more than {LONG_TABLE} "
                    f"tests would be listed (ini: nocompile_table)")
    parser.addini("nocompile_table", type="string", default="auto",
                  help=f"which tests the summary table lists: {', '.join(TABLE_CHOICES)} "
                  f"(default: auto) [pytest-nocompile]")
    for switch in SWITCHES:
        switch.add_to(parser)


def register_markers(config: pytest.Config) -> None:
    """The markers, for ``pytest --markers`` and ``--strict-markers`` (the off switch's too)."""
    for kind in KINDS:
        config.addinivalue_line("markers", kind.marker_help)
    for line in CONTRACT_MARKER_HELP:
        config.addinivalue_line("markers", line)
