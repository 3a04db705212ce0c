"""A module's method that dynamo compiled, named as the user knows it, and its guards in the user's
names. Pure code.

``torch.compile(nn.Sequential(...))`` (and any module whose ``forward`` is
torch's own, such as an FSDP2-sharded block of torch's) makes dynamo compile
a wrapper of its own, ``inner`` in ``torch/_dynamo/external_utils.py``
(``wrap_inline``, every torch from 2.4 to 2.15), that calls the module as
``fn(*args, **kwargs)``. dynamo then names the code ``inner`` and the
module's arguments ``args[0]``, ``kwargs['mask']`` and the module ``fn``
(``L['args'][0]``, ``L['kwargs']['mask']``, ``L['fn']`` up to torch 2.6).
A module of the user's own is compiled through its ``forward`` itself, whose
arguments dynamo names as the user does. Either way the user knows the code
as ``Sequential.forward``, compiled at a line of their own, and the
arguments by the forward's parameter names: :class:`CompiledModule` says so,
and :meth:`CompiledModule.named_guard` writes a guard in those names.

:mod:`.observe.compiled_modules` finds the module in the frame dynamo
compiles; nothing here imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .display_paths import display_path

# A source dynamo's wrapper names, as torch up to 2.6 (L['args'][0]) and later (args[0]) writes it.
# Not a key or attribute of something else (x.args, d['fn']);
# inside a quoted tensor name ('args[0]') it is one.
_BARE = r"(?<![\w.])(?<!\[')"
# A name dynamo's wrapper gives, in one pass (so that renames come in the order they appear): a
# positional argument, a keyword argument or the module itself.
_WRAPPER_NAME = re.compile(
    rf"""(?:\bL\['args'\]|{_BARE}args)\[(?P<index>\d+)\]"""
    rf"""|(?:\bL\['kwargs'\]|{_BARE}kwargs)\[(?P<quote>['"])(?P<keyword>\w+)(?P=quote)\]"""
    rf"""|(?P<module>\bL\['fn'\]|{_BARE}fn(?![\w']))""")
_SELF = "self"
# What a child process's line may carry (it may be written by anything on PATH): a path's length, a
# method's parameters.
_MAX_TEXT = 4096
_MAX_NAMES = 1000


@dataclass(frozen=True)
class CompiledModule:
    """An ``nn.Module`` whose method dynamo compiled (its ``forward``, or a method compiled on its
    own).

    ``class_name`` is the module's class as the user wrote it (FSDP2's
    ``FSDP<Name>`` subclass and ``OptimizedModule`` taken off); ``filename``
    and ``line`` are the method's first line; ``positional`` and ``keywords``
    its parameters after ``self`` (positional ones, then keyword-only ones);
    ``wrapped`` whether dynamo compiled its own wrapper around the module,
    whose guards name the arguments ``args[i]`` and the module ``fn``;
    ``compiled_at`` the ``(file, line)`` of the user's call of
    ``torch.compile`` or ``module.compile()``, where the plugin saw it.
    """

    class_name: str
    method: str
    filename: str
    line: int
    positional: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    wrapped: bool = False
    compiled_at: Optional[tuple[str, int]] = None

    @property
    def name(self) -> str:
        """``Sequential.forward``."""
        return method_name(self.class_name, self.method)

    @property
    def place(self) -> str:
        """``Sequential.forward (compiled at test_x.py:18)``; where the plugin saw no compile, the
        method's own place."""
        if self.compiled_at is None:
            return f"{self.name} ({display_path(self.filename)}:{self.line})"
        return (f"{self.name} (compiled at {display_path(self.compiled_at[0])}:"
                f"{self.compiled_at[1]})")

    def named_guard(self, guard: str) -> Optional[str]:
        """``guard`` in the user's names (``tensor 'args[0]' ...`` as ``tensor 'input' ...``);
        None where they are torch's."""
        named = self._renamed(guard, lambda torch_name, user_name: user_name)
        return None if named == guard else named

    def renames(self, guard: str) -> list[tuple[str, str]]:
        """The ``(torch's name, the user's name)`` pairs :meth:`named_guard` replaces in ``guard``,
        each once, in order."""
        found: list[tuple[str, str]] = []

        def keep(torch_name: str, user_name: str) -> str:
            if (torch_name, user_name) not in found:
                found.append((torch_name, user_name))
            return user_name

        self._renamed(guard, keep)
        return found

    def _renamed(self, guard: str, rename: Callable[[str, str], str]) -> str:
        if not self.wrapped:
            return guard

        def user_name(match: re.Match[str]) -> str:
            if match["module"]:
                return rename(match[0], _SELF)
            if match["keyword"]:
                name = match["keyword"]
                return (rename(match[0], name) if name in self.positional or name in self.keywords
                        else match[0])
            index = int(match["index"])
            return (rename(match[0], self.positional[index]) if index < len(self.positional)
                    else match[0])

        return _WRAPPER_NAME.sub(user_name, guard)

    def to_dict(self) -> dict[str, Any]:
        """As the JSON report and a child process's line hold it (:func:`module_from_dict` reads it
        back)."""
        return {"class": self.class_name, "method": self.method, "filename": self.filename,
                "line": self.line, "positional": list(self.positional),
                "keywords": list(self.keywords), "wrapped": self.wrapped,
                "compiled_at": None if self.compiled_at is None else list(self.compiled_at)}


def method_name(class_name: str, method: str) -> str:
    """How reports name a module's method: ``Sequential.forward``."""
    return f"{class_name}.{method}"


def module_from_dict(fields: Any) -> Optional[CompiledModule]:
    """A :meth:`CompiledModule.to_dict` read back; None for None.
    Raises ValueError for anything else it does not write."""
    if fields is None:
        return None
    if not isinstance(fields, dict):
        raise ValueError("not an object")
    compiled_at = fields.get("compiled_at")
    if compiled_at is not None and not (isinstance(compiled_at, list) and len(compiled_at) == 2):
        raise ValueError("'compiled_at' is not [file, line]")
    return CompiledModule(
        _text(fields.get("class"), "class"), _text(fields.get("method"), "method"),
        _text(fields.get("filename"), "filename"), _line(fields.get("line"), "line"),
        _names(fields, "positional"), _names(fields, "keywords"), fields.get("wrapped") is True,
        None if compiled_at is None else (_text(compiled_at[0], "compiled_at"),
                                          _line(compiled_at[1], "compiled_at")))


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise ValueError(f"{key!r} is not text of at most {_MAX_TEXT} characters")
    return value


def _line(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key!r} has no line number")
    return value


def _names(fields: dict[str, Any], key: str) -> tuple[str, ...]:
    value = fields.get(key, [])
    if (not isinstance(value, list) or len(value) > _MAX_NAMES
            or not all(isinstance(name, str) and len(name) <= _MAX_TEXT for name in value)):
        raise ValueError(f"{key!r} is not a list of at most {_MAX_NAMES} names")
    return tuple(value)
