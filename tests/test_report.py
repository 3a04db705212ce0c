"""Failure text for recorded messages: pure formatting, no torch."""

from __future__ import annotations

from nocompile_testing import recorded_messages
from pytest_nocompile.budget import RECOMPILES
from pytest_nocompile.events import event_from_message
from pytest_nocompile.output.report import explain


def test_multi_line_guard_keeps_its_indentation() -> None:
    messages = recorded_messages("torch-2.11-recompiles.txt")
    (wrapper,) = [m for m in messages if m.startswith("Recompiling function wrapper") and "deallocated" not in m]
    text = explain(RECOMPILES, RECOMPILES.headline(1, 0, "max_recompiles(0)"), [event_from_message(wrapper)], (), ())
    lines = text.splitlines()
    assert lines[0] == "1 recompile > max_recompiles(0)"
    assert lines[1].startswith("[1/1] recompiled wrapper (") and lines[1].endswith("torch/optim/optimizer.py:512)")
    assert lines[2].startswith("    guard failed: 3/0: ___check_obj_id(args[0], ")
    assert lines[3] == "                  Parameter Group 0"
    assert lines[-2] == "                  )"
    assert lines[-1].startswith("      guarded at: ") and lines[-1].endswith("optimizer.py:515 in wrapper: self = cast(Optimizer, self)")


def test_headlines() -> None:
    assert RECOMPILES.headline(3, 0, "max_recompiles(0)") == "3 recompiles > max_recompiles(0)"
    assert RECOMPILES.headline(0, 1, "b(1, exact=True)", exact=True) == "0 recompiles != b(1, exact=True)"
    assert RECOMPILES.headline(2, 8, "max_recompiles(8)") == "2 recompiles within max_recompiles(8), but dynamo hit its recompile limit"
