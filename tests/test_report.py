"""Failure text for recorded messages: pure formatting, no torch."""

from __future__ import annotations

from nocompile_testing import recorded_messages
from pytest_nocompile.output.report import explain
from pytest_nocompile.vocabulary.events import event_from_message
from pytest_nocompile.vocabulary.kinds import RECOMPILES


def test_multi_line_guard_keeps_its_indentation() -> None:
    messages = recorded_messages("torch-2.11-recompiles.txt")
    (wrapper,) = [m for m in messages
                  if m.startswith("Recompiling function wrapper") and "deallocated" not in m]
    text = explain(RECOMPILES, RECOMPILES.headline(1, 0, "max_recompiles(0)"),
                   [event_from_message(wrapper)], (), ())
    lines = text.splitlines()
    assert lines[0] == "1 recompile > max_recompiles(0)"
    assert (lines[1].startswith("[1/1] recompiled wrapper (")
            and lines[1].endswith("torch/optim/optimizer.py:512)"))
    assert lines[2].startswith("    guard failed: 3/0: ___check_obj_id(args[0], ")
    assert lines[3] == "                  Parameter Group 0"
    assert lines[-3] == "                  )"
    assert (lines[-2].startswith("      guarded at: ")
            and lines[-2].endswith("optimizer.py:515 in wrapper: self = cast(Optimizer, self)"))
    assert lines[-1] == ("      usual fix: args[0] is a new object at each call "
                         "(a module or optimizer built per call): build it once and reuse it")


def test_headlines() -> None:
    assert RECOMPILES.headline(3, 0, "max_recompiles(0)") == "3 recompiles > max_recompiles(0)"
    assert (RECOMPILES.headline(0, 1, "b(1, exact=True)", exact=True)
            == "0 recompiles != b(1, exact=True)")
    assert (RECOMPILES.headline(2, 8, "max_recompiles(8)")
            == "2 recompiles within max_recompiles(8), but dynamo hit its recompile limit")


def size_recompile(attempt: int, with_ids: bool = True) -> str:
    """dynamo's message for the ``attempt``-th recompile of ``double`` on a new size: every older
    cache entry's guard, newest first."""
    reasons = [f"    - {f'0/{entry}: ' if with_ids else ''}tensor 'x' size mismatch at index 0. "
               f"expected {entry + 1}, actual {attempt + 1}"
               for entry in reversed(range(attempt))]
    return "\n".join(["Recompiling function double in /work/test_sizes.py:4",
                      "    triggered by the following guard failure(s):", *reasons])


def test_each_cache_entrys_guard_is_shown_once_in_a_failure() -> None:
    events = [event_from_message(size_recompile(attempt)) for attempt in range(1, 8)]
    lines = explain(RECOMPILES, RECOMPILES.headline(7, 0, "max_recompiles(0)"),
                    events, (), ()).splitlines()
    # 28 before: each entry repeated every older one
    assert len([line for line in lines if "guard failed" in line]) == 7
    # Each fix once: under the first guard that needs it (a size from 1 is dynamo's 0/1 rule, the
    # others a changing size).
    assert lines[:11] == [
        "7 recompiles > max_recompiles(0)",
        "[1/7] recompiled double (/work/test_sizes.py:4)",
        "    guard failed: 0/0: tensor 'x' size mismatch at index 0. expected 1, actual 2",
        "      usual fix: dynamo specialises sizes 0 and 1: keep x dim 0 at 2 or more, "
        "or call torch._dynamo.mark_unbacked(x, 0) before the first call",
        "[2/7] recompiled double (/work/test_sizes.py:4)",
        "    guard failed: 0/1: tensor 'x' size mismatch at index 0. expected 2, actual 3",
        "      usual fix: compile with dynamic=True, or call torch._dynamo.mark_dynamic(x, 0) "
        "before the first call",
        "    failed again: the guard of 0/0 (shown above)",
        "[3/7] recompiled double (/work/test_sizes.py:4)",
        "    guard failed: 0/2: tensor 'x' size mismatch at index 0. expected 3, actual 4",
        "    failed again: the guards of 0/0, 0/1 (shown above)",
    ]
    assert lines[-2:] == [
        "    guard failed: 0/6: tensor 'x' size mismatch at index 0. expected 7, actual 8",
        "    failed again: the guards of 6 cache entries, 0/0 … 0/5 (shown above)",
    ]
    # A cache entry is one function's: the same compile id of another function is another entry.
    other = event_from_message(size_recompile(1).replace("double in /work/test_sizes.py:4",
                                                         "triple in /work/test_sizes.py:9"))
    lines = explain(RECOMPILES, "8 recompiles > max_recompiles(0)",
                    [*events, other], (), ()).splitlines()
    assert lines[-2:] == ["[8/8] recompiled triple (/work/test_sizes.py:9)",
                          # its fix was said above
                          "    guard failed: 0/0: tensor 'x' size mismatch at index 0. "
                          "expected 1, actual 2"]


def test_without_compile_ids_a_guard_is_shown_once_by_its_text() -> None:
    # torch 2.4 gives no compile ids: only a guard worded the same is known to be the same.
    first, second = (
        event_from_message(size_recompile(attempt, with_ids=False).replace("actual 3", "actual 2"))
        for attempt in (1, 2))
    lines = explain(RECOMPILES, "2 recompiles > max_recompiles(0)",
                    [first, second], (), ()).splitlines()
    assert lines[4:] == [
        "[2/2] recompiled double (/work/test_sizes.py:4)",
        "    guard failed: tensor 'x' size mismatch at index 0. expected 2, actual 2",
        "      usual fix: compile with dynamic=True, or call torch._dynamo.mark_dynamic(x, 0) "
        "before the first call",
        "    failed again: 1 guard (shown above)",
    ]
