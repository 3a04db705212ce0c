"""The features of pytest-nocompile, each an island: a pytest plugin on the hooks of
:mod:`..hookspecs`, registered by :mod:`..plugin`. No core module imports one."""

# Registered in this order, each under the name "nocompile-<name>".
BUILT_IN = ("strict", "reports", "baselines", "traces", "caches", "contracts",
            "block_assertions", "cudagraphs", "child_startup", "child_events", "children")
