"""Nothing unreadable is passed over (issue 40 §2): a text of dynamo's the parser does not know is
counted by its witness, shown raw with the torch version, and never read as "no reason".

The unit tests hold every text recorded from torch 2.4 to 2.15 (tests/data) to "read": a known
torch's text is never marked unread. The runs simulate a future torch on the installed one, by
rewording dynamo's records as they are made (a ``logging`` record factory in the user's conftest).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
from test_exact_counts import AT_THE_LIMIT

from nocompile_testing import (
    BREAK_ONCE,
    DATA,
    RECOMPILE_ONCE_TEST,
    RunPytest,
    expect_lines,
    recorded_messages,
)
from pytest_nocompile.vocabulary.events import (
    limit_hit_from_warning,
    parse_limit_warning,
    recompile_event,
)
from pytest_nocompile.vocabulary.graph_break_events import graph_break_event

TORCH_VERSION = r"\d+\.\d+\S*"  # in a line of expect_lines' wildcards: any torch's version


def _recordings(kind: str) -> list[tuple[str, str]]:
    return [(path.name, message) for path in sorted(DATA.glob(f"torch-*-{kind}.txt"))
            for message in recorded_messages(path.name)]


@pytest.mark.parametrize("kind", ["recompiles", "recompiles_verbose", "compiled_modules",
                                  "dynamic_sizes"])
def test_every_recorded_recompile_message_is_read(kind: str) -> None:
    recorded = _recordings(kind)
    assert recorded
    for name, message in recorded:
        event = recompile_event(message)
        assert event.reasons and event.unread is None, (name, message)


def test_every_recorded_graph_break_and_limit_warning_is_read() -> None:
    breaks, limits = _recordings("graph_breaks"), _recordings("limit")
    assert breaks and limits
    for name, message in breaks:
        assert graph_break_event(message, lambda path: False).unread is None, (name, message)
    for name, message in limits:
        hit = limit_hit_from_warning(message, compile_id="0/8")
        assert hit is not None and hit.read, (name, message)


def test_a_recompile_whose_reasons_are_not_read_shows_them_raw() -> None:
    read = recompile_event("Recompiling function f in /src/x.py:3\n"
                           "    triggered by the following guard failure(s):\n"
                           "    - 0/0: n == 2")
    assert read.unread is None
    reworded = recompile_event("Recompiling function f in /src/x.py:3\n"
                               "    triggered by the following guard failure(s):\n"
                               "    * 0/0: n == 2")
    assert (reworded.function, reworded.reasons, reworded.unread) == ("f", (), "    * 0/0: n == 2")
    # where a report gives a recompile in one line
    assert reworded.first_reason == "(its text not read: in a form pytest-nocompile does not know)"
    assert read.first_reason == "0/0: n == 2"
    # torch wrote its heading and no reason: it gave none, and nothing is unread
    bare = recompile_event("Recompiling function f in /src/x.py:3\n"
                           "    triggered by the following guard failure(s):")
    assert (bare.reasons, bare.unread, bare.first_reason) == ((), None, "(torch gave no reason)")
    whole = "Frame f recompiled because n changed"
    assert recompile_event(whole).unread == whole


def test_a_warning_not_read_is_a_limit_hit_only_inside_a_compile() -> None:
    reworded = "Dynamo reached its recompile limit (8) for 'f' (/src/x.py:3)"
    assert parse_limit_warning(reworded) is None
    assert limit_hit_from_warning(reworded) is None  # no compile under way: not a refusal
    hit = limit_hit_from_warning(reworded, compile_id="0/8")
    assert hit is not None and (hit.read, hit.compile_id, hit.message) == (False, "0/8", reworded)


def _rewording_conftest(logger_suffix: str, reword: str) -> str:
    """A conftest that rewrites the records of dynamo's loggers ending in ``logger_suffix`` as
    they are made: ``text`` is the message, the expression ``reword`` its new text."""
    return textwrap.dedent(f"""
        import logging
        made = logging.getLogRecordFactory()
        def reworded(*args, **kwargs):
            record = made(*args, **kwargs)
            if record.name.endswith({logger_suffix!r}):
                text = record.getMessage()
                record.msg, record.args = {reword}, ()
            return record
        logging.setLogRecordFactory(reworded)
    """)


def _entry(pytester: pytest.Pytester) -> dict[str, Any]:
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    return entry


def test_a_reworded_recompile_header_fails_the_budget_and_shows_torchs_text(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(_rewording_conftest(
        "__recompiles", 'text.replace("Recompiling function", "Frame recompiled:", 1)'))
    pytester.makepyfile(test_x=RECOMPILE_ONCE_TEST)
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "1 recompile > max_recompiles(0) (marker on the test)",
        "[1/1] recompiled a function pytest-nocompile could not name",
        "    not read: torch * wrote this recompile in a form pytest-nocompile does not know; "
        "torch's text:",
        "      | Frame recompiled: scale in */test_x.py:3",
        "      |     triggered by the following guard failure(s):",
    ])
    result.stdout.re_match_lines([rf"    not read: torch {TORCH_VERSION} wrote this recompile .*"])
    assert "torch gave no reason" not in result.stdout.str()
    (event,) = _entry(pytester)["recompile_events"]
    assert event["unread_text"].startswith("Frame recompiled: scale in ")


def test_reasons_in_a_form_not_known_are_shown_raw_not_as_no_reason(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(_rewording_conftest("__recompiles",
                                              'text.replace("    - ", "    * ")'))
    pytester.makepyfile(test_x=RECOMPILE_ONCE_TEST)
    result = run("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "1 recompile > max_recompiles(0) (marker on the test)",
        "[1/1] recompiled scale (test_x.py:3)",
        "    not read: torch * wrote its reasons in a form pytest-nocompile does not know; "
        "torch's text:",
        "      |     * *n* == 2*",  # n, or L['n'] up to torch 2.6; from 2.9 a source comment
    ])
    assert "torch gave no reason" not in result.stdout.str()


def test_a_reworded_graph_break_is_counted_and_shown_raw(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(_rewording_conftest("__graph_breaks", 'f"Dynamo split a graph. {text}"'))
    pytester.makepyfile(test_x=BREAK_ONCE + """
