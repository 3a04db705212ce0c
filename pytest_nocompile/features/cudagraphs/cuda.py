"""Whether this process can record CUDA graphs: torch's word on its GPU, asked only when a test
needs it."""

from __future__ import annotations

from typing import Optional


def why_no_cuda_graphs() -> Optional[str]:
    """Why CUDA graphs cannot be recorded here (e.g. ``torch.cuda.is_available() is False``), or
    None when they can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    try:
        available = torch.cuda.is_available()
    except Exception as error:  # a broken driver says so here
        return f"torch.cuda.is_available() raised {type(error).__name__}"
    return None if available else "torch.cuda.is_available() is False"
