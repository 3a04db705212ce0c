"""The ``run`` fixture: pytest with the plugin on a user's test file, in a subprocess."""

from __future__ import annotations

import pytest

from nocompile_testing import RunPytest


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> RunPytest:
    """Run pytest with the plugin on the files written to ``pytester``.

    Always in a subprocess: pytester's in-process mode drops the modules a run
    imported, and torch does not survive being imported twice in one process.
    Only this plugin is loaded (``-p nocompile`` with autoload off), and the
    outer run's xdist variables are dropped, so other installed plugins cannot
    change what the inner run prints.
    """
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    # The outer run's: an inner run sets its own per test.
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_NOCOMPILE_EVENTS"):
        monkeypatch.delenv(name, raising=False)

    def run_pytest(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "nocompile", "-p", "no:cacheprovider", *args)

    return run_pytest
