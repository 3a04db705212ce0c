"""The run's configuration: options and ini keys read once."""

from __future__ import annotations

import argparse
from typing import Callable, Optional

import pytest

from ..judge.budget import BudgetUsageError, RecompileBudget, parse_option_count, resolve
from ..judge.torch_support import installed_torch_lacks
from ..output.summary import TABLE_CHOICES
from ..vocabulary.kinds import KINDS, USER_ONLY_INI, USER_ONLY_OPTION
from ..vocabulary.measures import COUNT, Amount, Measure


def count_argument(measure: Measure = COUNT) -> Callable[[str], Amount]:
    """An argparse ``type=`` for a budget option. argparse names the option in its error
    (``argument --max-recompiles: expected an int >= 0, got 'abc'``): the message does not."""

    def parse(text: str) -> Amount:
        try:
            return measure.parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _default_budget(config: pytest.Config) -> RecompileBudget:
    """The budget of a test without markers: each kind's option, else its ini key, and which of them
    set it."""
    allowed: dict[str, Optional[Amount]] = {}
    sources: dict[str, str] = {}
    for kind in KINDS:
        cli, ini = config.getoption(kind.marker), _ini_count(config, kind.marker, kind.measure)
        allowed[kind.key] = resolve(ini, cli, None)
        if cli is not None:
            sources[kind.key] = f"from {kind.option}"
        elif ini is not None:
            sources[kind.key] = _ini_source(config, kind.marker)
        # A run-wide budget of a kind the installed torch cannot count is a usage error: it would
        # pass silently.
        lacking = installed_torch_lacks(kind) if allowed[kind.key] is not None else None
        if lacking is not None:
            raise pytest.UsageError(
                f"{kind.option if cli is not None else f'ini key {kind.marker}'}: {lacking}")
    return RecompileBudget.of(allowed, sources=sources, user_only=_graph_breaks_user_only(config))


def _graph_breaks_user_only(config: pytest.Config) -> bool:
    """Whether graph-break budgets count only the user's breaks, not those inside torch: the
    option or the ini key (the option's dest is the ini key's name)."""
    return GRAPH_BREAKS_USER_ONLY.is_on(config)


def _ini_source(config: pytest.Config, key: str) -> str:
    """Where an ini key's value came from: ``-o KEY=...`` on the command line, or the ini file."""
    overrides = getattr(config.option, "override_ini", None) or ()
    if any(override.partition("=")[0].strip() == key for override in overrides):
        return f"from -o {key}"
    inipath = config.inipath
    return f"from nocompile ini key {key}" + (f" in {inipath.name}" if inipath is not None else "")


def _table_choice(config: pytest.Config) -> str:
    """Which tests the summary table lists: the option's choice, else the ini key's (checked: a typo
    is a usage error)."""
    chosen = config.getoption("nocompile_table")
    if chosen is not None:
        return str(chosen)
    text = str(config.getini("nocompile_table")).strip()
    if text not in TABLE_CHOICES:
        raise pytest.UsageError("ini key nocompile_table: expected one of "
                                f"{', '.join(TABLE_CHOICES)}, got {text!r}")
    return text


def _ini_count(config: pytest.Config, key: str, measure: Measure = COUNT) -> Optional[Amount]:
    text = config.getini(key)
    if text in (None, ""):
        return None
    try:
        return parse_option_count(str(text), f"ini key {key}", measure)
    except BudgetUsageError as error:
        raise pytest.UsageError(str(error)) from None


def option_group(parser: pytest.Parser) -> pytest.OptionGroup:
    """The plugin's group of options in ``pytest --help``, where every island adds its own."""
    return parser.getgroup("nocompile", "torch.compile recompile budgets (pytest-nocompile)")


class Switch:
    """A behaviour on by default: an ini key (bool, default true) turns it off, and so does a
    store-true option."""

    __slots__ = ("option", "ini", "option_help", "ini_help")

    def __init__(self, option: str, ini: str, option_help: str, ini_help: str) -> None:
        self.option, self.ini, self.option_help, self.ini_help = option, ini, option_help, ini_help

    def add_to(self, parser: pytest.Parser) -> None:
        """Its option, in the plugin's group, and its ini key."""
        option_group(parser).addoption(self.option, action="store_true", default=None,
                                       help=f"{self.option_help} (ini: {self.ini})")
        parser.addini(self.ini, type="bool", default=True,
                      help=f"{self.ini_help} [pytest-nocompile]")

    def is_on(self, config: pytest.Config) -> bool:
        return bool(not config.getoption(self.option.lstrip("-").replace("-", "_"))
                    and config.getini(self.ini))


class Flag:
    """A behaviour off by default: a store-true option or an ini key (bool, default false) turns
    it on; the option's dest is the ini key's name."""

    __slots__ = ("option", "ini", "option_help", "ini_help")

    def __init__(self, option: str, ini: str, option_help: str, ini_help: str) -> None:
        self.option, self.ini, self.option_help, self.ini_help = option, ini, option_help, ini_help

    def add_to(self, parser: pytest.Parser) -> None:
        """Its option, in the plugin's group, and its ini key."""
        option_group(parser).addoption(self.option, dest=self.ini, action="store_true",
                                       default=None, help=f"{self.option_help} (ini: {self.ini})")
        parser.addini(self.ini, type="bool", default=False,
                      help=f"{self.ini_help} (default: false) [pytest-nocompile]")

    def is_on(self, config: pytest.Config) -> bool:
        return bool(config.getoption(self.ini) or config.getini(self.ini))


STRICT = Flag("--nocompile-strict", "nocompile_strict",
              "raise at the recompiling call in tests with a recompile budget (dynamo's "
              "error_on_recompile), so the traceback points into your code",
              "raise at the recompiling call in tests with a recompile budget")
GRAPH_BREAKS_USER_ONLY = Flag(USER_ONLY_OPTION, USER_ONLY_INI,
                              "graph-break budgets count only the graph breaks in your code, not "
                              "those inside torch (a compiled optimizer step's); a marker's "
                              "user_only= overrides it",
                              "graph-break budgets count only the graph breaks in your code, not "
                              "those inside torch")
ISOLATE = Switch("--nocompile-no-isolate", "nocompile_isolate",
                 "do not call torch._dynamo.reset() before each watched test; counts then depend "
                 "on which tests ran before",
                 "reset dynamo's caches before each watched test (default: true)")
SWITCHES = (ISOLATE,)
# The run's settings, in its config's stash: read by the features (pytest_nocompile.features).
SETTINGS_KEY = pytest.StashKey["RunSettings"]()


class RunSettings:
    """What the options and ini keys say for this run, and which process of it this is."""

    def __init__(self, config: pytest.Config) -> None:
        self.isolate_by_default = ISOLATE.is_on(config)
        # The option turns strict mode on for the run; so does the ini key (a marker's strict= still
        # wins).
        self.strict_by_default = STRICT.is_on(config)
        self.default_budget = _default_budget(config)
        self.report_requested = bool(config.getoption("nocompile_report"))
        self.table = _table_choice(config)
        # the table of every test asked for, or a feature's report of every test (JSON, baseline)
        self.watch_every_test = bool(self.report_requested or any(
            config.hook.pytest_nocompile_watch_every_test(config=config)))
        # a test with no marker
        self.watch_by_default = self.watch_every_test or self.default_budget.budgeted
        self.is_worker = hasattr(config, "workerinput")
        # pytest-xdist runs tests in workers when its dist mode is on (pytest-cov reads it the same
        # way).
        self.is_xdist_controller = not self.is_worker and config.getoption("dist", "no") != "no"


