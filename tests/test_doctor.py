"""``python -m pytest_nocompile doctor``: what it says of the torch installed here, and of a torch
that moved what the plugin reads, simulated on the installed one (a logger renamed, a message
reworded, a function removed, the compilation metrics moved)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from nocompile_testing import COUNTERS_RENAMED, metrics_count_cache_misses
from pytest_nocompile.judge.installed_versions import major_minor

TORCH = torch.__version__
# what the probes show on every torch from 2.4 to 2.15, each witness with its state
EAGER_ROWS = [
    ("compile", "graph handed to the backend (graph_code log)", "seen"),
    ("compile", "compile id", "read"),
    ("compile", "compilation-metrics entry, its time fields", "read"),
    ("recompile", "recompile log record, its guard and reason", "read"),
    ("recompile", "compile id's attempt number (0/1)", "seen"),
    ("graph break", "graph-break log record, its place and reason", "read"),
    ("graph break", "resume function compiled after it", "seen"),
    ("recompile limit", "limit warning ({limit})", "read"),
    ("recompile limit", "refused attempt compiled no graph", "seen"),
    ("swallowed compile error", "WON'T CONVERT warning", "read"),
]
ALL_SEEN = f"every signal torch {TORCH} has was seen"


def _limit_name() -> str:
    import torch._dynamo.config as config

    return "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"


def _doctor(tmp_path: Path, *arguments: str, before: str = "") -> subprocess.CompletedProcess[str]:
    """The doctor run in a Python of its own, after ``before`` (a simulation of a future torch)."""
    script = tmp_path / "run_doctor.py"
    script.write_text(textwrap.dedent(before) + textwrap.dedent(f"""
        import sys
        from pytest_nocompile.__main__ import main
        sys.exit(main(["doctor", *{list(arguments)!r}]))
    """))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


def _dark(tmp_path: Path, before: str) -> tuple[dict[tuple[str, str], tuple[str, str]], str]:
    """The eager probes after ``before``, which darkens some witness: the run exits 1, quietly; its
    rows, and its last line."""
    done = _doctor(tmp_path, "--eager-only", before=before)
    assert (done.returncode, done.stderr) == (1, ""), done.stdout
    return _rows(done.stdout), done.stdout.splitlines()[-1]


def _rows(stdout: str) -> dict[tuple[str, str], tuple[str, str]]:
    """The table's rows: (signal, witness) -> (state, the detail line below it, or "")."""
    lines = stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("signal ")))
    rows: dict[tuple[str, str], tuple[str, str]] = {}
    last = None
    for line in lines[start + 1:]:
        if not line.strip():
            break
        if line.startswith(" "):
            assert last is not None
            rows[last] = (rows[last][0], line.strip())
            continue
        signal, witness, state = re.split(r" {2,}", line)
        last = (signal, witness)
        rows[last] = (state, "")
    return rows


def _eager_rows() -> list[tuple[str, str, str]]:
    return [(signal, witness.format(limit=_limit_name()), state)
            for signal, witness, state in EAGER_ROWS]


