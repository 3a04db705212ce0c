"""The block assertions' first import path, ``pytest_nocompile.assertions``, kept for
code that imports from it.

Their home is :mod:`.features.block_assertions.assertions`; every name is also on
``pytest_nocompile``.
"""

from .features.block_assertions.assertions import *  # noqa: F403
from .features.block_assertions.assertions import __all__ as __all__
