"""What the capture and its sources put in torch's place while armed, and put back.

Each hook into torch is the same three steps: make the wrapper of torch's
function once (``functools.wraps`` is most of arming's cost, and arming runs in
every watched test), put it in place, and, disarming, put torch's back only
where the wrapper is still there: whoever put their own in after us (a
user's patch, a test's ``monkeypatch``) keeps theirs.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

_ABSENT = object()  # the owner's own __dict__ held nothing under the name (a class's method)


class Patches:
    """The wrappers in place now, and the one made for each original."""

    def __init__(self) -> None:
        # (owner, name, what the owner's own __dict__ held before, ours), in the order put in
        self._in_place: list[tuple[Any, str, Any, Any]] = []
        # by owner and name (owners live as long as torch): (the original, ours made of it)
        self._made: dict[tuple[int, str], tuple[Any, Any]] = {}

    def wrap(self, owner: Any, name: str, make: Callable[[Any], Any],
             original: Any = None) -> Optional[Any]:
        """Put ``make(original)`` in place as ``owner``'s own ``name`` and return it (None where
        there is nothing to wrap). ``original``: what is wrapped, by default what ``owner``'s own
        ``__dict__`` holds (a class's ``staticmethod`` itself, not its function). The wrapper is
        made once per owner, name and original."""
        before = vars(owner).get(name, _ABSENT)
        if original is None:
            original = None if before is _ABSENT else before
        if original is None:
            return None
        made = self._made.get((id(owner), name))
        if made is None or made[0] is not original:
            made = self._made[(id(owner), name)] = (original, make(original))
        setattr(owner, name, made[1])
        self._in_place.append((owner, name, before, made[1]))
        return made[1]

    def is_ours(self, value: Any) -> bool:
        """Whether ``value`` is a wrapper made here (already in place: not to be wrapped again)."""
        return any(ours is value for _, ours in self._made.values())

    def undo(self) -> None:
        """Put back what each wrapper replaced, where the wrapper is still in place."""
        while self._in_place:
            owner, name, before, ours = self._in_place.pop()
            if vars(owner).get(name) is not ours:
                continue
            if before is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, before)
