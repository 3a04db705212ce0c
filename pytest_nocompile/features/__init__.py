"""The features of pytest-nocompile, each an island: a pytest plugin on the hooks of
:mod:`..hookspecs`, registered by :mod:`..plugin`. No core module imports one."""

from __future__ import annotations

import importlib
import types

# Registered in this order, each under the name "nocompile-<name>".
BUILT_IN = ("strict", "reports", "baselines", "traces", "caches", "contracts", "version_budgets",
            "compile_cost", "syncs", "sync_relay", "kernels", "block_assertions", "cudagraphs",
            "marker_names", "child_startup", "child_events", "children")
# The names they are registered under.
FEATURE_NAMES = tuple(f"nocompile-{name}" for name in BUILT_IN)
# The islands that are commands of `python -m pytest_nocompile`, not plugins: no run registers them.
COMMANDS = ("merge", "doctor")
# The islands that are pytest entry points of their own (pyproject.toml), registered by pytest and
# not by the plugin's loop: the off switch, what stays where -p no:nocompile blocks the plugin.
ENTRY_POINTS = ("off_switch",)


def built_in_features() -> list[types.ModuleType]:
    """The built-in features' modules, in :data:`BUILT_IN`'s order (imported here)."""
    return [importlib.import_module(f"{__name__}.{name}") for name in BUILT_IN]
