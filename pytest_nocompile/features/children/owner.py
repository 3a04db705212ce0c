"""Who this process is on disk: its effective user id, which the run's folders and their removal
check before they touch anything. Stdlib only."""

from __future__ import annotations

import os


def user_id() -> int:
    """This process's effective user id, or -1 where the platform has none."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else -1
