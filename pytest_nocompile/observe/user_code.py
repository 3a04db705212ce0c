"""Where code is on the stack: the user's (the innermost frame outside torch, pytest, pluggy, the
stdlib and this plugin), and the function dynamo is compiling at this moment.

Called by capture while dynamo logs, to name the user's line that brought a
compile, a recompile or a graph break, and the function a health signal (a
cache miss) came from.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from types import CodeType
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from types import FrameType

    from ..vocabulary.events import CodeLocation

    _Roots = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


# This package (pytest_nocompile/), not observe/: none of the plugin's frames is user code.
_PLUGIN_FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


@cache
def _library_roots() -> _Roots:
    """(packages, stdlib, sites): torch's, pytest's, pluggy's and this plugin's folders (never user
    code), the stdlib's, and the site folders (they may sit inside the stdlib's;
    installed user packages live there)."""
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
    return (
        tuple(folder(module.__file__ or "") for module in modules if module.__file__)
        + (_PLUGIN_FOLDER,),
        tuple(os.path.join(paths[key], "") for key in ("stdlib", "platstdlib")),
        tuple(os.path.join(paths[key], "") for key in ("purelib", "platlib")),
    )


def _generated_by_inductor(filename: str) -> bool:
    """Whether inductor wrote this file (its code cache): what it runs at each call, e.g.
    a CUDA graph's replay, is torch's.

    Asked once per file name. The folder is worked out as inductor's ``cache_dir()``
    does, without calling it: that sets ``TORCHINDUCTOR_CACHE_DIR`` and makes the
    folder. Without inductor imported, no file of it can be running.
    """
    # newer, older torch
    for name in ("torch._inductor.runtime.cache_dir_utils",
                 "torch._inductor.runtime.runtime_utils"):
        default_cache_dir = getattr(sys.modules.get(name), "default_cache_dir", None)
        if default_cache_dir is None:
            continue
        try:
            folder = os.path.abspath(os.environ.get("TORCHINDUCTOR_CACHE_DIR")
                                     or default_cache_dir())
        except Exception:  # inductor could not say: the file is judged by the other rules
            return False
        return any(path.startswith(os.path.join(root, "")) for path, root in
                   ((filename, folder), (os.path.realpath(filename), os.path.realpath(folder))))
    return False


# By file name: a compile walks some 25 frames, nearly all in the same few torch files.
_USER_FILES: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    """Whether a file is user code: not torch's, pytest's, pluggy's, the stdlib's or this
    plugin's."""
    return _is_user_file(filename, _library_roots())


def _is_user_file(filename: str, roots: _Roots) -> bool:
    known = _USER_FILES.get(filename)
    if known is None:
        known = _USER_FILES[filename] = _classify(filename, roots)
    return known


def _classify(filename: str, roots: _Roots) -> bool:
    packages, stdlib, sites = roots
    if filename.startswith("<"):
        return False
    if filename.startswith(packages):
        return False
    if _generated_by_inductor(filename):
        return False
    if filename.startswith(stdlib):
        return filename.startswith(sites)
    return True


def find_user_code(frame,  # type: ignore[no-untyped-def]
                   resumed: Optional[tuple[str, str]] = None) -> CodeLocation | None:
    """The innermost frame outside torch, pytest, pluggy, the stdlib and this plugin.

    ``resumed``: ``(filename, function)`` when dynamo recompiles the code it
    runs after a graph break in ``function``. The innermost user frame is then
    that function's own, stopped at the graph break; the line that brought the
    new value in is its caller's, so the function's frames are passed over
    (the innermost of them is the answer only when no caller is user code).
    """
    import linecache

    from ..vocabulary.events import CodeLocation

    roots = _library_roots()
    passed_over = None
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        if _is_user_file(filename, roots):
            location = CodeLocation(filename, frame.f_lineno, code.co_name,
                                    linecache.getline(filename, frame.f_lineno).strip() or None)
            if resumed is None or not _runs(code, resumed):
                return location
            passed_over = passed_over or location
        frame = frame.f_back
    return passed_over


def _runs(code: CodeType, resumed: tuple[str, str]) -> bool:
    """Whether ``code`` is the resumed function's (its original or one of dynamo's resume functions
    of it)."""
    from ..vocabulary.resume_names import user_function

    filename, function = resumed
    return code.co_filename == filename and user_function(code.co_name) == function


_CONVERT_FRAME = os.path.join("_dynamo", "convert_frame.py")


def compiling_code(frame: Optional[FrameType]) -> tuple[Optional[CodeType], Any]:
    """The code of the function whose frame dynamo is compiling, and the locals of dynamo's
    ``_compile`` frame (its arguments), found from ``frame`` outwards; (None, {}) outside a compile.

    A health signal comes from deep inside a compile: the user's code on the
    stack is the call that brought the compile, not the function compiled,
    whose frame dynamo has not started yet. dynamo's
    ``torch._dynamo.convert_frame._compile(code, ...)`` holds that function's
    code object as its first argument in every torch from 2.4 to 2.15 (read in
    their sources). Outside a frame compile (a backward graph compiled lazily,
    in ``loss.backward()``) there is none.
    """
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith(_CONVERT_FRAME):
            arguments = frame.f_locals
            compiled = arguments.get("code")
            return compiled if isinstance(compiled, CodeType) else None, arguments
        frame = frame.f_back
    return None, {}
