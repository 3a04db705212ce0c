"""Strict mode: a recompile raises at the call that recompiled (dynamo's ``error_on_recompile``).

A test with a recompile budget runs strict where ``--nocompile-strict``, the
ini key ``nocompile_strict`` or the marker's ``strict=True`` says so (the
plan's ``strict``). While its call phase runs with dynamo, dynamo raises
``RecompileError`` at the recompiling call, and the traceback keeps only the
user's frames (:mod:`.user_frames`), so it points into the user's code.

Hooks: ``pytest_collection_finish`` (registers :class:`StrictMode` only where some collected
test can run strict: a run without strict mode pays nothing per test), and on it
``pytest_nocompile_record_attached`` and ``pytest_nocompile_call_started`` (enter),
``pytest_nocompile_call_ended`` (cut the traceback, leave), ``pytest_nocompile_watch_closed``
(leave, where an interrupted call did not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ContextManager, Optional

import pytest

from ...vocabulary.kinds import RECOMPILES
from ...watching.planning import marked_nodes
from ...watching.settings import SETTINGS_KEY

if TYPE_CHECKING:
    from ...watching.watch import Watch

NAME = "strict"  # the key of its state in each watch's feature_state: the entered patch


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.pluginmanager.has_plugin(_STRICT_MODE):
        return
    # Each test's, class's and module's own markers once: a test's iter_markers() would read its
    # every parent again, for every test.
    if (config.stash[SETTINGS_KEY].strict_by_default
            or any(_asks_for_strict(node) for node in marked_nodes(session.items))):
        config.pluginmanager.register(StrictMode(), _STRICT_MODE)


_STRICT_MODE = "nocompile-strict-mode"


def _asks_for_strict(node: pytest.Item | pytest.Collector) -> bool:
    """Whether a recompile marker of the node itself (a test, class or module) says
    ``strict=True``."""
    return any(marker.name == RECOMPILES.marker and marker.kwargs.get("strict")
               for marker in node.own_markers)


class StrictMode:
    """The per-test hooks of strict mode, for the tests whose plan says strict."""

    @pytest.hookimpl
    def pytest_nocompile_call_started(self, watch: Watch) -> None:
        if _strict(watch) and watch.attached:  # else entered if dynamo arrives during the call
            _enter(watch)

    @pytest.hookimpl
    def pytest_nocompile_record_attached(self, watch: Watch) -> None:
        if _strict(watch) and watch.record is not None and watch.record.phase == "call":
            _enter(watch)

    @pytest.hookimpl
    def pytest_nocompile_call_ended(self, watch: Watch, error: Optional[BaseException]) -> None:
        if error is not None and _strict(watch):
            from .user_frames import cut_to_user_frames

            assert watch.item is not None  # an open watch has its test
            cut_to_user_frames(error, watch.item.config.getoption("fulltrace", False))
        _leave(watch)

    @pytest.hookimpl
    def pytest_nocompile_watch_closed(self, watch: Watch) -> None:
        _leave(watch)


def _strict(watch: Watch) -> bool:
    return watch.plan is not None and watch.plan.strict


def _enter(watch: Watch) -> None:
    from ...observe import dynamo_state

    patch: ContextManager[None] = dynamo_state.raising_on_recompile()
    patch.__enter__()
    watch.feature_state[NAME] = patch


def _leave(watch: Watch) -> None:
    patch = watch.feature_state.pop(NAME, None)
    if patch is not None:
        patch.__exit__(None, None, None)
