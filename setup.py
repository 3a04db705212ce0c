"""Installs the child-process start-up hook (pytest-nocompile.pth) beside the package; the rest is in pyproject.toml.

The hook runs in every Python process of the environment. It costs one
environment lookup and imports nothing unless PYTEST_NOCOMPILE_EVENTS is set,
which a watched test's process does only for that test's duration
(pytest_nocompile/observe/startup.py says what it does then).
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

STARTUP_HOOK = "pytest-nocompile.pth"
HERE = Path(__file__).parent


class BuildPyWithStartupHook(build_py):
    """A wheel (and a regular install) gets the hook at the top of site-packages."""

    def run(self) -> None:
        super().run()
        self.copy_file(str(HERE / STARTUP_HOOK), os.path.join(self.build_lib, STARTUP_HOOK), preserve_mode=False)


def add_to_wheel(wheel: Path, name: str, data: bytes) -> None:
    """Add a file at the wheel's root, with its line in RECORD, so pip uninstall removes it too."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    rewritten = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            content = source.read(item.filename)
            if item.filename.endswith(".dist-info/RECORD"):
                content += f"{name},sha256={digest},{len(data)}\n".encode()
            target.writestr(item, content)
        target.writestr(name, data)
    rewritten.replace(wheel)


cmdclass: dict[str, type] = {"build_py": BuildPyWithStartupHook}

try:  # setuptools >= 64: pip install -e builds an editable wheel, which build_py's output does not reach
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:
    pass
else:

    class EditableWheelWithStartupHook(editable_wheel):
        def run(self) -> None:
            super().run()
            for wheel in Path(self.dist_dir).glob("*.editable-*.whl"):
                add_to_wheel(wheel, STARTUP_HOOK, (HERE / STARTUP_HOOK).read_bytes())

    cmdclass["editable_wheel"] = EditableWheelWithStartupHook

setup(cmdclass=cmdclass)
