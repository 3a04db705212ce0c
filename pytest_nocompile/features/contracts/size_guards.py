"""Which tensor dims a recompile specialised, and why: the user's code, a dim compiled static, or
dynamo's 0/1 rule. Pure code.

A recompile's reasons are the failed guards of every cache entry of the frame,
the newest first. Those on a tensor's size (:mod:`.guard_classes`: ``size``,
``size 0/1``, ``size compared``) say what happened to the dim:

- **the user's code** specialised it: a guard comparing the size with a
  constant, ``x.size()[0] != 3  # if x.shape[0] == 3:``, made where the
  code branched on the size (torch names that line in the guard's comment
  from 2.6; torch 2.4 writes ``Ne(L['x'].size()[0], 3)`` and names no line);
- **a static dim**: ``tensor 'x' size mismatch at index 0. expected 4,
  actual 8``: the entry was compiled for one size. That is automatic
  dynamic's first compile (no ``dynamic=``, no ``mark_dynamic``), or, under
  ``dynamic=True``, code that used the size as a Python int
  (``range(x.shape[0])``), which dynamo cannot keep symbolic;
- **dynamo's own 0/1 specialisation**: ``2 <= x.size()[0]``, which torch
  comments "the guard itself is not due user code but due to 0/1
  specialization in the framework", and a mismatch from or to size 0 or 1
  (the entries that rule made). Every torch recorded (2.4, 2.6, 2.11,
  2.13, 2.14: tests/data/torch-*-dynamic_sizes.txt) writes these forms;
  torch 2.4 adds no such comment (it names a line of its own), and there the
  form alone decides. A user's own ``if
  x.shape[0] >= 2`` guards the same way and is taken for dynamo's: torch
  attributes it to the framework too;
- **a stride at a size 0 or 1**, where the caller knows the call's size (a
  sweep): dynamo's own 0/1 specialisation too. A dynamic tensor's strides
  are guarded as its sizes give them, ``idx.stride()[0] == idx.size()[1]``
  (torch 2.13, a ``(batch, seq)`` input), but a contiguous ``(3, 0)``
  tensor has strides ``(1, 1)``: torch counts a size 0 as 1 there, and the
  guard fails at seq 0 (torch names no source for it: "unknown source ...
  please file a bug"). The dim is the size the guard names. At another
  size, or an unknown one, a stride guard is about the tensor's layout (a
  transposed input), not a size, and is no size guard here.

One recompile may carry several of these for one dim (one per cache entry);
the strongest says why it recompiled: the user's code, then a static dim,
then dynamo's rule.

Arguments are matched by name as dynamo names the guard's tensor: ``x``
(``L['x']`` up to torch 2.6), or ``kwargs['x']`` in a function taking
``**kwargs``; for a module compiled whole, by the name its method gives it
where dynamo's wrapper named it ``args[0]`` (:mod:`.module_names`). Any
other tensor dynamo names by position only (``a[0]`` in a ``*args``
function) or inside another object (``self.weight``, ``batch['x']``)
matches no argument name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, Optional

from ...judge.guard_classes import SIZE_COMPARED_FIX, SIZE_FIX, ZERO_ONE_FIX, classify, plain_names

if TYPE_CHECKING:
    from ...vocabulary.events import CodeLocation, GuardFailure, RecompileEvent

CODE = "code"  # the user's code compared the size with a constant
STATIC = "static"  # the entry was compiled for one size
ZERO_ONE = "0/1"  # dynamo's own specialisation of sizes 0 and 1
_STRENGTH = {CODE: 3, STATIC: 2, ZERO_ONE: 1}
_CLASS_CAUSES = {"size compared": CODE, "size": STATIC, "size 0/1": ZERO_ONE}
_STRIDE_CLASS = "stride"  # dynamo's own at a size 0 or 1 (see above); else not a size's guard
_SIZES_DYNAMO_SPECIALISES = (0, 1)

_ACTUAL = re.compile(r"size mismatch at index \d+\. expected \d+, actual (?P<size>\d+)")
_NOT_EQUAL = re.compile(r"\.size\(\)\[\d+\] != (?P<after>\d+)$|^(?P<before>\d+) != |"
                        r"^Ne\(.*, (?P<ne>\d+)\)$")
_BOUND = re.compile(r"^2 <= |\.size\(\)\[\d+\] >= 2$")
# How torch says a 0/1 guard is its own; a size guard's comment otherwise ends in the
# place in torch that made it.
_FRAMEWORK_NOTE = re.compile(r"not due user code|0/1 specialization in the framework")
_MADE_IN_TORCH = re.compile(r"\([^()]*:\d+ in \S+\)$")
_KWARGS = re.compile(r"^kwargs\['(?P<name>[^']+)'\]$")

# The usual fix of each cause: guard_classes' rows, the one table of fixes.
_FIXES = {CODE: SIZE_COMPARED_FIX, STATIC: SIZE_FIX, ZERO_ONE: ZERO_ONE_FIX}


@dataclass(frozen=True)
class SizeGuard:
    """A failed guard on one tensor dim: the tensor as dynamo names it (``x``), the dim,
    why, and the size the call had where the guard says (None: it does not; a failed
    ``2 <= x.size()[0]`` means 0 or 1)."""

    tensor: str
    dim: int
    cause: str  # CODE, STATIC or ZERO_ONE
    reason: GuardFailure
    size: Optional[int] = None


def size_guard(reason: GuardFailure, call_size: Optional[int] = None) -> Optional[SizeGuard]:
    """The failed guard as a guard on a tensor dim, or None when it guards something else.

    ``call_size``: the size the call had, where the caller chose it (a sweep); at 0 or 1 a failed
    stride guard is dynamo's own 0/1 specialisation of the size it names.
    """
    # a module's arguments by the user's names (module_names)
    text = (reason.named or reason.guard).strip()
    classified = classify(text)
    if classified.name == _STRIDE_CLASS:
        return _stride_guard(classified.tensor, classified.dim, text, reason, call_size)
    cause = _CLASS_CAUSES.get(classified.name)
    if cause is None or classified.tensor is None or classified.dim is None:
        return None
    source = reason.source or ""
    if (cause == ZERO_ONE and _BOUND.search(text) and _MADE_IN_TORCH.search(source)
            and not _FRAMEWORK_NOTE.search(source)):
        cause = CODE  # a bound the user's code set, where torch says so
    return SizeGuard(classified.tensor, classified.dim, cause, reason, _size_in(text))


def _stride_guard(tensor: Optional[str], stride_dim: Optional[int], text: str, reason: GuardFailure,
                  call_size: Optional[int]) -> Optional[SizeGuard]:
    """A failed stride guard at a size 0 or 1 as dynamo's own specialisation of the dim whose size
    it names (``idx.stride()[0] == idx.size()[1]``: dim 1; the stride's own dim where it names
    none)."""
    if tensor is None or stride_dim is None or call_size not in _SIZES_DYNAMO_SPECIALISES:
        return None
    size_of = rf"(?<![\w.]){re.escape(tensor)}\.size\(\)\[(?P<dim>\d+)\]"  # not self.idx's
    named = re.search(size_of, plain_names(text))
    dim = int(named["dim"]) if named is not None else stride_dim
    return SizeGuard(tensor, dim, ZERO_ONE, reason, call_size)


def _size_in(guard: str) -> Optional[int]:
    found = _ACTUAL.search(guard)
    if found is not None:
        return int(found["size"])
    found = _NOT_EQUAL.search(guard)
    if found is not None:
        return int(found["after"] or found["before"] or found["ne"])
    return None


@dataclass(frozen=True)
class DimRecompile:
    """One recompile as it concerns one tensor dim: why it recompiled there, the size, and
    the guard that says so."""

    event: RecompileEvent
    tensor: str  # as dynamo names it
    dim: int
    cause: str
    reason: GuardFailure
    size: Optional[int]

    @property
    def by_dynamo(self) -> bool:
        """Dynamo's own 0/1 specialisation, not the user's code nor a static compile."""
        return self.cause == ZERO_ONE

    @property
    def where(self) -> Optional[CodeLocation]:
        """The user's line the guard names (the branch on the size), where torch names one."""
        return self.reason.location if self.cause == CODE else None

    def describe(self, name: Optional[str] = None) -> str:
        """``x dim 0 at size 3: your code specialised it (guard: x.size()[0] != 3)``; ``name``: the
        argument, if not the tensor's."""
        size = (f"size {self.size}" if self.size is not None
                else "size 0 or 1" if self.cause == ZERO_ONE else "a new size")
        why = {CODE: "your code specialised it", STATIC: "it was compiled static",
               ZERO_ONE: "dynamo's own 0/1 specialisation"}[self.cause]
        guard = str(self.reason).splitlines()[0]
        return f"{name or self.tensor} dim {self.dim} at {size}: {why} (guard failed: {guard})"

    def lines(self, name: Optional[str] = None, where: str = "", indent: str = "    ") -> list[str]:
        """The description, then where: the branch (the user's line in the guard), the call that
        recompiled, the usual fix.

        ``where``: the process, as the first line's prefix (``rank 1 (pid 42): ``) where
        it is not the test's own.
        """
        found = [f"{indent}{where}{self.event.code_name} recompiled: {self.describe(name)}"]
        if self.where is not None:
            found.append(f"{indent}    at: {self.where}")
        if self.event.user_code is not None:
            found.append(f"{indent}    triggered by: {self.event.user_code}")
        found.append(f"{indent}    usual fix: "
                     f"{_FIXES[self.cause].format(tensor=self.tensor, dim=self.dim)}")
        return found


