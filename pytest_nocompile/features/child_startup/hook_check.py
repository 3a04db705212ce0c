"""``--nocompile-check-hook``: is the start-up hook live in the Python that
children of a test would run?

It starts one Python, as :mod:`multiprocessing` starts its children (this
interpreter with this process's flags, of which ``-S``, ``-I`` and ``-s``
matter here), with
``PYTEST_NOCOMPILE_EVENTS`` set to a folder of its own, and has it answer
in that folder: whether the variable reached it, and which hook file ran.
Only when asked: a normal run never starts it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import NamedTuple

from .event_writer import ENV_VAR

TIMEOUT_S = 60

# Run by the checked Python, with -c: stdlib only, and it must not fail where the hook is missing.
_ANSWER = """
import importlib.util, json, os, sys
hook = sys.modules.get("pytest_nocompile.features.child_startup.hook")
try:
    installed = importlib.util.find_spec("pytest_nocompile") is not None
except Exception:
    installed = False
answer = {"variable": bool(os.environ.get(%(var)r)), "ran": list(getattr(hook, "ran", [])),
          "no_site": bool(sys.flags.no_site),
          "reporting": "pytest_nocompile.features.child_startup.startup" in sys.modules,
          "installed": installed, "prefix": sys.prefix}
with open(sys.argv[1], "w") as out:
    json.dump(answer, out)
"""


class HookCheck(NamedTuple):
    live: bool
    line: str  # what the user reads


# The interpreter flags that decide whether a start-up hook runs: no site at all, or no user site.
SITE_FLAGS = ("-S", "-I", "-s")


def check_hook(command: Sequence[str] | None = None) -> HookCheck:
    """Start ``command`` (default: this Python with this process's site flags) with the variable
    set, and say whether its hook answered."""
    if command is None:  # as multiprocessing starts its children
        # multiprocessing's own helper
        flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
        command = [sys.executable, *(flag for flag in flags if flag in SITE_FLAGS)]
    shown = " ".join(command)
    folder = tempfile.mkdtemp(prefix="pytest-nocompile-check-hook-")
    try:
        answer_path = os.path.join(folder, "answer.json")
        try:
            finished = subprocess.run([*command, "-c", _ANSWER % {"var": ENV_VAR}, answer_path],
                                      env={**os.environ, ENV_VAR: os.path.join(folder, "events")},
                                      cwd=folder, stdin=subprocess.DEVNULL, capture_output=True,
                                      text=True, errors="replace", timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return _not_live(shown, f"it did not answer within {TIMEOUT_S} s")
        except OSError as error:
            return _not_live(shown, f"it could not start: {error}")
        try:
            with open(answer_path) as source:
                answer = json.load(source)
        except (OSError, ValueError):
            last = (finished.stderr.strip().splitlines() or ["no output"])[-1]
            return _not_live(shown,
                             f"it exited with {finished.returncode} without answering: {last}")
        return _judge(shown, answer)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _judge(shown: str, answer: dict[str, object]) -> HookCheck:
    ran = answer.get("ran")
    if answer.get("reporting") and isinstance(ran, list) and ran:
        return HookCheck(True, f"nocompile: start-up hook live in {shown} "
                               f"({', '.join(map(str, ran))} ran with {ENV_VAR} set)")
    if not answer.get("variable"):
        why = (f"{ENV_VAR} did not reach it (its environment was scrubbed): pass "
               "env=pytest_nocompile.child_env(...)")
    elif answer.get("no_site"):
        why = ("it runs without site (-S), so no start-up hook runs: call "
               "pytest_nocompile.watch_this_process() in its code")
    elif not answer.get("installed"):
        why = f"pytest-nocompile is not installed in its environment ({answer.get('prefix')})"
    elif ran:
        why = "its hook ran but could not start reporting"
    else:
        why = ("neither pytest-nocompile.pth nor pytest-nocompile.start ran: are they in the "
               f"site-packages of {answer.get('prefix')}?")
    return _not_live(shown, why)


def _not_live(shown: str, why: str) -> HookCheck:
    return HookCheck(False, f"nocompile: start-up hook NOT live in {shown}: {why}; the processes a "
                            "test starts this way are not watched")