def test_every_signal_this_torch_has_is_seen_and_read(tmp_path: Path) -> None:
    done = _doctor(tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    lines = done.stdout.splitlines()
    cuda = "CUDA" if torch.cuda.is_available() else "no CUDA"
    assert lines[0] == (f"pytest-nocompile doctor: torch {TORCH}, Python "
                        f"{sys.version.split()[0]}, {cuda}")
    assert lines[-1] == ALL_SEEN
    rows = _rows(done.stdout)
    for signal, witness, state in _eager_rows():
        assert rows.pop((signal, witness)) == (state, ""), (signal, witness)
    # what inductor gives: the cache counters from torch 2.5
    new_enough = (major_minor(TORCH) or (0, 0)) >= (2, 5)
    state, detail = rows.pop(("cache misses", "inductor's FX graph cache counters"))
    assert (state, bool(detail)) == (("seen", False) if new_enough else ("not on this torch", True))
    # their second witness, on a torch whose compilation metrics count the misses
    state, detail = rows.pop(("cache misses", "compilation-metrics entry's miss counts"))
    assert (state, bool(detail)) == (("seen", False) if metrics_count_cache_misses()
                                     else ("not on this torch", True))
    assert rows.pop(("kernels", "inductor's kernel metrics")) == ("seen", "")
    # what this machine may lack: a hardware instruction counter, CUDA
    state, detail = rows.pop(("compile instructions", "torch's instruction counter"))
    assert state in {"seen", "not here", "not on this torch"}
    assert bool(detail) == (state != "seen"), detail
    state, detail = rows.pop(("syncs", "CUDA sync debug mode"))
    if torch.cuda.is_available():
        assert (state, detail) == ("seen", "")
    else:
        assert state == "not here" and detail.startswith("syncs were not observed: "), detail
    assert rows == {}


def test_a_renamed_recompiles_logger_is_dark_and_fails_while_the_attempt_number_still_sees_it(
    tmp_path: Path,
) -> None:
    rows, last = _dark(tmp_path, """
        import logging
        import torch._dynamo.guards as guards
        renamed = logging.getLogger("torch._dynamo.guard_failures.__recompiles")
        renamed.setLevel(logging.DEBUG)
        renamed.propagate = False
        guards.recompiles_log = renamed
    """)
    assert rows[("recompile", "recompile log record, its guard and reason")] == ("dark", "")
    assert rows[("recompile", "compile id's attempt number (0/1)")] == ("seen", "")
    assert last == (
        f"1 witness dark on torch {TORCH} (recompile): a gate that counts through one sees less "
        "than happened")


def test_renamed_cache_counters_are_dark_while_the_compilation_metrics_still_see_the_miss(
    tmp_path: Path,
) -> None:
    if not metrics_count_cache_misses():
        pytest.skip("torch's compilation metrics count no cache misses here")
    done = _doctor(tmp_path, before=COUNTERS_RENAMED)
    assert (done.returncode, done.stderr) == (1, ""), done.stdout
    rows = _rows(done.stdout)
    assert rows[("cache misses", "inductor's FX graph cache counters")] == ("dark", "")
    assert rows[("cache misses", "compilation-metrics entry's miss counts")] == ("seen", "")
    assert done.stdout.splitlines()[-1] == (
        f"1 witness dark on torch {TORCH} (cache misses): a gate that counts through one sees "
        "less than happened")


def test_a_reworded_recompile_message_is_seen_and_shown_raw(tmp_path: Path) -> None:
    done = _doctor(tmp_path, "--eager-only", before="""
        import logging
        made = logging.getLogRecordFactory()
        def reworded(*args, **kwargs):
            record = made(*args, **kwargs)
            if record.name.endswith("__recompiles"):
                text = record.getMessage().replace("\\n", " | ")
                record.msg, record.args = f"Frame recompiled. {text}", ()
            return record
        logging.setLogRecordFactory(reworded)
    """)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    state, raw = _rows(done.stdout)[("recompile", "recompile log record, its guard and reason")]
    assert state == "seen, text not read"
    assert raw.startswith("Frame recompiled. Recompiling function <lambda> in "), raw
    assert done.stdout.splitlines()[-1] == f"{ALL_SEEN}; 1 of their texts not read"


def test_a_reworded_limit_warning_is_still_a_limit_hit_and_shown_raw(tmp_path: Path) -> None:
    done = _doctor(tmp_path, "--eager-only", before="""
        import logging
        made = logging.getLogRecordFactory()
        def reworded(*args, **kwargs):
            record = made(*args, **kwargs)
            text = record.getMessage()
            if record.name == "torch._dynamo.convert_frame" and "hit config." in text:
                record.msg, record.args = "Dynamo will compile this frame no more", ()
            return record
        logging.setLogRecordFactory(reworded)
    """)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    rows = _rows(done.stdout)
    assert rows[("recompile limit", f"limit warning ({_limit_name()})")] == (
        "seen, text not read", "Dynamo will compile this frame no more")
    assert rows[("recompile limit", "refused attempt compiled no graph")] == ("seen", "")


def test_a_removed_function_is_one_dark_row_naming_it_and_the_other_probes_go_on(
    tmp_path: Path,
) -> None:
    rows, _ = _dark(tmp_path, """
        import torch._dynamo
        del torch._dynamo.graph_break
    """)
    state, detail = rows.pop(("graph breaks", "the probe itself"))
    assert state == "dark"
    # the error as torch passes it on (2.4 wraps it in an InternalTorchDynamoError)
    assert detail.endswith("has no attribute 'graph_break'"), detail
    assert rows[("recompile", "recompile log record, its guard and reason")] == ("read", "")
    assert rows[("swallowed compile error", "WON'T CONVERT warning")] == ("read", "")


def test_compilation_metrics_torch_no_longer_keeps_are_dark_with_the_reason(
    tmp_path: Path,
) -> None:
    rows, _ = _dark(tmp_path, """
        import torch._dynamo.utils as utils
        utils._compilation_metrics = list(utils._compilation_metrics)
    """)
    state, detail = rows[("compile", "compilation-metrics entry, its time fields")]
    assert state == "dark"
    assert detail.startswith(f"torch {TORCH} keeps no torch._dynamo.utils._compilation_metrics"), \
        detail


def test_a_removed_method_the_capture_calls_darkens_its_logs_and_says_which(
    tmp_path: Path,
) -> None:
    rows, _ = _dark(tmp_path, """
        import torch._logging._internal as torch_logging
        del torch_logging.LogState.enable_artifact
    """)
    for signal, witness, log in [
        ("recompile", "recompile log record, its guard and reason", "recompiles"),
        ("graph break", "graph-break log record, its place and reason", "graph_breaks"),
    ]:
        assert rows[(signal, witness)] == (
            "dark", f"torch {TORCH} moved what pytest-nocompile calls to read its {log} log "
            "(AttributeError: 'LogState' object has no attribute 'enable_artifact')")
    # the witnesses that need no log switched on still see them
    assert rows[("recompile", "compile id's attempt number (0/1)")] == ("seen", "")
    assert rows[("graph break", "resume function compiled after it")] == ("seen", "")


@pytest.mark.parametrize("arguments", [("--help",), ("doctor", "--help")])
def test_the_doctor_is_a_command_of_the_package(arguments: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_nocompile", *arguments],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "doctor" in done.stdout
    if arguments[0] == "doctor":
        assert "--eager-only" in done.stdout