def dims_recompiled(event: RecompileEvent, call_size: Optional[int] = None) -> list[DimRecompile]:
    """Each tensor dim the recompile's size guards name, with the strongest cause among them, in the
    order first named.

    ``call_size``: the size the call had, where the caller chose it (:func:`size_guard`).
    """
    found: dict[tuple[str, int], SizeGuard] = {}
    sizes: dict[tuple[str, int], int] = {}
    for reason in event.reasons:
        guard = size_guard(reason, call_size)
        if guard is None:
            continue
        key = (guard.tensor, guard.dim)
        if guard.size is not None:
            sizes.setdefault(key, guard.size)  # every entry's guard saw the same call
        if key not in found or _STRENGTH[guard.cause] > _STRENGTH[found[key].cause]:
            found[key] = guard
    return [DimRecompile(event, tensor, dim, guard.cause, guard.reason, sizes.get((tensor, dim)))
            for (tensor, dim), guard in found.items()]


def argument_of(tensor: str, names: Iterable[str]) -> Optional[str]:
    """The argument name among ``names`` that dynamo's name of a tensor means (``x``,
    ``kwargs['x']``), else None."""
    keyword = _KWARGS.match(tensor)
    name = keyword["name"] if keyword else tensor
    return name if name in names else None


def contract_breaks(event: RecompileEvent,
                    dims: Mapping[str, tuple[int, ...]]) -> list[tuple[str, DimRecompile]]:
    """The recompile's dims among ``dims`` (argument name: its dims), each
    with the argument it is."""
    return [(argument, dim_recompile) for dim_recompile in dims_recompiled(event)
            if ((argument := argument_of(dim_recompile.tensor, dims)) is not None
                and dim_recompile.dim in dims[argument])]
