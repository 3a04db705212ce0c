"""pytest-nocompile's off switch: what stays of the plugin when ``-p no:nocompile`` blocks it.

``-p no:nocompile`` blocks the entry point of :mod:`pytest_nocompile.plugin`,
so pytest never imports it, and a suite written for the plugin would stop: its
markers unknown under ``--strict-markers``, its options and ini keys unknown,
its fixtures missing. This island, an entry point of its own (and registered
by :mod:`pytest_nocompile.plugin` where autoloading is off), keeps them all,
checking nothing (:mod:`.switched_off`), and says once, in the summary, that
the plugin is off. With the plugin on, it does nothing. It imports nothing of
the plugin until the plugin is blocked.

Hooks: ``pytest_addoption`` (the core's and every island's options, where the plugin is
blocked), ``pytest_cmdline_main`` (first: unregisters the islands a later ``-p no:nocompile``
blocked), ``pytest_configure`` (the markers; registers :mod:`.switched_off`, whose fixtures and
``pytest_terminal_summary`` say the plugin is off).
"""

from __future__ import annotations

import pytest

PLUGIN = "nocompile"  # the name -p no:nocompile blocks: the plugin's entry point's
OFF_SWITCH = "nocompile-off-switch"  # this module's entry point's name


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if pluginmanager.is_blocked(PLUGIN):  # an addopts or ini key of the plugin's still parses
        from ...watching.registration import add_options
        from .. import built_in_features

        add_options(parser, pluginmanager)
        for feature in built_in_features():  # their options, not their hooks
            if hasattr(feature, "pytest_addoption"):
                feature.pytest_addoption(parser)


# First, before any configures: a -p no:nocompile after -p nocompile blocked the plugin after it
# had registered its features, which must do nothing then.
@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    if config.pluginmanager.is_blocked(PLUGIN):
        from .. import FEATURE_NAMES

        for name in FEATURE_NAMES:
            feature = config.pluginmanager.get_plugin(name)
            if feature is not None:
                config.pluginmanager.unregister(feature, name)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.is_blocked(PLUGIN):
        from ...watching.registration import register_markers
        from . import switched_off

        register_markers(config)
        config.pluginmanager.register(switched_off, "nocompile-switched-off")
