"""dynamo's arrival (and torch's): a one-shot import hook that calls back once ``torch._dynamo`` has
finished importing.

Stdlib only, and light: a child process's start-up hook arms it without
importing logging or torch. The plugin never imports dynamo (about 1 s): a
suite that imports torch and never compiles should not pay for it. Capture
starts when dynamo finishes importing, which ``torch.compile`` can do in the
middle of a test that then recompiles; the hook calls back right then, before
anything compiled. A child process that reads syncs waits for ``torch`` the same way
(:func:`when_torch_arrives`): nothing can sync before torch is imported.
"""

from __future__ import annotations

import sys

# typing.TYPE_CHECKING without importing typing (about 1.7 ms in each process a watched test starts)
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Callable

DYNAMO = "torch._dynamo"
TORCH = "torch"


def dynamo_imported() -> bool:
    """Whether torch._dynamo is imported: until then nothing can have compiled."""
    return DYNAMO in sys.modules


class _NotifyingLoader:
    """dynamo's own loader, with a call back once its module has executed."""

    def __init__(self, loader: Any, finder: _ArrivalFinder) -> None:
        self._loader = loader
        self._finder = finder

    def exec_module(self, module: Any) -> None:
        # Put the real loader back before any code can read it off the module.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        try:
            self._loader.exec_module(module)
        except BaseException:
            self._finder.install()  # the import failed: watch for the next attempt
            raise
        self._finder.arrived()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _ArrivalFinder:
    """A meta path finder that sees only one module's import (``torch._dynamo``'s), and leaves once
    it has seen it."""

    def __init__(self, module: str = DYNAMO) -> None:
        self.module = module
        self.callbacks: list[Callable[[], None]] = []

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.module:
            return None
        import importlib.util  # here, not at import: a child's start-up hook imports this module

        self.uninstall()  # the finders after us find the real spec
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _NotifyingLoader(spec.loader, self)  # type: ignore[assignment]
        return spec

    def arrived(self) -> None:
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()


_arrival = _ArrivalFinder()
_torch_arrival = _ArrivalFinder(TORCH)


def when_dynamo_arrives(callback: Callable[[], None]) -> None:
    """Call ``callback`` once ``torch._dynamo`` has finished importing (in the importing thread)."""
    if callback not in _arrival.callbacks:
        _arrival.callbacks.append(callback)
    _arrival.install()


def stop_waiting_for_dynamo(callback: Callable[[], None]) -> None:
    if callback in _arrival.callbacks:
        _arrival.callbacks.remove(callback)
    if not _arrival.callbacks:
        _arrival.uninstall()


def when_torch_arrives(callback: Callable[[], None]) -> None:
    """Call ``callback`` once ``torch`` has finished importing (in the importing thread);
    at once if it has."""
    if TORCH in sys.modules:  # already imported (a fork of a process that had imported it)
        callback()
        return
    if callback not in _torch_arrival.callbacks:
        _torch_arrival.callbacks.append(callback)
    _torch_arrival.install()


def forget_callbacks() -> None:
    """Drop every call back: in a forked child, the parent's are not this process's business."""
    for finder in (_arrival, _torch_arrival):
        finder.callbacks = []
        finder.uninstall()


def torch_imported() -> bool:
    """Whether torch is imported (None in sys.modules blocks its import: not imported)."""
    return sys.modules.get("torch") is not None
