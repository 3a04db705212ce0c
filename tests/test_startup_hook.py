"""The start-up hook: two files of one name so that exactly one runs on any Python (PEP 829), a
check that it is live (``--nocompile-check-hook``), and what a child the hook cannot reach uses
instead (``watch_this_process``, ``child_env``)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import pkgutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import pytest_nocompile
from nocompile_testing import RunPytest
from pytest_nocompile.features.child_startup import event_writer as event_files, hook
from pytest_nocompile.features.child_startup.hook_check import check_hook

ENV_VAR = "PYTEST_NOCOMPILE_EVENTS"
ROOT = Path(__file__).parent.parent
HOOK_FILES = ("pytest-nocompile.pth", "pytest-nocompile.start")
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
# What a child started without site (-S) needs on sys.path to import torch and this package.
IMPORTABLE_WITHOUT_SITE = os.pathsep.join([str(Path(pytest_nocompile.__file__).parent.parent),
                                           str(SITE_PACKAGES)])

# Prints which hook file ran in the child, and whether it reports.
PROBE = ("import json, sys; h = sys.modules.get('pytest_nocompile.processes.hook'); "
         "print(json.dumps([getattr(h, 'ran', []), "
         "'pytest_nocompile.features.child_startup.startup' in sys.modules]))")


def _python(*args: str, variable: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != ENV_VAR}
    if variable is not None:
        env[ENV_VAR] = variable
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          check=True, timeout=60)


def _entry_points(start_file: Path) -> list[str]:
    """The entry points of a .start file, read as PEP 829 reads them: each line neither blank nor a
    comment."""
    return [line.strip() for line in start_file.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


# -- packaging: both files, installed, recorded ---------------------------------------------


def test_both_hook_files_are_installed_beside_the_package_and_recorded_for_uninstall() -> None:
    # The installed distribution's RECORD, not an egg-info an editable install leaves in the
    # checkout (first on sys.path).
    installed = next(dist for dist in importlib.metadata.distributions(
        name="pytest-nocompile", path=[str(SITE_PACKAGES)]))
    recorded = {str(path) for path in installed.files or []}
    for name in HOOK_FILES:
        assert (SITE_PACKAGES / name).read_text() == (ROOT / name).read_text(), name
        assert name in recorded
    assert _entry_points(ROOT / "pytest-nocompile.start") == [
        "pytest_nocompile.processes.hook:start"]
    assert pkgutil.resolve_name("pytest_nocompile.processes.hook:start") is hook.start
    assert hook.ENV_VAR == event_files.ENV_VAR
    # the sdist carries it too
    assert "include pytest-nocompile.start" in (ROOT / "MANIFEST.in").read_text().splitlines()


# -- exactly one of them runs ---------------------------------------------------------------


@pytest.mark.skipif(sys.version_info >= (3, 15),
                    reason="Python 3.15+ reads .start files and skips the .pth's import line")
def test_before_python_3_15_the_pth_runs_and_the_start_file_is_inert(tmp_path: Path) -> None:
    assert json.loads(_python("-c", PROBE, variable=str(tmp_path / "events")).stdout) == [
        ["pytest-nocompile.pth"], True]


# site.py's PEP 829 processing, as Python 3.15 does it, for the files of one site-packages folder: a
# .pth with a matching .start keeps only its path lines (ours has none); the .start files' entry
# points are called.
PEP_829_SITE = '''
import json, os, pkgutil, site, sys
folder = sys.argv[1]
sys.path.append(folder)
names = sorted(os.listdir(folder))
for name in names:
    if name.endswith(".pth") and name[:-4] + ".start" not in names:
        site.addpackage(folder, name, set(sys.path))
for name in names:
    if name.endswith(".start"):
        for line in open(os.path.join(folder, name)).read().splitlines():
            if line.strip() and not line.startswith("#"):
                pkgutil.resolve_name(line.strip())()
'''


def test_where_start_files_are_read_only_the_start_entry_runs(tmp_path: Path) -> None:
    ran = _python("-S", "-c", PEP_829_SITE + PROBE, str(SITE_PACKAGES),
                  variable=str(tmp_path / "events")).stdout
    assert json.loads(ran) == [["pytest-nocompile.start"], True]


def test_the_entries_import_nothing_unless_the_variable_is_set() -> None:
    probe = ("import sys; import pytest_nocompile.processes.hook as h; before = set(sys.modules); "
             "h.start(); h.start_from_pth(); print(sorted(set(sys.modules) - before), h.ran)")
    assert _python("-c", probe).stdout.strip() == "[] []"


BOTH_ENTRIES = '''
import subprocess, sys
import pytest

CHILD = """
from pytest_nocompile.processes import hook
# what Python 3.15 calls, after the .pth this Python ran; and once more the .pth's entry
hook.start()
hook.start_from_pth()
import torch
def scale(x, n):
    return x * n
