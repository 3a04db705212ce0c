"""The code dynamo is compiling at this moment, read from its own frame on the stack.

A health signal (a cache miss) comes from deep inside a compile; the user's
code on the stack is the call that brought the compile, not the function
compiled, whose frame dynamo has not started yet. dynamo's
``torch._dynamo.convert_frame._compile(code, ...)`` holds that function's code
object as its first argument in every torch from 2.4 to 2.15 (read in their
sources). Outside a frame compile (a backward graph compiled lazily, in
``loss.backward()``) there is none.
"""

from __future__ import annotations

import os
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ..events import CodeLocation

_CONVERT_FRAME = os.path.join("_dynamo", "convert_frame.py")


def compiling_code(frame: Optional[FrameType]) -> Optional[CodeLocation]:
    """The function whose frame dynamo is compiling, as its first line, found from ``frame`` outwards; None outside a compile."""
    compiling = compile_frame(frame)
    compiled = None if compiling is None else compiling.f_locals.get("code")
    if not isinstance(compiled, CodeType):
        return None
    from ..events import CodeLocation

    return CodeLocation(compiled.co_filename, compiled.co_firstlineno, compiled.co_name)


def compile_frame(frame: Optional[FrameType]) -> Optional[FrameType]:
    """dynamo's ``_compile`` frame, found from ``frame`` outwards (its locals are its arguments); None outside a compile."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith(_CONVERT_FRAME):
            return frame
        frame = frame.f_back
    return None
