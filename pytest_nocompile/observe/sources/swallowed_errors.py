"""A source of health events: each compile error dynamo swallowed (``suppress_errors``), running the
code eager.

With ``torch._dynamo.config.suppress_errors`` (or ``TORCHDYNAMO_SUPPRESS_ERRORS=1``)
a frame whose compile raises (a backend's error, an internal dynamo error)
runs uncompiled and the call succeeds. torch 2.4 to 2.15 log that in one
place, where the error is suppressed (``ConvertFrame.__call__`` in
``torch/_dynamo/convert_frame.py``): one WARNING record on the
``torch._dynamo.convert_frame`` logger whose message starts ``WON'T CONVERT
<function> <file> line <N>``, with the exception as ``exc_info``; ``_compile``
has set the exception's ``compile_id``. A graph break that makes dynamo skip
a frame is logged there too, at INFO: a graph break, not an error, not
counted here.

Why the log record: it is seen as it happens. The other traces of a
swallowed error (``counters["frames"]``, the ``fail_reason`` of
``torch._dynamo.utils.get_compilation_metrics()``) are cleared by user code
and by torch's own ``TestCase``. The record reaches us when the logger's
level lets a warning through, which torch's default (and ``TORCH_LOGS``
unless it silences dynamo) does.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Optional

COMPILE_ERROR = "compile_error"  # the health signal's name
_WONT_CONVERT = re.compile(r"^WON'T CONVERT (?P<function>\S+) (?P<filename>.+?) line (?P<line>\d+)")


def compile_error_reason(message: str, error: Optional[BaseException]) -> Optional[str]:
    """What a report says of a swallowed error: ``f (file.py:3): RuntimeError: boom``;
    None for another record.

    The exception's first line, and the next one when the first only announces it (a backend's
    ``backend='inductor' raised:`` is followed by the error it raised).
    """
    header = _WONT_CONVERT.match(message)
    if header is None:
        return None
    from ...vocabulary.events import display_path

    where = f"{header['function']} ({display_path(header['filename'])}:{header['line']})"
    if error is None:
        return where
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    summary = lines[0] if lines else ""
    if summary.endswith(":") and len(lines) > 1:
        summary = f"{summary} {lines[1]}"
    return (f"{where}: {type(error).__name__}: {summary}" if summary
            else f"{where}: {type(error).__name__}")


class SwallowedErrors:
    """One ``compile_error`` health event per compile error dynamo swallowed, read from
    ``convert_frame``'s warnings."""

    def __init__(self, emit: Callable[..., None]) -> None:
        self._emit = emit  # DynamoLogs.emit_health

    def read(self, record: logging.LogRecord, message: str) -> bool:
        """Emit the record's swallowed error, if it tells of one (``message``: the record's,
        formatted); whether it did."""
        try:
            error = record.exc_info[1] if record.exc_info else None
            reason = compile_error_reason(message, error)
            if reason is None:
                return False  # another warning of convert_frame
            compile_id = getattr(error, "compile_id", None)
            self._emit(COMPILE_ERROR, 1, reason,
                       compile_id=None if compile_id is None else str(compile_id))
        # a record we cannot read is a signal we lack, not an error in the user's code
        except Exception:
            return False
        return True
