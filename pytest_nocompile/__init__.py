"""pytest-nocompile: make torch.compile recompiles a test failure.

Load it with ``pytest -p nocompile``; budget a test with
``@pytest.mark.max_recompiles(N)``. The names below are the public API, for
annotating fixtures and reading recorded recompiles.
"""

from .assertions import AssertMaxRecompiles, RecompileBudgetExceeded
from .budget import RecompileBudget
from .events import CodeLocation, GuardFailure, RecompileEvent, RecompileLimitHit, parse_recompile_message
from .record import RecompileLog

__version__ = "0.1.0"

__all__ = [
    "AssertMaxRecompiles",
    "CodeLocation",
    "GuardFailure",
    "RecompileBudget",
    "RecompileBudgetExceeded",
    "RecompileEvent",
    "RecompileLimitHit",
    "RecompileLog",
    "__version__",
    "parse_recompile_message",
]
