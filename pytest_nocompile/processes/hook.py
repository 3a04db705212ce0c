"""The entry of the start-up files installed beside the package (``pytest-nocompile.pth``,
``pytest-nocompile.start``), at the path they name: the child start-up feature's
(:mod:`..features.child_startup.hook`).

Here, not in the feature: an environment keeps the copies of those files made when the package
was installed (an editable install too), so the path they name stays. Stdlib only, as the feature's.
"""

from ..features.child_startup.hook import (
    ran as ran,
    start as start,
    start_from_pth as start_from_pth,
)
