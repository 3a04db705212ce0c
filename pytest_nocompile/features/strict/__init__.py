"""Strict mode: a recompile raises at the call that recompiled (dynamo's ``error_on_recompile``).

A test with a recompile budget runs strict where ``--nocompile-strict``, the
ini key ``nocompile_strict`` or the marker's ``strict=True`` says so (the
plan's ``strict``). While its call phase runs with dynamo, dynamo raises
``RecompileError`` at the recompiling call, and the traceback keeps only the
user's frames (:mod:`.user_frames`), so it points into the user's code.

Hooks: ``pytest_nocompile_record_attached`` and ``pytest_nocompile_call_started``
(enter), ``pytest_nocompile_call_ended`` (cut the traceback, leave),
``pytest_nocompile_watch_closed`` (leave, where an interrupted call did not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ContextManager, Optional

import pytest

if TYPE_CHECKING:
    from ...watching.watch import Watch

NAME = "strict"  # the key of its state in each watch's feature_state: the entered patch


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


@pytest.hookimpl
def pytest_nocompile_call_started(watch: Watch) -> None:
    if _strict(watch) and watch.attached:  # else entered if dynamo arrives during the call
        _enter(watch)


@pytest.hookimpl
def pytest_nocompile_record_attached(watch: Watch) -> None:
    if _strict(watch) and watch.record is not None and watch.record.phase == "call":
        _enter(watch)


@pytest.hookimpl
def pytest_nocompile_call_ended(watch: Watch, error: Optional[BaseException]) -> None:
    if error is not None and _strict(watch):
        from .user_frames import cut_to_user_frames

        assert watch.item is not None  # an open watch has its test
        cut_to_user_frames(error, watch.item.config.getoption("fulltrace", False))
    _leave(watch)


@pytest.hookimpl
def pytest_nocompile_watch_closed(watch: Watch) -> None:
    _leave(watch)
