"""pytest-nocompile's entry module: options, markers, configuration, and the objects that do
the work.

- :mod:`.watching.settings` reads the options and ini keys once;
- :mod:`.watching.run_watching` decides whether a run needs per-test hooks, and
  :mod:`.watching.watcher` watches each test one way;
- :mod:`.watching.planning` works out each test's budget from markers, options and ini keys, once
  per shared plan;
- :mod:`.watching.results` gathers each test's result and writes the table;
- :mod:`.watching.fixtures` holds the fixtures;
- :mod:`.watching.registration` adds the core's options, ini keys and markers (the off switch's
  too), and each gate's kinds' as the gate registers;
- :mod:`.hookspecs` declares the hooks through which the core calls the features (added by
  ``pytest_addhooks``, where the gates' kinds start to be taken); ``pytest_addoption`` registers
  the built-in features (:mod:`.features`), each a plugin of its own that adds its own options.

:mod:`.features.off_switch`, an entry point of its own, keeps the markers, options
and fixtures (checking nothing) where ``-p no:nocompile`` blocks this module.

Every budget kind comes from the table in :mod:`.vocabulary.kinds` (the core's, then the gates'):
its marker, option and ini key are made by looping over it.
"""

from __future__ import annotations

import pytest

from . import hookspecs
from .features import FEATURE_NAMES, built_in_features, off_switch
from .watching import fixtures, run_notices
from .watching.registration import (
    add_options,
    gates_left,
    name_gates_to_children,
    register_markers,
    take_kinds_from_gates,
)
from .watching.results import ControllerReports, Results
from .watching.run_watching import Watching
from .watching.settings import SETTINGS_KEY, RunSettings
from .watching.watch import CaptureLostWarning
from .watching.watcher import Watcher

__all__ = ["CaptureLostWarning", "PER_TEST_HOOK_CLASSES"]

# The classes whose ``pytest_runtest_*`` methods run for every test, once
# registered: a stable seam for benchmarks/overhead.py to time the plugin's
# per-test work.
PER_TEST_HOOK_CLASSES = (Watcher,)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks through which the core calls the features."""
    pluginmanager.add_hookspecs(hookspecs)
    take_kinds_from_gates(pluginmanager)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    add_options(parser, pluginmanager)
    # The built-in features, as pytest registers its own plugins, after the core's options: each
    # adds its own (its pytest_addoption runs as it is registered).
    register_features(pluginmanager)
    # Loaded by -p nocompile, autoloading off: a -p no:nocompile after it (addopts, then the
    # command line) unregisters this module, and must find the off switch there.
    name = off_switch.OFF_SWITCH
    if not (pluginmanager.has_plugin(name) or pluginmanager.is_registered(off_switch)):
        pluginmanager.register(off_switch, name)


def register_features(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the built-in features, each under ``nocompile-<name>``."""
    for name, feature in zip(FEATURE_NAMES, built_in_features()):
        if not pluginmanager.has_plugin(name):
            pluginmanager.register(feature, name)


# First: the features' own pytest_configure read the settings.
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)
    settings = config.stash[SETTINGS_KEY] = RunSettings(config)
    name_gates_to_children(config)
    results = Results(settings, config)
    # Before the results: its summary lines come after their table (pytest calls the last
    # registered first).
    config.pluginmanager.register(run_notices, "nocompile-notices")
    config.pluginmanager.register(results, "nocompile-results")
    config.pluginmanager.register(Watching(config, settings, results), "nocompile-watching")
    config.pluginmanager.register(fixtures, "nocompile-fixtures")
    # never collects: gathers, from the start, what its workers send
    if settings.is_xdist_controller:
        config.pluginmanager.register(ControllerReports(results), "nocompile-worker-results")


def pytest_unconfigure(config: pytest.Config) -> None:
    gates_left(config.pluginmanager)


def pytest_report_header(config: pytest.Config) -> list[str]:
    # here: a quiet run shows no header
    from .judge.installed_versions import distribution_version, newer_than_tested

    torch_version = distribution_version("torch")
    newer = newer_than_tested(torch_version)
    return [f"nocompile: pytest-nocompile {distribution_version('pytest-nocompile')}, "
            f"torch {torch_version}", *([newer] if newer else [])]
