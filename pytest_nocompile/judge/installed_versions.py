"""The versions of installed distributions (this plugin, torch), read from their
metadata: never imports them."""

from __future__ import annotations

import re
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from typing import Optional

# The newest torch release the plugin's suite has run on: a newer one may have moved what it reads.
NEWEST_TESTED_TORCH = (2, 15)


@cache  # the header, the JSON report and the torch checks all ask
def distribution_version(name: str) -> str:
    """An installed distribution's version from its metadata, or "not
    installed"; imports nothing."""
    try:
        found = distribution(name)
    except PackageNotFoundError:
        return "not installed"
    # Only the Version field: importlib.metadata's version() parses all of
    # METADATA, 38 kB for torch with its long description, which costs more
    # than loading this plugin does.
    text = found.read_text("METADATA") or ""
    headers_end = text.find("\n\n")
    start = text.find("\nVersion:", 0, headers_end if headers_end != -1 else len(text))
    if start == -1:  # another layout (an egg's PKG-INFO): the full parse
        return found.version
    return text[start + len("\nVersion:"):].partition("\n")[0].strip()


def major_minor(version: str) -> Optional[tuple[int, int]]:
    """A version's ``(major, minor)``, ignoring what follows (``2.7.1+cu124`` ->
    ``(2, 7)``); None if it has none."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def newer_than_tested(torch_version: str) -> Optional[str]:
    """What the report header says of a torch newer than :data:`NEWEST_TESTED_TORCH`, or None."""
    release = major_minor(torch_version)
    if release is None or release <= NEWEST_TESTED_TORCH:
        return None
    newest = ".".join(map(str, NEWEST_TESTED_TORCH))
    return (f"nocompile: torch {torch_version} is newer than the newest pytest-nocompile was "
            f"tested on ({newest}): run `python -m pytest_nocompile doctor` to see what it can "
            "read")
