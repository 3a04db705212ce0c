"""The versions of installed distributions (this plugin, torch), read from their
metadata: never imports them."""

from __future__ import annotations

import re
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from typing import Optional


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
