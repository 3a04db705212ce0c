"""Structured traces: ``--nocompile-trace-dir=DIR`` keeps torch's structured trace (``TORCH_TRACE``,
for tlparse) of each failing watched test, per process and rank, in ``DIR/<test>/``
(:mod:`.folders`, :mod:`.structured_trace`); and torch's trace records are kept out of
pytest's captured logs (:mod:`.captured_logs`, ``--nocompile-keep-trace-logs`` keeps them).

Hooks: ``pytest_addoption`` (``--nocompile-trace-dir`` and its ini key,
``--nocompile-keep-trace-logs``), ``pytest_configure`` (reads where traces go and registers the
run's :class:`~.folders.TraceFolders`, which implements ``pytest_nocompile_watch_opened``,
``pytest_nocompile_record_attached``, ``pytest_nocompile_watch_closed``,
``pytest_nocompile_test_ended`` and ``pytest_nocompile_test_reported``),
``pytest_sessionstart`` (the captured-log filter),
``pytest_nocompile_regression_check`` asked (a passing test's trace is kept where it fails against
the baseline) and
``pytest_nocompile_terminal_summary`` (the trace folder a user's ``TORCH_TRACE`` leaves unused).
"""

from __future__ import annotations

import os
from typing import Any, Optional

import pytest

from ...watching.settings import SETTINGS_KEY, Switch, option_group

DROP_TRACE_LOGS = Switch("--nocompile-keep-trace-logs", "nocompile_drop_trace_logs",
                         "keep torch's structured-trace records (torch.__trace) in pytest's "
                         "captured logs",
                         "leave torch.__trace records out of pytest's captured logs (default: "
                         "true)")

# Where the run keeps traces, in its config's stash: (folder or None, which option said it, the
# user's own TORCH_TRACE folder that leaves it unused or None).
_TRACE_DIR_KEY = pytest.StashKey["tuple[Optional[str], str, Optional[str]]"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--nocompile-trace-dir", metavar="DIR", default=None,
        help="keep torch's structured trace (TORCH_TRACE, for tlparse) of each failing watched "
        "test, per process and rank, in DIR/<test>/; passing tests keep nothing "
        "(ini: nocompile_trace_dir)")
    parser.addini("nocompile_trace_dir", type="string", default=None,
                  help="folder for failing watched tests' structured traces, relative to the ini "
                  "file (default: none, off) [pytest-nocompile]")
    DROP_TRACE_LOGS.add_to(parser)


def trace_dir(config: pytest.Config) -> tuple[Optional[str], str, Optional[str]]:
    """Where failing tests' structured traces are kept: the absolute folder (None: off), from the
    option (relative to where pytest started) or else the ini key (relative to the ini file's
    folder), and which of them said it; and the folder the user's own ``TORCH_TRACE`` names, which
    leaves the option unused (torch writes there)."""
    chosen, given_by = config.getoption("nocompile_trace_dir"), "--nocompile-trace-dir"
    base = config.invocation_params.dir
    if not chosen:
        chosen, given_by = (str(config.getini("nocompile_trace_dir") or "").strip(),
                            "ini key nocompile_trace_dir")
        if config.inipath is not None:
            base = config.inipath.parent
    if not chosen:
        return None, given_by, None
    from .structured_trace import user_trace_folder

    user_folder = user_trace_folder()
    if user_folder is not None:
        return None, given_by, user_folder
    return os.path.abspath(os.path.join(base, os.path.expanduser(chosen))), given_by, None


# Last: after the plugin has read the run's settings and the baselines feature has registered
# what answers the regression check.
@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    folder, given_by, unused = config.stash[_TRACE_DIR_KEY] = trace_dir(config)
    if folder is None:
        return
    settings = config.stash[SETTINGS_KEY]
    if not settings.is_worker:
        from .folders import check_trace_dir

        problem = check_trace_dir(folder)
        if problem:
            raise pytest.UsageError(f"{given_by}: cannot keep traces in {folder}: {problem}")
    from .folders import TraceFolders

    # With a baseline, a test that passed keeps its trace where its result fails against it.
    regressed = config.hook.pytest_nocompile_regression_check(config=config)
    config.pluginmanager.register(TraceFolders(folder, regressed), "nocompile-trace-folders")


# pytest's logging plugin makes its handlers in its own (trylast) pytest_configure.
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if DROP_TRACE_LOGS.is_on(config):
        from .captured_logs import drop_trace_records_from_pytest_capture

        drop_trace_records_from_pytest_capture(config)


@pytest.hookimpl
def pytest_nocompile_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    _, given_by, unused = config.stash.get(_TRACE_DIR_KEY, (None, "", None))
    if unused is not None:  # said once, in the process that shows the summary
        terminalreporter.write_line(f"nocompile: {given_by} is not used: TORCH_TRACE is set, "
                                    "and torch writes every process's structured trace to "
                                    f"{unused}")
