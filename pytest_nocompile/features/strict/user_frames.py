"""A strict-mode failure as users read it: dynamo's ``RecompileError`` with a traceback of their own
frames.

Strict mode (:func:`~pytest_nocompile.observe.dynamo_state.raising_on_recompile`) makes
dynamo raise at the call that recompiled. The raise happens deep inside
dynamo: under ``--tb=long`` some 100 lines of the failure were torch's own
source (``eval_frame``, four ``convert_frame`` frames, ``guards``) around the
two lines that matter, the test's call and the user's function. The
traceback keeps only frames of user code (as :mod:`~pytest_nocompile.observe.user_code` tells
them apart), and the error gets a note saying how many were left out;
``--fulltrace`` keeps them all.
"""

from __future__ import annotations

from types import TracebackType
from typing import Optional

from ...observe.dynamo_state import is_recompile_error
from ...observe.user_code import is_user_file


def cut_to_user_frames(error: BaseException, fulltrace: bool) -> None:
    """Drop the frames of torch (and other libraries) from a ``RecompileError``'s traceback; any
    other error is left as is."""
    if fulltrace or not is_recompile_error(error):
        return
    kept: list[TracebackType] = []
    hidden = 0  # frames below the first user frame: those pytest would have shown
    entry: Optional[TracebackType] = error.__traceback__
    while entry is not None:
        if is_user_file(entry.tb_frame.f_code.co_filename):
            kept.append(entry)
        elif kept:
            hidden += 1
        entry = entry.tb_next
    if not kept or not hidden:
        return
    for outer, inner in zip(kept, kept[1:]):
        outer.tb_next = inner
    kept[-1].tb_next = None
    error.__traceback__ = kept[0]
    if hasattr(error, "add_note"):  # Python >= 3.11; pytest prints notes under the error
        error.add_note(f"pytest-nocompile: {hidden} frames of torch and other libraries left out "
                       "of this traceback; --fulltrace shows them")
