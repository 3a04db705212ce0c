"""How reports show a file (relative to the working directory where it is inside it), and whether
it is torch's own. Pure code: torch is never imported here.

Its own module, below :mod:`.events` and :mod:`.module_names`, which both show places.
"""

from __future__ import annotations

import os
import re
import sys


def display_path(filename: str) -> str:
    """A path as users read it: relative to the working directory when inside it."""
    if not os.path.isabs(filename):
        return filename
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative


# An installed torch's package folder, in any environment: a child process may run another torch.
_INSTALLED_TORCH = re.compile(r"[/\\](?:site|dist)-packages[/\\]torch[/\\]")
_TORCH_FILES: dict[str, bool] = {}


def is_torch_file(filename: str) -> bool:
    """Whether a file is torch's own code: in the package folder of the torch imported here, or
    of any installed torch.

    A graph break in such a file (inside ``optimizer.step()``, say) is torch's,
    not something the user's code can change.
    """
    known = _TORCH_FILES.get(filename)
    if known is None:
        known = filename.startswith(_torch_folder()) or bool(_INSTALLED_TORCH.search(filename))
        _TORCH_FILES[filename] = known
    return known


def _torch_folder() -> tuple[str, ...]:
    """The imported torch's package folder (none before torch is imported: none of it ran)."""
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    return (os.path.join(os.path.dirname(os.path.abspath(torch_file)), ""),) if torch_file else ()
