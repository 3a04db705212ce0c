"""dynamo's state, as the plugin reads and resets it: whether torch is usable, compiled frames,
reset, strict mode, rank.

With :mod:`.capture`, the only place that touches torch internals.
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager
from functools import cache
from typing import Iterator

MIN_TORCH = (2, 4)


@cache
def torch_problem() -> str | None:
    """Why torch cannot be used by the plugin, or None when it can; imports torch, never dynamo."""
    try:
        with torch_import_warnings_silenced():
            import torch
    except Exception as error:  # ImportError, or a broken install raising anything
        return f"torch cannot be imported ({type(error).__name__}: {error})"
    major, _, rest = torch.__version__.partition(".")
    minor = "".join(ch for ch in rest.partition(".")[0] if ch.isdigit())
    if (int(major), int(minor or 0)) < MIN_TORCH:
        return (f"torch {torch.__version__} is too old; "
                f"pytest-nocompile needs torch>={'.'.join(map(str, MIN_TORCH))}")
    return None


@contextmanager
def torch_import_warnings_silenced() -> Iterator[None]:
    """Hide warnings raised while the plugin itself imports or resets torch internals.

    torch 2.11's reset() imports inductor modules whose import emits a
    DeprecationWarning (torch.jit.script_method); under ``-W error`` that would
    fail the user's test for work the plugin did, not the test.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def compiled_anything() -> bool:
    """Whether dynamo compiled a frame since its last reset (or ever);
    never imports torch or dynamo.

    Read from dynamo's frame counters, which only ``torch._dynamo.reset()``
    clears; where a torch lacks them, assume it did.
    """
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    if convert_frame is None:
        return False
    frames = getattr(convert_frame, "FRAME_COUNTER", None)
    attempts = getattr(convert_frame, "FRAME_COMPILE_COUNTER", None)
    if frames is None and attempts is None:
        return True
    return bool(frames) or bool(attempts)


def reset_dynamo() -> None:
    """Clear dynamo's code caches and automatic-dynamic state (about 0.2 ms).

    Skipped when dynamo compiled nothing since its last reset: the caches are
    still empty, and suites of tests that never compile pay nothing (torch
    2.11's reset() imports inductor, seconds, the first time).
    """
    if not compiled_anything():
        return
    with torch_import_warnings_silenced():
        import torch._dynamo

        torch._dynamo.reset()


@contextmanager
def raising_on_recompile() -> Iterator[None]:
    """Make dynamo raise RecompileError at the recompiling call (first compiles still pass)."""
    import torch._dynamo.config

    with torch._dynamo.config.patch(error_on_recompile=True):
        yield


def is_recompile_error(error: BaseException) -> bool:
    """Whether ``error`` is the ``RecompileError`` strict mode makes dynamo raise (told by name:
    never imports torch)."""
    kind = type(error)
    return kind.__name__ == "RecompileError" and kind.__module__.startswith("torch._dynamo")


def process_rank() -> int | None:
    """This process's rank: ``torch.distributed``'s once initialised, else ``RANK``, else
    ``LOCAL_RANK``, else None.

    Never imports torch.distributed: a process that has not imported it has no process group.
    """
    return _from_group("get_rank", "RANK", "LOCAL_RANK")


def process_world_size() -> int | None:
    """How many ranks this process's job has: ``torch.distributed``'s world size once initialised,
    else ``WORLD_SIZE``, else None."""
    return _from_group("get_world_size", "WORLD_SIZE")


def _from_group(ask: str, *variables: str) -> int | None:
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None:
        try:
            if distributed.is_available() and distributed.is_initialized():
                return int(getattr(distributed, ask)())
        except Exception:  # a half-torn-down group: the environment still says
            pass
    for variable in variables:
        value = os.environ.get(variable, "")
        if value.isdigit():
            return int(value)
    return None


def compile_stance() -> str | None:
    """torch.compiler's stance now (``set_stance``, torch >= 2.6), when not the default;
    never imports dynamo."""
    stance = getattr(getattr(sys.modules.get("torch._dynamo.eval_frame"), "_stance", None),
                     "stance", None)
    return stance if isinstance(stance, str) and stance != "default" else None
