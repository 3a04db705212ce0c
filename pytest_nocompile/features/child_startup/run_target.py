"""A fresh process's entry that runs one piece of a user's code, watched:
``python -m pytest_nocompile.features.child_startup.run_target SPEC``.

The parent (:mod:`..caches.warm_start`) hands over, as one JSON argument, what to
run and where the process reports: a top-level function of a module (called
with no arguments) or a script (run as ``python script.py`` runs it), the
report folder, and, for a function, the parent's ``sys.path``, so that a
module the parent imported (a test module included) imports here the same
way. A module that cannot be imported by its name (pytest's ``importlib``
import mode gives test modules names of its own) is loaded from its file.

Reporting starts before the user's code runs, through the same start-up
hook every watched child process uses (:func:`.hook.watch_this_process`),
so it works where the ``.pth`` hook cannot. An error in the user's code
ends the process with Python's traceback on stderr and exit status 1,
as running it directly would.

Stdlib only until the user's code imports torch.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main(argv: list[str]) -> None:
    spec: dict[str, Any] = json.loads(argv[1])
    from .hook import watch_this_process

    watch_this_process(spec["events"])
    try:
        if "script" in spec:
            _run_script(spec["script"])
        else:
            sys.path[:] = [*spec["sys_path"],
                           *(entry for entry in sys.path if entry not in spec["sys_path"])]
            _function(spec["module"], spec["qualname"], spec.get("file"))()
    except SystemExit:
        raise  # a script's own exit status
    except BaseException as error:
        _print_users_traceback(error)
        sys.exit(1)


def _print_users_traceback(error: BaseException) -> None:
    """Python's traceback from the user's first frame: the failure the parent shows ends
    with it, not with ours."""
    import traceback

    frames = error.__traceback__
    while (frames is not None and frames.tb_next is not None
            and (frames.tb_frame.f_code.co_filename == __file__
                 or "runpy" in frames.tb_frame.f_code.co_filename)):
        frames = frames.tb_next
    traceback.print_exception(type(error), error, frames)


def _run_script(path: str) -> None:
    import runpy

    sys.argv[:] = [path]
    # python script.py's first entry, not this module's folder
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    runpy.run_path(path, run_name="__main__")


def _function(module_name: str, qualname: str, file: str | None) -> Any:
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if file is None or error.name is None or not module_name.startswith(error.name):
            raise  # a module the user's module imports is missing: theirs to see
        module = _load_from_file(module_name, file)
    found: Any = module
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _load_from_file(module_name: str, file: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module_name} from {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    main(sys.argv)