@pytest.mark.max_graph_breaks(0)
def test_x():
    torch.compile(broken, backend="eager")(torch.ones(2))
""")
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "[1/1] graph break at a place pytest-nocompile could not read",
        "    not read: torch * wrote this graph break in a form pytest-nocompile does not know; "
        "torch's text:",
        "      | Dynamo split a graph. Graph break*",
    ])
    (event,) = _entry(pytester)["graph_break_events"]
    assert event["unread_text"].startswith("Dynamo split a graph. Graph break")


def test_a_reworded_limit_warning_is_still_a_limit_hit(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(test_limit=AT_THE_LIMIT.format(marker="@pytest.mark.max_recompiles(0)"))
    run("-p", "no:randomly", "--nocompile-json=report.json").assert_outcomes(failed=1)
    read = _entry(pytester)
    pytester.makeconftest(_rewording_conftest(
        "convert_frame",
        'text.replace("torch._dynamo hit config.", "Dynamo will compile no more: ", 1)'))
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    reworded = _entry(pytester)
    # counted as if it were read: the refused attempt is no recompile
    assert (reworded["compiles"], reworded["recompiles"]) == (read["compiles"], read["recompiles"])
    assert (read["compiles"], read["recompiles"]) == (4, 3)
    (hit,) = reworded["recompile_limit_hits"]
    assert hit["refused_attempt"] == read["recompile_limit_hits"][0]["refused_attempt"]
    assert hit["unread_text"].startswith("Dynamo will compile no more: ")
    expect_lines(result, [
        "dynamo refused to recompile <lambda> (test_limit.py:*), with a warning pytest-nocompile "
        "could not read (the refused attempt compiled no graph): later calls run uncompiled and "
        "log no recompiles, so the count above is a lower bound",
        "    refused attempt, not counted as a recompile: guard failed: *",
        "    not read: torch * wrote its limit warning in a form pytest-nocompile does not know; "
        "torch's text:",
        "      | Dynamo will compile no more: *",
    ])


WARNS_WHILE_RECOMPILING = '''
import logging
import torch._dynamo.convert_frame as convert_frame

# A warning of convert_frame's in a recompile's attempt, before it traces: a future torch's.
NAME = next(name for name in ("exceeds_recompile_limit", "exceeds_cache_size_limit")
            if hasattr(convert_frame, name))
checked = getattr(convert_frame, NAME)

def checking(*args, **kwargs):
    found = checked(*args, **kwargs)
    logging.getLogger("torch._dynamo.convert_frame").warning("dynamo has news for you")
    return found

setattr(convert_frame, NAME, checking)
'''


def test_a_warning_not_read_in_an_attempt_that_compiles_is_no_limit_hit(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makeconftest(WARNS_WHILE_RECOMPILING)
    pytester.makepyfile(test_x=RECOMPILE_ONCE_TEST)
    result = run("-p", "no:randomly", "--nocompile-json=report.json")
    result.assert_outcomes(failed=1)
    entry = _entry(pytester)
    assert (entry["compiles"], entry["recompiles"], entry["recompile_limit_hits"]) == (2, 1, [])
    expect_lines(result, ["1 recompile > max_recompiles(0) (marker on the test)",
                          "[1/1] recompiled scale (test_x.py:3)",
                          "    guard failed: 0/0: n == 2"])