f = torch.compile(scale, backend="eager")
f(torch.ones(2), 1)
f(torch.ones(2), 2)
"""

@pytest.mark.max_recompiles(0)
def test_child_recompiles_once():
    subprocess.run([sys.executable, "-c", CHILD], check=True)
'''


def test_both_entries_in_one_process_report_each_recompile_once(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_both=BOTH_ENTRIES)
    result = run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*: 1 recompile > max_recompiles(0) (marker on the test)"])


# -- --nocompile-check-hook ----------------------------------------------------------------


def test_check_hook_says_live_in_this_environment_and_runs_no_test(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_never_run="def test_fails():\n    assert False\n")
    result = run("--nocompile-check-hook")
    assert result.ret == 0
    assert result.outlines == [f"nocompile: start-up hook live in {sys.executable} "
                               f"(pytest-nocompile.pth ran with {ENV_VAR} set)"]


def test_check_hook_says_not_live_under_python_without_site(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # multiprocessing starts its children with the parent's flags: -S children run no start-up hook.
    monkeypatch.setenv("PYTHONPATH", IMPORTABLE_WITHOUT_SITE)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.run(sys.executable, "-S", "-m", "pytest", "-p", "nocompile",
                          "--nocompile-check-hook")
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"nocompile: start-up hook NOT live in {sys.executable} *-S: "
                                 "it runs without site (-S), so no start-up hook runs: "
                                 "call pytest_nocompile.watch_this_process() in its code; "
                                 "the processes a test starts this way are not watched"])


@pytest.mark.skipif(os.name != "posix", reason="the scrubbing launcher is a shell script")
def test_check_hook_says_not_live_when_a_launcher_scrubs_the_variable(tmp_path: Path) -> None:
    launcher = tmp_path / "scrubbing-launcher"
    launcher.write_text(f'#!/bin/sh\nunset {ENV_VAR}\nexec "{sys.executable}" "$@"\n')
    launcher.chmod(0o755)
    check = check_hook([str(launcher)])
    assert not check.live
    assert check.line == (f"nocompile: start-up hook NOT live in {launcher}: "
                          f"{ENV_VAR} did not reach it (its environment was scrubbed): "
                          "pass env=pytest_nocompile.child_env(...); "
                          "the processes a test starts this way are not watched")
    assert check_hook([sys.executable]).live  # the same Python, started as it is


def test_check_hook_says_why_a_python_did_not_answer(tmp_path: Path) -> None:
    missing = check_hook([str(tmp_path / "no-such-python")])
    assert not missing.live and ": it could not start: " in missing.line
    failing = check_hook([sys.executable, "-c", "import sys; sys.exit('broken interpreter')", "--"])
    assert (not failing.live
            and ": it exited with 1 without answering: broken interpreter;" in failing.line)


# -- children the hook cannot reach: child_env and watch_this_process -------------------------


def test_child_env_adds_the_variable_only_inside_a_watched_test(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv("TORCH_TRACE", raising=False)
    given = {"PATH": "/usr/bin"}
    assert (pytest_nocompile.child_env(given) == given
            and pytest_nocompile.child_env(given) is not given)
    assert pytest_nocompile.child_env() == {}
    assert pytest_nocompile.watch_this_process() is False
    monkeypatch.setenv(ENV_VAR, "/tmp/pytest-nocompile-1-x/3")
    for name in ("PYTEST_NOCOMPILE_SYNCS", "PYTEST_NOCOMPILE_STDERR_RELAY"):
        monkeypatch.delenv(name, raising=False)
    assert pytest_nocompile.child_env(given) == {"PATH": "/usr/bin",
                                                 ENV_VAR: "/tmp/pytest-nocompile-1-x/3"}
    assert given == {"PATH": "/usr/bin"}
    # Where the run reads syncs, and while this process's stderr goes through the plugin's relay,
    # the child hears so too.
    monkeypatch.setenv("PYTEST_NOCOMPILE_SYNCS", "1")
    monkeypatch.setenv("PYTEST_NOCOMPILE_STDERR_RELAY", "2049:77:0123abcd")
    assert pytest_nocompile.child_env() == {ENV_VAR: "/tmp/pytest-nocompile-1-x/3",
                                            "PYTEST_NOCOMPILE_SYNCS": "1",
                                            "PYTEST_NOCOMPILE_STDERR_RELAY": "2049:77:0123abcd"}


def test_child_env_passes_the_tests_torch_trace_on_inside_a_watched_test(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_TRACE", "/traces/.nocompile-x/running")
    monkeypatch.delenv(ENV_VAR, raising=False)
    # outside a watched test: nothing added
    assert pytest_nocompile.child_env({"PATH": "/usr/bin"}) == {"PATH": "/usr/bin"}
    monkeypatch.setenv(ENV_VAR, "/tmp/pytest-nocompile-1-x/3")
    assert pytest_nocompile.child_env() == {ENV_VAR: "/tmp/pytest-nocompile-1-x/3",
                                            "TORCH_TRACE": "/traces/.nocompile-x/running"}
    # the caller's own is kept
    assert pytest_nocompile.child_env({"TORCH_TRACE": "/mine"})["TORCH_TRACE"] == "/mine"


CHILDREN_OUT_OF_REACH = f'''
import os, subprocess, sys
from unittest import mock
import pytest
import pytest_nocompile

RECOMPILES = """
import torch
def scale(x, n):
    return x * n
