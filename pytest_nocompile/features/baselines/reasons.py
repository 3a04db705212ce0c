"""Why a test compiled more than once: its call phase's recompiles and graph breaks as
stable reasons. Pure code.

A reason is one line of text that a baseline keeps and compares, e.g.::

    recompile scale (test_step.py): python float n
    recompile Adam.step (torch/optim/adam.py): deallocated object self
    recompile Sequential.forward (torch/nn/modules/container.py): requires_grad input
    graph break in with_print (test_step.py): Failed to trace builtin operator [GB0059]

It names the code (its qualified name and file, not its line: a line moved in
the file leaves the reason as it was) and the class and subject of the guard
that failed (:mod:`...judge.guard_classes`: not the value in the guard's text), or a
graph break's kind (torch's graph-break id where the torch gives one, from
2.9; else its first reason line, paths and addresses taken out). Reasons are
worked out from a result's details (JSON-able events), so a run's controller
does it at the end, for the tests a baseline reads: no test pays for it.
"""

from __future__ import annotations

import ast
import os
import re
from functools import lru_cache
from typing import Any, Iterable, Iterator, Mapping, Optional

from ...judge.guard_classes import classify
from ...vocabulary.events import display_path
from ...vocabulary.module_names import module_from_dict
from ...vocabulary.resume_names import resume_point

_PACKAGES = re.compile(r"^.*?[/\\](?:site|dist)-packages[/\\]")
# a CodeLocation as text
_USER_FRAME = re.compile(r"^(?P<path>.+?):\d+ in (?P<function>[^:]+?)(?::|$)")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\w.~-]*[/\\])+(?P<name>[\w.-]+)")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b|\b\d{6,}\b")


def stable_path(filename: str) -> str:
    """A file as a baseline names it on any machine: inside site-packages from the package on
    (``torch/optim/adam.py``), else relative to the working directory where inside it, else
    as given."""
    found = _PACKAGES.match(filename)
    return (filename[found.end():] if found is not None
            else display_path(filename)).replace(os.sep, "/")


def code_name(function: str, filename: str, line: int) -> str:
    """The compiled code as a baseline names it: ``Adam.step``, ``outer.<locals>.inner``, or for the
    code dynamo runs after a graph break ``train_step (resumed)`` (its name carries a line number,
    which this leaves out)."""
    point = resume_point(function)
    if point is not None:
        return f"{point.function} (resumed)"
    return _qualified_names(filename).get((function, line), function)


@lru_cache(maxsize=256)
def _qualified_names(filename: str) -> dict[tuple[str, int], str]:
    """``{(name, first line): qualified name}`` of a source file's
    functions (a code object's first line is its first decorator's);
    empty where the file cannot be read or parsed."""
    try:
        with open(filename, encoding="utf-8") as source:
            tree = ast.parse(source.read(), filename)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return {}
    names: dict[tuple[str, int], str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualified = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    for first in {child.lineno,
                                  *(decorator.lineno for decorator in child.decorator_list)}:
                        names.setdefault((child.name, first), qualified)
                visit(child, (f"{qualified}.<locals>." if not isinstance(child, ast.ClassDef)
                              else f"{qualified}."))
            else:
                visit(child, prefix)

    visit(tree, "")
    return names


def recompile_reasons(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The reasons of one recompile event (as a result's details hold it), each with the
    failed guard it came from.

    A module's method is named by its class and file
    (``Sequential.forward (torch/nn/modules/container.py)``), not by dynamo's
    wrapper, and its guards by the user's names for its arguments.
    """
    module = module_from_dict(event.get("module"))
    if module is not None:
        where = f"{module.name} ({stable_path(module.filename)})"
    else:
        where = (f"{code_name(event['function'], event['filename'], event['line'])} "
                 f"({stable_path(event['filename'])})")
    for reason in event.get("reasons") or ({"guard": ""},):
        guard = reason.get("named_guard") or reason.get("guard") or ""
        yield f"recompile {where}: {classify(guard).label if guard else 'no reason given'}", reason


def graph_break_reason(event: dict[str, Any]) -> str:
    """The reason of one graph-break event (as a result's details hold it)."""
    place = stable_path(event["filename"])
    user = _USER_FRAME.match(event.get("user_code") or "")
    # The user's frame names the function where it is the graph break's own
    # file (it nearly always is).
    where = (f"{user['function']} ({place})" if user and stable_path(user["path"]) == place
             else place)
    return (f"graph break in {where}: "
            f"{graph_break_kind(event.get('reason') or '', event.get('graph_break_id'))}")


def graph_break_kind(reason: str, graph_break_id: Optional[str]) -> str:
    """A graph break's kind: its first reason line, paths shortened to their file name and addresses
    and long numbers taken out, then torch's id (``[GB0059]``) where it gave one."""
    text = _ADDRESS.sub("N", _PATH.sub(lambda found: found["name"], reason.strip()))
    return f"{text} [{graph_break_id}]" if graph_break_id else text


def call_reasons(details: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """The sorted, distinct reasons of a result's call-phase recompiles and graph breaks
    (what its counts count)."""
    return sorted({reason for reason, _, _ in reasons_with_events(details)})


def reasons_with_events(
    details: Mapping[str, list[dict[str, Any]]],
) -> Iterable[tuple[str, dict[str, Any], Optional[dict[str, Any]]]]:
    """Each call-phase reason with the event it came from and, for a recompile, the failed guard it
    names (None for a graph break)."""
    for event in details.get("recompile_events", ()):
        if event.get("phase") == "call":
            for reason, guard in recompile_reasons(event):
                yield reason, event, guard
    for event in details.get("graph_break_events", ()):
        if event.get("phase") == "call":
            yield graph_break_reason(event), event, None
