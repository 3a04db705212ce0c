"""Installs the child-process start-up hook beside the package; the rest is in pyproject.toml.

The hook is two files of one name, so that exactly one runs on any Python
(PEP 829): pytest-nocompile.start on Python 3.15 and later, which then skip
the import line of pytest-nocompile.pth; the .pth on older ones. It runs in
every Python process of the environment, costs one environment lookup and
imports nothing more unless PYTEST_NOCOMPILE_EVENTS is set, which a watched
test's process does only for that test's duration
(pytest_nocompile/features/child_startup/hook.py and startup.py say what it does then).
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

STARTUP_HOOKS = ("pytest-nocompile.pth", "pytest-nocompile.start")
HERE = Path(__file__).parent


class BuildPyWithStartupHook(build_py):
    """A wheel (and a regular install) gets the hook at the top of site-packages."""

    def run(self) -> None:
        super().run()
        for hook in STARTUP_HOOKS:
            self.copy_file(str(HERE / hook), os.path.join(self.build_lib, hook),
                           preserve_mode=False)


def add_to_wheel(wheel: Path, files: dict[str, bytes]) -> None:
    """Add files at the wheel's root, each with its line in RECORD, so pip uninstall removes them
    too."""
    rewritten = wheel.with_suffix(".tmp")
    with (zipfile.ZipFile(wheel) as source,
          zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as target):
        for item in source.infolist():
            content = source.read(item.filename)
            if item.filename.endswith(".dist-info/RECORD"):
                content += "".join(record_line(name, data) for name, data in files.items()).encode()
            target.writestr(item, content)
        for name, data in files.items():
            target.writestr(name, data)
    rewritten.replace(wheel)


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


cmdclass: dict[str, type] = {"build_py": BuildPyWithStartupHook}

# setuptools >= 64: pip install -e builds an editable wheel, which build_py's output does not reach
try:
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:
    pass
else:

    class EditableWheelWithStartupHook(editable_wheel):
        def run(self) -> None:
            super().run()
            for wheel in Path(self.dist_dir).glob("*.editable-*.whl"):
                add_to_wheel(wheel, {hook: (HERE / hook).read_bytes() for hook in STARTUP_HOOKS})

    cmdclass["editable_wheel"] = EditableWheelWithStartupHook

setup(cmdclass=cmdclass)
