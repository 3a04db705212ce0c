"""What kind of guard failed, and the usual fix: one table, read by failures, the JSON report
and baselines. Pure code.

dynamo words a guard differently from one torch to the next (``L['n'] == 2``
up to 2.6, ``n == 2`` later; ``tensor 'x' size mismatch at index 0`` or
``2 <= x.size()[0]``), so a guard is known here by its *class* (a size, a
Python float's value, an object's identity, global state, ...) and its
*subject* (the local, attribute or dim it guards), never by the values in its
text: a new float, a new size or a moved line leaves a guard's class and
subject as they were. Baselines compare those (see ``features/baselines/reasons.py``).

Each row of :data:`GUARD_CLASSES` holds the patterns that recognise its class
and, where the remedy is well known, the fix a failure names on a line of its
own. The first row whose pattern matches wins, so specific rows come first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# torch up to 2.6 names locals L['x'] and globals G['x']; later torch names them bare
# (globals still G['x']).
_SCOPED_NAME = re.compile(r"\b[LG]\['([^'\]]+)'\]")
# A tensor's size or stride in a symbolic guard: x.size()[0], x.stride()[0].
_DIM_OF = re.compile(r"^(?P<tensor>.+?)\.(?:size|stride)\(\)\[(?P<dim>\d+)\]$")
_FLOAT = re.compile(
    r"^[-+]?(?:\d+\.\d*(?:e[-+]?\d+)?|\d*\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+|inf|nan)$", re.IGNORECASE)
_INT = re.compile(r"^[-+]?\d+$")


@dataclass(frozen=True)
class GuardClass:
    """One class of guard: its name as baselines and reports write it, and the
    usual fix where one is known.

    ``fix`` may name ``{subject}``, ``{tensor}`` and ``{dim}``: the guarded
    local or attribute, and for a size its tensor and dim. ``held_fix``, where
    the remedy differs, is the fix for a subject held by something else: an
    attribute (``self.step``), an item or a global, rather than an argument.
    """

    name: str
    patterns: tuple[re.Pattern[str], ...]
    fix: Optional[str] = None
    held_fix: Optional[str] = None

    def fix_for(self, held: bool) -> Optional[str]:
        """The fix template for a subject that is an argument (``held`` False) or held elsewhere."""
        return self.held_fix if held and self.held_fix is not None else self.fix


@dataclass(frozen=True)
class ClassifiedGuard:
    """A failed guard's class, its subject (``n``, ``self.param_groups[0]['lr']``, ``x dim 0``) and
    its fix, if known; for a guard on a tensor's size or stride, the tensor (as dynamo names it,
    ``L['x']`` read as ``x``) and the dim."""

    name: str
    subject: Optional[str] = None
    fix: Optional[str] = None
    tensor: Optional[str] = None
    dim: Optional[int] = None

    @property
    def label(self) -> str:
        """``python float n``: what a baseline keeps of the guard."""
        return f"{self.name} {self.subject}" if self.subject else self.name


def _rows(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(pattern, re.DOTALL) for pattern in patterns)


ZERO_ONE_FIX = ("dynamo specialises sizes 0 and 1: keep {tensor} dim {dim} at 2 or more, or call "
                "torch._dynamo.mark_unbacked({tensor}, {dim}) before the first call")
SIZE_FIX = ("compile with dynamic=True, or call torch._dynamo.mark_dynamic({tensor}, {dim}) before "
            "the first call")
# A Python int that changes, as a training loop's step, epoch or global step. torch's docs
# ("Dealing with Recompilations": ints are constants guarded on their exact value; wrap them in
# tensors) and its config (allow_unspec_int_on_nn_module: integer attributes of an nn.Module are
# static, and "step counters" recompile). An argument is made dynamic after one recompile
# (automatic dynamic), or from the start with dynamic=True; an attribute or a global is compiled
# again for every value it takes.
INT_ARGUMENT_FIX = ("{subject} is a Python int that changes (as a step or epoch counter does): "
                    "compile with dynamic=True, or pass it as a tensor, e.g. "
                    "torch.tensor({subject}); by default dynamo makes an int argument dynamic "
                    "after one recompile")
INT_HELD_FIX = ("{subject} is a Python int that changes (as a step or epoch counter does), and "
                "dynamo compiles again for every value it reads from an attribute or global: "
                "hold it in a tensor (torch.tensor(0), then {subject} += 1 updates it in place) "
                "or pass it as an argument; for an nn.Module's int attribute, "
                "torch._dynamo.config.allow_unspec_int_on_nn_module = True makes it dynamic "
                "after one recompile")
# A flag (use_cache, a module's training mode): each value is a graph of its own, compiled once.
BOOL_FIX = ("{subject} is a Python bool flag: dynamo compiles one graph for each of its values, "
            "once each (model.train() and model.eval() are two); allow one recompile for each "
            "value the test switches to, or keep it the same within the test")
SIZE_COMPARED_FIX = ("your code branches on the size of {tensor} dim {dim}: move the branch out of "
                     "the compiled function, or compute both sides with torch ops")

# Specific rows first: the first match wins.
GUARD_CLASSES: tuple[GuardClass, ...] = (
    GuardClass("deallocated object",
               _rows(r"^Cache line invalidated because (?P<subject>.+?) got deallocated"),
               "{subject} was freed and built again (e.g. an optimizer made per step): keep one "
               "alive and reuse it"),
    GuardClass("global state",
               _rows(r"^GLOBAL_STATE changed: (?P<subject>.+?)\s*$", r"^___check_global_state\(\)",
                     r"^___check_(?P<subject>torch_function_mode_stack)\(\)"),
               "{subject} changed since the compile (no_grad, autocast, a default dtype or "
               "device): set it the same way before every call; the triggering line shows "
               "where it changed"),
    GuardClass("size 0/1",
               _rows(r"^2 <= (?P<size>.+?\.size\(\)\[\d+\])$",
                     r"^(?P<size>.+?\.size\(\)\[\d+\]) >= 2$",
                     r"^tensor '(?P<tensor>.+?)' size mismatch at index (?P<dim>\d+)\. expected "
                     r"[01], actual \d+",
                     r"^tensor '(?P<tensor>.+?)' size mismatch at index (?P<dim>\d+)\. expected "
                     r"\d+, actual [01]$"),
               ZERO_ONE_FIX),
    GuardClass("size", _rows(r"^tensor '(?P<tensor>.+?)' size mismatch at index (?P<dim>\d+)"),
               SIZE_FIX),
    # A comparison of a size with a constant: the user's code branched on it and specialised the
    # dim. torch 2.4 writes it as sympy does: Ne(L['x'].size()[0], 3).
    GuardClass("size compared",
               _rows(r"^(?P<size>[^ ]+?\.size\(\)\[\d+\]) (?:[!=]=|<=?|>=?) -?\d+$",
                     r"^-?\d+ (?:[!=]=|<=?|>=?) (?P<size>[^ ]+?\.size\(\)\[\d+\])$",
                     r"^(?:Eq|Ne|Lt|Le|Gt|Ge)\((?P<size>[^ ,]+?\.size\(\)\[\d+\]), -?\d+\)$"),
               SIZE_COMPARED_FIX),
    # A static stride's mismatch, or a stride that a dynamic-shape guard derives from sizes:
    # x.stride()[0] == x.size()[1] (it fails at a size 0: a contiguous (3, 0) tensor has strides
    # (1, 1)).
    GuardClass("stride", _rows(r"^tensor '(?P<tensor>.+?)' stride mismatch at index (?P<dim>\d+)",
                               r"^(?P<stride>[^ ]+?\.stride\(\)\[\d+\]) == ")),
    GuardClass("tensor rank", _rows(r"^tensor '(?P<subject>.+?)' rank mismatch")),
    GuardClass("dtype", _rows(r"^tensor '(?P<subject>.+?)' dtype mismatch")),
    GuardClass("device", _rows(r"^tensor '(?P<subject>.+?)' device mismatch")),
    GuardClass("requires_grad", _rows(r"^tensor '(?P<subject>.+?)' requires_grad mismatch")),
    GuardClass("dispatch keys", _rows(r"^tensor '(?P<subject>.+?)' dispatch key set mismatch")),
    GuardClass("type", _rows(r"^expected type of '(?P<subject>.+?)' to be",
                             r"^___check_type_id\((?P<subject>[^,]+),")),
    # Older torch guards a bool by the identity of True or False: a module's training flag up to
    # 2.6, any bool in 2.4, whose guard the capture types as later torch types identity guards
    # (vocabulary.events.typed_bool_ids).
    GuardClass("python bool", _rows(r"^___check_obj_id\((?P<subject>[^,]+\.training),",
                                    r"^___check_obj_id\((?P<subject>.+?), \d+\), "
                                    r"type=<class 'bool'>"),
               BOOL_FIX),
    GuardClass("object id", _rows(r"^___check_obj_id\((?P<subject>[^,]+),"),
               "{subject} is a new object at each call (a module or optimizer built per call): "
               "build it once and reuse it"),
    GuardClass("length", _rows(r"^len\((?P<subject>.+)\) == \d+$")),
    # A Python constant's value; split by the value's type below, where the fix differs.
    GuardClass("python value", _rows(r"^(?P<subject>[^ ]+) == (?P<value>.+)$")),
)
_VALUE_CLASS = GUARD_CLASSES[-1]
PYTHON_FLOAT = GuardClass("python float", (), "{subject} is a Python float that changes (a "
                          "scheduled learning rate): hold it in a tensor, e.g. torch.tensor(0.01)")
PYTHON_INT = GuardClass("python int", (), INT_ARGUMENT_FIX, INT_HELD_FIX)
PYTHON_BOOL = next(row for row in GUARD_CLASSES if row.name == "python bool")
OTHER = GuardClass("other", ())
# Every class a guard can be given, for the docs and the tests: the table's rows, the
# value's classes, and "other".
ALL_CLASSES: tuple[GuardClass, ...] = (*GUARD_CLASSES[:-1], PYTHON_FLOAT, PYTHON_INT, _VALUE_CLASS,
                                       OTHER)


def plain_names(text: str) -> str:
    """``L['self'].lr`` as later torch writes it, ``self.lr``: the same local reads
    the same on every torch."""
    return _SCOPED_NAME.sub(r"\1", text)


def classify(guard: str) -> ClassifiedGuard:
    """The class, subject and fix of a failed guard as dynamo wrote it (any torch from 2.4 on)."""
    text = plain_names(guard.strip())
    for row in GUARD_CLASSES:
        for pattern in row.patterns:
            found = pattern.search(text)
            if found is not None:
                return _classified(row, found.groupdict(), _GLOBAL.match(guard.strip()) is not None)
    return ClassifiedGuard(OTHER.name)


_GLOBAL = re.compile(r"^G\[")  # a global, as every torch names one: G['EPOCH']
_HELD = re.compile(r"[.\[]")  # an attribute or an item: self.step, state['step']


def _classified(row: GuardClass, groups: dict[str, Optional[str]],
                is_global: bool = False) -> ClassifiedGuard:
    subject, tensor, dim = groups.get("subject"), groups.get("tensor"), groups.get("dim")
    size = groups.get("size") or groups.get("stride")
    if size is not None and (parts := _DIM_OF.match(size)) is not None:
        tensor, dim = parts["tensor"], parts["dim"]
    if tensor is not None:
        subject = f"{tensor} dim {dim}" if dim is not None else tensor
    if row is _VALUE_CLASS:
        row = _value_class(groups.get("value") or "")
    held = is_global or (subject is not None and _HELD.search(subject) is not None)
    template = row.fix_for(held)
    fix = None
    if template is not None:
        fix = template.format(subject=subject or "a global setting", tensor=tensor, dim=dim)
    return ClassifiedGuard(row.name, subject, fix, tensor, int(dim) if dim is not None else None)


def _value_class(value: str) -> GuardClass:
    value = value.strip()
    if _FLOAT.match(value):
        return PYTHON_FLOAT
    if _INT.match(value):
        return PYTHON_INT
    if value in ("True", "False"):
        return PYTHON_BOOL
    return _VALUE_CLASS
