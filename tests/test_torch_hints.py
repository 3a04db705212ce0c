"""Torch's own words in a failure (issue 42, finding 5): a graph break's hints and page, and the
graph break behind a recompile.

torch 2.7 on gives each graph break "Hint:" lines, and 2.9 on a link to
the page on that kind of break; older torch gives neither. Nothing here
pins one torch's wording: each check compares the failure with the message
torch itself wrote, in the run (``TORCH_LOGS=graph_breaks`` prints it) or
as recorded in tests/data.
"""

from __future__ import annotations

import re

import pytest

from nocompile_testing import DATA, TORCH, RunPytest, recorded_messages
from pytest_nocompile.vocabulary.graph_break_events import parse_graph_break_message

HAS_HINTS = TORCH >= (2, 7)
# In torch's own message: the advice, one line each, and the page the break's kind has.
_TORCH_HINT = re.compile(r"^\s*Hint: (?P<hint>.+?)\s*$")
_TORCH_PAGE = re.compile(r"please visit: (?P<link>https?://\S+)")


def _torch_hints(text: str) -> list[str]:
    """The "Hint:" lines of torch's message (as logged: after the log record's "[...] " prefix)."""
    lines = (line.split("] ")[-1] for line in text.splitlines())
    return [match["hint"] for line in lines if (match := _TORCH_HINT.search(line))]


RECORDINGS = sorted(path.name for path in DATA.glob("torch-*-graph_breaks.txt"))


@pytest.mark.parametrize("recording", RECORDINGS)
def test_each_recorded_graph_break_keeps_torchs_hints_and_page(recording: str) -> None:
    for message in recorded_messages(recording):
        event = parse_graph_break_message(message)
        assert list(event.hints) == _torch_hints(message)
        page = _TORCH_PAGE.search(message)
        assert event.link == (page["link"] if page else None)
    newest = recorded_messages("torch-2.15-graph_breaks.txt")
    assert all(parse_graph_break_message(message).hints for message in newest)  # it can fail


LM = '''
import pytest
import torch


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=64, width=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, idx, temperature=1.0):
        hidden = self.embed(idx)
        tokens = int((idx != 0).sum().item())  # a count for the log: a graph break
        print("tokens", tokens)
        return self.head(hidden) / temperature


def batch():
    return torch.randint(1, 64, (3, 8))  # (batch, seq)


@pytest.mark.max_graph_breaks(0)
def test_forward():
    torch.compile(TinyLM(), backend="eager")(batch())


@pytest.mark.max_recompiles(0)
def test_sampling_temperatures():
    model = torch.compile(TinyLM(), backend="eager")
    for temperature in (1.0, 0.7):
        model(batch(), temperature)
'''


def _failure(output: str, test: str) -> str:
    """One test's failure text: from its "____ name ____" header to the next section."""
    start = output.index(f" {test} _")
    ends = [output.find("\n____", start), output.find("- Captured", start)]
    ends = [at for at in ends if at != -1]
    return output[start:min(ends)]


@pytest.fixture
def lm_run(pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch) -> str:
    pytester.makepyfile(test_lm=LM)
    monkeypatch.setenv("TORCH_LOGS", "graph_breaks")  # torch's own message, printed beside ours
    result = run("-p", "no:logging", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    return result.stdout.str()


def test_a_graph_break_failure_carries_torchs_hints_and_its_page(lm_run: str) -> None:
    failure = _failure(lm_run, "test_forward")
    told = lm_run[lm_run.index(" test_forward _"):lm_run.index(" test_sampling_temperatures _")]
    hints = _torch_hints(told.replace(failure, ""))
    assert hints or not HAS_HINTS, told
    for hint in dict.fromkeys(hints):
        assert f"    hint: {hint}\n" in failure, (hint, failure)
    for page in dict.fromkeys(_TORCH_PAGE.findall(told.replace(failure, ""))):
        assert f"    details: {page}\n" in failure


def test_a_recompile_after_a_graph_break_lists_that_break(lm_run: str) -> None:
    failure = _failure(lm_run, "test_sampling_temperatures")
    assert "recompiled" in failure and "temperature" in failure, failure
    listed = failure.partition("\nrecompiled after the graph break")[2]
    assert listed, failure
    # The print's: the code after it reads the temperature.
    assert re.search(r"^\[1/1\] graph break at test_lm.py:14$", listed, re.M), failure
    if HAS_HINTS:
        assert "    hint: " in listed

