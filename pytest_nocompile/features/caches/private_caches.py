"""``--nocompile-private-caches`` (ini ``nocompile_private_caches``): compile caches of its own for
each process that runs tests.

torch's on-disk compile caches default to one folder per user
(``<tempdir>/torchinductor_<user>``), shared by every process: xdist workers
compiling at once write the same entries, and a run's outcome depends on what
earlier runs left there. With this option, each process that runs tests (each
xdist worker, or pytest itself without xdist) points them at a folder under
its own base temp folder (``<basetemp>/nocompile-caches``; a worker's
basetemp is its own) for the session, from the first test's setup, and puts
the environment back as it was when the session ends. The processes the tests
start inherit it.

Registered by the caches feature (:mod:`.`) as a plugin of its own, only when the option is
on: a run without it has no fixture more per test.
"""

from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _nocompile_private_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from .compile_caches import cache_folders_env

    env = cache_folders_env(tmp_path_factory.mktemp("nocompile-caches", numbered=False))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        yield
