"""The JSON report: ``--nocompile-json=PATH`` writes every watched test's result, with its outcome,
as one JSON document (:mod:`.json_report`), written whole, once the run's tests have all reported.

Hooks: ``pytest_configure`` (a path that cannot be written is a usage error) and
``pytest_nocompile_run_finished`` (writes the report, after the features that add fields to a
test's entry).
"""

from __future__ import annotations

from typing import Any

import pytest

from ...watching.settings import SETTINGS_KEY


def pytest_configure(config: pytest.Config) -> None:
    settings = config.stash[SETTINGS_KEY]
    if settings.is_worker or not settings.json_path:
        return
    from .json_report import check_writable

    problem = check_writable(settings.json_path)
    if problem:
        raise pytest.UsageError(
            f"--nocompile-json={settings.json_path}: cannot write there: {problem}")


# Last: the features that add fields to a test's entry (a baseline's regressions) come first.
@pytest.hookimpl(trylast=True)
def pytest_nocompile_run_finished(session: pytest.Session, results: Any) -> None:
    path = session.config.stash[SETTINGS_KEY].json_path
    if not path:
        return
    from ...judge.installed_versions import distribution_version
    from .json_report import json_document, write_json_atomically

    versions = {"plugin_version": distribution_version("pytest-nocompile"),
                "torch_version": distribution_version("torch")}
    document = json_document(results.results, results.final_outcomes, versions,
                             results.report_fields)
    write_json_atomically(path, document)
