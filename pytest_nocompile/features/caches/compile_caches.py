"""Where torch keeps its compile caches on disk, and the environment that makes
them private to one folder.

Verified against torch 2.13's sources (``torch/_inductor/runtime/cache_dir_utils.py``
and the readers of these variables):

- ``TORCHINDUCTOR_CACHE_DIR`` is the root of inductor's FX-graph cache, of
  AOT autograd's cache, of dynamo's profile-guided (automatic dynamic) state
  and of the compiled kernels; unset, torch uses ``<tempdir>/torchinductor_<user>``,
  one folder shared by every process of the user, and writes the variable
  into its own environment (so that the processes it starts agree).
- ``TRITON_CACHE_DIR``: Triton's kernels; unset, torch puts them under the
  inductor folder, but Triton on its own uses ``~/.triton/cache``.
- A few caches are kept under the temp folder whatever the variables say
  (``InductorOnDiskCache``: ``<tempdir>/torchinductor_<user>/cache``):
  ``TMPDIR`` moves them, in a process that starts with it.
- Remote caches (Redis, or Meta's) are on only where these variables or a
  config turn them on; a private cache is not private with them on.

Stdlib only, no torch: the parent sets the environment before a child starts.
"""

from __future__ import annotations

import os
from typing import Union

INDUCTOR_CACHE_VAR = "TORCHINDUCTOR_CACHE_DIR"
TRITON_CACHE_VAR = "TRITON_CACHE_DIR"

# Each turns one remote cache off where set to "0" (torch reads them as tri-state: unset
# means torch's default).
REMOTE_CACHE_VARS = (
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE",
    "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE",
    "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE",
    "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO",
)


def cache_folders_env(folder: Union[str, os.PathLike[str]]) -> dict[str, str]:
    """The variables that put inductor's and Triton's on-disk caches in ``folder``
    (made here, if missing)."""
    root = os.path.abspath(os.fspath(folder))
    env = {INDUCTOR_CACHE_VAR: os.path.join(root, "inductor"),
           TRITON_CACHE_VAR: os.path.join(root, "triton")}
    for path in env.values():
        os.makedirs(path, exist_ok=True)
    return env


def private_process_env(folder: Union[str, os.PathLike[str]]) -> dict[str, str]:
    """For a new process: every compile cache in ``folder``, the temp folder
    too, and no remote cache."""
    env = cache_folders_env(folder)
    temp = os.path.join(os.path.abspath(os.fspath(folder)), "tmp")
    os.makedirs(temp, exist_ok=True)
    env["TMPDIR"] = temp
    env.update(dict.fromkeys(REMOTE_CACHE_VARS, "0"))
    return env
