"""``--nocompile-private-caches``: each process that runs tests gets its own compile caches, under
basetemp, for the session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nocompile_testing import RunPytest

CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")

# Each process that runs tests writes what its tests saw, and what its environment holds once pytest
# is done.
RECORDING_CONFTEST = '''
import json, os
from pathlib import Path

VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
RESULTS = Path(__file__).parent / "results"

def write(what):
    RESULTS.mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (RESULTS / f"{worker}-{what}.json").write_text(json.dumps({name: os.environ.get(name)
                                                               for name in VARS}))

def pytest_unconfigure(config):
    # not xdist's controller
    runs_tests = hasattr(config, "workerinput") or config.getoption("dist", "no") == "no"
    if runs_tests:
        write("after")
'''

RECORDING_TEST = '''
from conftest import write

def test_records_the_caches_it_sees():
    write("during")
'''


def results(path: Path) -> dict[str, dict[str, str | None]]:
    return {file.stem: json.loads(file.read_text()) for file in (path / "results").glob("*.json")}


@pytest.fixture
def shared_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The user's own cache folder, as the run finds it in its environment (Triton's left unset)."""
    folder = str(tmp_path / "shared-inductor-cache")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", folder)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    return folder


def test_each_xdist_worker_gets_caches_of_its_own_inside_basetemp_and_the_environment_is_put_back(
        pytester: pytest.Pytester, run: RunPytest, shared_cache: str) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(RECORDING_CONFTEST)
    pytester.makepyfile(test_caches=RECORDING_TEST)
    basetemp = pytester.path / "basetemp"
    # --dist each: both workers run the test, whatever the scheduling.
    run("-p", "xdist", "-n", "2", "--dist", "each", f"--basetemp={basetemp}",
        "--nocompile-private-caches").assert_outcomes(passed=2)
    seen = results(pytester.path)
    assert sorted(seen) == ["gw0-after", "gw0-during", "gw1-after", "gw1-during"]
    during = [seen["gw0-during"], seen["gw1-during"]]
    for name in CACHE_VARS:
        first, second = (Path(str(values[name])) for values in during)
        assert first != second
        for folder in (first, second):
            assert folder.is_relative_to(basetemp.resolve()) and folder.is_dir()
    for worker in ("gw0", "gw1"):
        assert seen[f"{worker}-after"] == {"TORCHINDUCTOR_CACHE_DIR": shared_cache,
                                           "TRITON_CACHE_DIR": None}


def test_the_ini_key_gives_a_plain_run_its_own_caches_and_without_it_the_users_stay(
        pytester: pytest.Pytester, run: RunPytest, shared_cache: str) -> None:
    pytester.makeconftest(RECORDING_CONFTEST)
    pytester.makepyfile(test_caches=RECORDING_TEST)
    basetemp = pytester.path / "basetemp"
    run(f"--basetemp={basetemp}").assert_outcomes(passed=1)
    assert results(pytester.path)["main-during"] == {"TORCHINDUCTOR_CACHE_DIR": shared_cache,
                                                     "TRITON_CACHE_DIR": None}

    pytester.makeini("[pytest]\nnocompile_private_caches = true\n")
    run(f"--basetemp={basetemp}").assert_outcomes(passed=1)
    seen = results(pytester.path)
    assert seen["main-during"] == {name: str(basetemp.resolve() / "nocompile-caches" / folder)
                                   for name, folder in zip(CACHE_VARS, ("inductor", "triton"))}
    assert seen["main-after"] == {"TORCHINDUCTOR_CACHE_DIR": shared_cache, "TRITON_CACHE_DIR": None}
