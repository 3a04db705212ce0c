"""The block assertions' first import path, ``pytest_nocompile.assertions``, kept for
code that imports from it.

Their home is :mod:`.watching.assertions`; every name is also on ``pytest_nocompile``.
"""

from .watching.assertions import *  # noqa: F403
from .watching.assertions import __all__ as __all__
