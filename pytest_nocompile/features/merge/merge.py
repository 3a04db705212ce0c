"""Merging shards: the baselines or JSON reports of runs that each ran part of a suite,
into one file. Pure code.

A suite split over CI jobs (a matrix, pytest-split, several xdist hosts)
saves a baseline or a report per shard; ``python -m pytest_nocompile merge
OUT IN [IN ...]`` makes one of them. Two shards that both ran a test must
agree on what a baseline keeps of it (its gated counts and reasons, for the
same torch): where they do not, the merge fails and names the test, since
either could be the one to keep.
"""

from __future__ import annotations

import json
from typing import Any

from ..baselines.baseline import (
    BASELINE_FORMAT,
    COUNTS_ONLY_FORMAT,
    GATED,
    Baseline,
    BaselineError,
    baseline_entry,
    baseline_from_document,
    document_of,
)
from ..reports.json_report import JSON_FORMAT


class MergeError(ValueError):
    """The inputs cannot be merged: unreadable, of mixed or unknown formats, or shards
    disagreeing on a test."""


def merge_files(paths: list[str]) -> dict[str, Any]:
    """The merged document of the baselines or reports at ``paths`` (all of one kind)."""
    documents = [(path, _read(path)) for path in paths]
    formats = {_format_of(path, document) for path, document in documents}
    if len(formats) > 1:
        raise MergeError(f"cannot merge files of different formats ({', '.join(sorted(formats))}): "
                         "give baselines or reports, not both")
    if formats == {JSON_FORMAT}:
        return merge_reports(documents)
    return document_of(merge_baselines(
        [(path, baseline_from_document(document, path)) for path, document in documents]))


def _read(path: str) -> Any:
    try:
        with open(path) as source:
            return json.load(source)
    except (OSError, ValueError) as error:
        raise MergeError(f"cannot read {path}: {error}") from None


def _format_of(path: str, document: Any) -> str:
    found = document.get("format") if isinstance(document, dict) else None
    if found not in (BASELINE_FORMAT, COUNTS_ONLY_FORMAT, JSON_FORMAT):
        raise MergeError(f"{path} is neither a pytest-nocompile baseline ({BASELINE_FORMAT}) nor a "
                         f"report ({JSON_FORMAT}): its format is {found!r}")
    return str(found)


def merge_baselines(baselines: list[tuple[str, Baseline]]) -> Baseline:
    """One baseline holding every shard's entries, torch version by torch version."""
    merged = Baseline({}, counts_only={baseline.counts_only for _, baseline in baselines} == {True})
    owners: dict[tuple[str, str], str] = {}  # (torch, node id): the file its entry came from
    for path, baseline in baselines:
        for minor, entries in baseline.versions.items():
            into = merged.versions.setdefault(minor, {})
            for nodeid, entry in entries.items():
                _agree(into, nodeid, entry, owners, minor, path)
    return merged


def merge_reports(documents: list[tuple[str, Any]]) -> dict[str, Any]:
    """One report holding every shard's tests; shards of one torch only (a report
    names the torch it ran)."""
    versions = {document.get("torch_version") for _, document in documents}
    if len(versions) > 1:
        raise MergeError("cannot merge reports of different torch versions "
                         f"({', '.join(sorted(map(str, versions)))}): merge each torch's shards "
                         "apart, or their baselines, which keep torch versions apart")
    tests: dict[str, dict[str, Any]] = {}
    kept: dict[str, dict[str, Any]] = {}
    owners: dict[tuple[str, str], str] = {}
    for path, document in documents:
        listed = document.get("tests")
        if (not isinstance(listed, list) or not all(
                isinstance(test, dict) and isinstance(test.get("nodeid"), str) for test in listed)):
            raise MergeError(f"{path} is corrupt: 'tests' must be a list of tests with "
                             "their node ids")
        for test in listed:
            nodeid = test["nodeid"]
            # what two shards that ran it must agree on
            _agree(kept, nodeid, baseline_entry(test, test), owners, "", path)
            tests.setdefault(nodeid, test)
    first = documents[0][1]
    return {**{key: value for key, value in first.items() if key != "tests"},
            "tests": [tests[nodeid] for nodeid in sorted(tests)]}


def _agree(into: dict[str, dict[str, Any]], nodeid: str, entry: dict[str, Any],
           owners: dict[tuple[str, str], str], minor: str, path: str) -> None:
    """Add ``entry`` for ``nodeid``, where no earlier shard has one, or where it says the same; else
    fail, naming the test."""
    earlier = into.get(nodeid)
    if earlier is None:
        into[nodeid] = entry
        owners[(minor, nodeid)] = path
        return
    if _comparable(earlier) != _comparable(entry):
        on = f" on torch {minor}" if minor else ""
        raise MergeError(f"{nodeid}: shards disagree{on}: {owners[(minor, nodeid)]} has "
                         f"{_describe(earlier)}, {path} has {_describe(entry)}")


def _comparable(entry: dict[str, Any]) -> dict[str, Any]:
    return {**{key: entry.get(key) for key in GATED},
            "reasons": sorted(entry.get("reasons") or [])}


def _describe(entry: dict[str, Any]) -> str:
    counts = ", ".join(f"{key.replace('_', ' ')} {entry[key]}" for key in GATED
                       if entry.get(key) is not None)
    reasons = entry.get("reasons") or []
    return f"{counts}; " + ("reasons: " + "; ".join(sorted(reasons)) if reasons else "no reasons")


def write_merged(out: str, paths: list[str]) -> str:
    """Merge ``paths`` into ``out``; the line saying what was merged."""
    from ..reports.json_report import write_json_atomically

    try:
        document = merge_files(paths)
    except BaselineError as error:
        raise MergeError(str(error)) from None
    write_json_atomically(out, document)
    if document.get("format") == JSON_FORMAT:
        what = f"{len(document['tests'])} tests"
    else:
        torch = document.get("torch") or {"any torch": document.get("tests", {})}
        what = "; ".join(f"torch {minor}: {len(entries)} tests" if minor != "any torch"
                         else f"{len(entries)} tests"
                         for minor, entries in torch.items())
    return f"merged {len(paths)} files into {out} ({what})"
