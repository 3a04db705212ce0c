"""How reports show a file: relative to the working directory where it is inside it. Pure code.

Its own module, below :mod:`.events` and :mod:`.module_names`, which both show places.
"""

from __future__ import annotations

import os


def display_path(filename: str) -> str:
    """A path as users read it: relative to the working directory when inside it."""
    if not os.path.isabs(filename):
        return filename
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative
