"""The JSON report: ``--nocompile-json=PATH`` writes every watched test's result, with its outcome,
as one JSON document (:mod:`.json_report`), written whole, once the run's tests have all reported.

Hooks: ``pytest_addoption`` (``--nocompile-json``), ``pytest_nocompile_watch_every_test`` (a
report of every test), ``pytest_configure`` (a path that cannot be written is a usage error) and
``pytest_nocompile_run_finished`` (writes the report, after the features that add fields to a
test's entry).
"""

from __future__ import annotations

from typing import Any

import pytest

from ...watching.settings import SETTINGS_KEY, option_group


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--nocompile-json", metavar="PATH", default=None,
        help="write a JSON report of every test's compiles, recompiles and graph breaks")


@pytest.hookimpl
def pytest_nocompile_watch_every_test(config: pytest.Config) -> bool:
    return bool(config.getoption("nocompile_json"))


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("nocompile_json")
    if config.stash[SETTINGS_KEY].is_worker or not path:
        return
    from .json_report import check_writable

    problem = check_writable(path)
    if problem:
        raise pytest.UsageError(f"--nocompile-json={path}: cannot write there: {problem}")


# Last: the features that add fields to a test's entry (a baseline's regressions) come first.
@pytest.hookimpl(trylast=True)
def pytest_nocompile_run_finished(session: pytest.Session, results: Any) -> None:
    path = session.config.getoption("nocompile_json")
    if not path:
        return
    from ...judge.installed_versions import distribution_version
    from .json_report import json_document, write_json_atomically

    versions = {"plugin_version": distribution_version("pytest-nocompile"),
                "torch_version": distribution_version("torch")}
    document = json_document(results.results, results.final_outcomes, versions,
                             results.report_fields)
    write_json_atomically(path, document)
