"""The JSON report (``--nocompile-json``), from each test's
:class:`~pytest_nocompile.judge.result.TestResult`, written whole.

A test's result is made where the test ran (an xdist worker too) and carried
on its teardown report as :meth:`~pytest_nocompile.judge.result.TestResult.to_dict`, so the
controller writes every test. Loaded only by a run that writes a report, a
baseline or a merge.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Optional

from ...watching.results import outcome_of

if TYPE_CHECKING:
    from ...judge.result import TestResult

__all__ = ["JSON_FORMAT", "check_writable", "json_document", "outcome_of", "write_json_atomically"]

JSON_FORMAT = "pytest-nocompile-report/1"


def json_document(
    results: dict[str, TestResult], outcomes: dict[str, list[tuple[str, str, bool]]],
    versions: dict[str, str],
    fields: Optional[dict[str, dict[str, Any]]] = None,
) -> dict[str, Any]:
    """The JSON report: each test's result with its outcome (from ``outcomes``, its reports that
    were not plain passes), and the fields the features add to a test's entry (``fields``, by node
    id: a test that failed the run against the baseline, what rose or is new, as
    ``baseline_regressions``)."""
    fields = fields or {}
    return {
        "format": JSON_FORMAT,
        **versions,
        "tests": [
            {"nodeid": nodeid, "outcome": outcome_of(outcomes.get(nodeid, ())), **result.to_dict(),
             **fields.get(nodeid, {})}
            for nodeid, result in results.items()
        ],
    }


def write_json_atomically(path: str, document: Any) -> None:
    """Write to a temporary file beside ``path`` and rename: readers never see half a file.

    The file gets the mode any new file gets (0666 less the umask), not
    mkstemp's 0600: a CI step running as another user uploads it as an artefact.
    """
    handle, temporary = _new_file(os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(document, out, indent=2, sort_keys=False)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _new_file(folder: str) -> tuple[int, str]:
    """A new file of a fresh name in ``folder``, opened for writing, created with mode 0666 (the
    kernel applies the umask)."""
    while True:
        temporary = os.path.join(folder, f".nocompile-{os.urandom(6).hex()}.json")
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temporary
        except FileExistsError:  # a name taken: another try, as mkstemp does
            continue


def check_writable(path: str) -> Optional[str]:
    """Why ``path`` cannot be written, or None."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        return f"{path} is a directory"
    if not os.path.isdir(folder):
        return f"folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"folder {folder} is not writable"
    return None
