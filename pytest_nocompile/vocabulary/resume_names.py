"""dynamo's names for the code it runs after a graph break, read back as the user's function and
line.

After a graph break in ``train_step`` at line 23, dynamo runs the rest of
the function as a new code object, a *resume function*, that it names
``torch_dynamo_resume_in_train_step_at_23`` (``torch/_dynamo/resume_execution.py``,
``ContinueExecutionCache.generate``: ``f"{TORCH_DYNAMO_RESUME_IN_PREFIX}_{co_name}_at_{lineno}"``,
every torch from 2.2 to 2.15; ``lineno`` is the line of the instruction that
broke the graph, also the resume function's ``co_firstlineno``). Recompile
messages, the recompile-limit warning and user stack traces name that code
object. A resume function of a resume function is generated from the
original code object, so it carries the original name; should a torch ever
nest the names (``..._resume_in_torch_dynamo_resume_in_f_at_5_at_9``), the
innermost function name and the outermost (latest) line are taken.

A name that does not have this shape is not a resume function's, and is
shown as torch wrote it: nothing here raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

RESUME_PREFIX = "torch_dynamo_resume_in_"
# Greedy: the last "_at_<digits>" ends the name, whatever "_at_" the function's own name holds.
_RESUME_NAME = re.compile(r"^torch_dynamo_resume_in_(?P<function>.+)_at_(?P<line>\d+)$")


@dataclass(frozen=True)
class ResumePoint:
    """The user's function a resume function continues, and the line of the graph break it resumes
    after."""

    function: str
    line: int


def resume_point(code_name: str) -> Optional[ResumePoint]:
    """The function and graph-break line a resume function's name encodes;
    None for any other name."""
    if not code_name.startswith(RESUME_PREFIX):
        return None
    match = _RESUME_NAME.match(code_name)
    if match is None:
        return None
    function = match["function"]
    inner = resume_point(function)
    return ResumePoint(inner.function if inner else function, int(match["line"]))


def user_function(code_name: str) -> str:
    """The function users wrote: a resume function's original name, any other name as is."""
    point = resume_point(code_name)
    return point.function if point else code_name