f = torch.compile(scale, backend="eager")
f(torch.ones(2), 1)
f(torch.ones(2), 2)
"""
SCRUBBED = {{"PATH": os.environ.get("PATH", "")}}

# the test's environment (the variable included), with torch and the plugin importable without site
def without_site():
    return {{**os.environ, "PYTHONPATH": {IMPORTABLE_WITHOUT_SITE!r}}}

def python(code, *args, **kwargs):
    subprocess.run([sys.executable, *args, "-c", code], check=True, **kwargs)
'''

SCRUBBED_ENVIRONMENTS = CHILDREN_OUT_OF_REACH + '''
@pytest.mark.max_recompiles(0)
def test_scrubbed_env_escapes():
    python(RECOMPILES, env=SCRUBBED)

@pytest.mark.max_recompiles(0)
def test_scrubbed_env_with_child_env():
    python(RECOMPILES, env=pytest_nocompile.child_env(SCRUBBED))

@pytest.mark.max_recompiles(0)
def test_cleared_environ_with_child_env():
    with mock.patch.dict(os.environ, pytest_nocompile.child_env(SCRUBBED), clear=True):
        python(RECOMPILES)
'''


def test_child_env_brings_a_scrubbed_child_back_under_watch(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scrubbed=SCRUBBED_ENVIRONMENTS)
    result = run()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*_ test_scrubbed_env_with_child_env _*",
                                 "*: 1 recompile > max_recompiles(0) (marker on the test)",
                                 "*_ test_cleared_environ_with_child_env _*",
                                 "*: 1 recompile > max_recompiles(0) (marker on the test)"])


OUT_OF_THE_HOOKS_REACH = CHILDREN_OUT_OF_REACH + '''
@pytest.mark.max_recompiles(0)
def test_no_site_escapes():
    python(RECOMPILES, "-S", env=without_site())

@pytest.mark.max_recompiles(0)
def test_no_site_with_watch_this_process():
    python("import pytest_nocompile; assert pytest_nocompile.watch_this_process()" + RECOMPILES,
           "-S", env=without_site())

@pytest.mark.max_recompiles(0)
def test_scrubbed_env_given_the_directory():
    code = ("import sys, pytest_nocompile; "
            "assert pytest_nocompile.watch_this_process(sys.argv[1])" + RECOMPILES)
    subprocess.run([sys.executable, "-c", code, os.environ["PYTEST_NOCOMPILE_EVENTS"]],
                   env=SCRUBBED, check=True)
'''


def test_watch_this_process_reports_where_the_hook_cannot(
        run: RunPytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_out_of_reach=OUT_OF_THE_HOOKS_REACH)
    result = run()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*_ test_no_site_with_watch_this_process _*",
                                 "*: 1 recompile > max_recompiles(0) (marker on the test)",
                                 "*_ test_scrubbed_env_given_the_directory _*",
                                 "*: 1 recompile > max_recompiles(0) (marker on the test)"])
