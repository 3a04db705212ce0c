"""Versions of the plugin side by side: the scripts that compare git revisions take them from
here."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def revision_list(text: str) -> list[str]:
    """The git revisions of a comma-separated ``--revisions`` value, in order."""
    return [revision.strip() for revision in text.split(",") if revision.strip()]


def revision_sides(text: str) -> list[tuple[str, str, list[str]]]:
    """The sides of a comma-separated ``--revisions`` value whose entries may add pytest options
    after the revision (``dc6d382,HEAD,HEAD --nocompile-trace-dir=traces``): each side's label (the
    entry), revision and options."""
    sides = []
    for entry in revision_list(text):
        revision, *options = shlex.split(entry)
        sides.append((entry, revision, options))
    return sides


def extract(revision: str, into: Path) -> Path:
    """The plugin's package at ``revision``, in a folder of its own (to put first on
    ``PYTHONPATH``)."""
    folder = into / revision.replace("/", "_")
    folder.mkdir()
    archive = subprocess.run(["git", "archive", revision, "pytest_nocompile"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder
