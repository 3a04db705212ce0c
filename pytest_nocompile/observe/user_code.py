"""Where user code is: the innermost frame outside torch, pytest, pluggy, the stdlib and this plugin.

Called by capture while dynamo logs, to name the user's line that brought a
compile, a recompile or a graph break.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..events import CodeLocation


# This package (pytest_nocompile/), not observe/: none of the plugin's frames is user code.
_PLUGIN_FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


# A plain class with __slots__, not a NamedTuple: making a NamedTuple class
# costs about 0.4 ms at import, which every pytest run that loads the plugin
# would pay.
class _Roots:
    __slots__ = ("packages", "stdlib", "sites")

    def __init__(self, packages: tuple[str, ...], stdlib: tuple[str, ...], sites: tuple[str, ...]) -> None:
        self.packages = packages  # torch, pytest, pluggy, this plugin: never user code
        self.stdlib = stdlib
        self.sites = sites  # may sit inside stdlib; installed user packages live here


@cache
def _library_roots() -> _Roots:
    import importlib
    import sysconfig

    def folder(path: str) -> str:
        return os.path.join(os.path.dirname(os.path.abspath(path)), "")

    modules = []
    for name in ("torch", "pluggy", "_pytest"):
        try:  # a child process may run where pytest is not importable: its frames are then no one's
            modules.append(importlib.import_module(name))
        except Exception:
            pass
    paths = sysconfig.get_paths()
    return _Roots(
        packages=tuple(folder(module.__file__ or "") for module in modules if module.__file__) + (_PLUGIN_FOLDER,),
        stdlib=tuple(os.path.join(paths[key], "") for key in ("stdlib", "platstdlib")),
        sites=tuple(os.path.join(paths[key], "") for key in ("purelib", "platlib")),
    )


# By file name: a compile walks some 25 frames, nearly all in the same few torch files.
_USER_FILES: dict[str, bool] = {}


def _is_user_file(filename: str, roots: _Roots) -> bool:
    known = _USER_FILES.get(filename)
    if known is None:
        known = _USER_FILES[filename] = _classify(filename, roots)
    return known


def _classify(filename: str, roots: _Roots) -> bool:
    if filename.startswith("<"):
        return False
    if filename.startswith(roots.packages):
        return False
    if filename.startswith(roots.stdlib):
        return filename.startswith(roots.sites)
    return True


def find_user_code(frame) -> CodeLocation | None:  # type: ignore[no-untyped-def]
    """The innermost frame outside torch, pytest, pluggy, the stdlib and this plugin."""
    import linecache

    from ..events import CodeLocation

    roots = _library_roots()
    while frame is not None:
        filename = frame.f_code.co_filename
        if _is_user_file(filename, roots):
            code = linecache.getline(filename, frame.f_lineno).strip() or None
            return CodeLocation(filename, frame.f_lineno, frame.f_code.co_name, code)
        frame = frame.f_back
    return None
