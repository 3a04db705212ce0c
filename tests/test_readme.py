"""The README's and docs/'s examples work as written: Python snippets, ini blocks, links, names,
install lines.

Every ```python block of README.md and docs/*.md is run with pytest under the
plugin, as a user would paste it into a test file, unless the line before it
says ``<!-- snippet: fragment -->``. ``<!-- snippet: passed=N -->`` or
``<!-- snippet: failed=N -->`` there says what the run must give; without
one, every test must pass. A new snippet is therefore either run or marked.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import pytest_nocompile
from nocompile_testing import TORCH, RunPytest, expect_lines

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"(?:^<!-- snippet: (?P<note>[^\n]*?) -->\n)?"
                    r"^```(?P<language>\w*)\n(?P<text>.*?)^```$", re.M | re.S)
# What a block's tests must end as, and the torch it holds for ("passed=1 torch>=2.7 torch!=2.10";
# skipped on others).
_NOTE = re.compile(
    r"(?:fragment|(?P<word>passed|failed)=(?P<count>\d+))(?P<torch>(?: torch(?:>=|!=)\d+\.\d+)*)")
_TORCH_CONDITION = re.compile(r"torch(>=|!=)(\d+)\.(\d+)")


@dataclass(frozen=True)
class Block:
    """A fenced block of a Markdown page, and the snippet note on the line before it."""

    page: Path
    line: int
    language: str
    text: str
    note: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def holds_on(self, torch: tuple[int, int]) -> bool:
        """Whether the block's note lets it run on this torch (every condition it names holds)."""
        match = _NOTE.fullmatch(self.note or "")
        conditions = _TORCH_CONDITION.findall(match["torch"]) if match else []
        return all(torch >= (int(major), int(minor)) if op == ">="
                   else torch[:2] != (int(major), int(minor))
                   for op, major, minor in conditions)

    @property
    def file_name(self) -> str:
        """The file it is written to: the one its first line names (``# test_step.py``), else
        test_snippet.py."""
        first = self.text.partition("\n")[0]
        match = re.fullmatch(r"# (test_\w+\.py)", first)
        return match[1] if match else "test_snippet.py"


def blocks(language: str | None = None) -> list[Block]:
    found = []
    for page in DOCS:
        text = page.read_text()
        for match in _FENCE.finditer(text):
            if language is None or match["language"] == language:
                line = text.count("\n", 0, match.start("language")) + 1
                found.append(Block(page, line, match["language"], match["text"], match["note"]))
    return found


def block_containing(needle: str) -> Block:
    (block,) = [block for block in blocks("python") if needle in block.text]
    return block


PYTHON_SNIPPETS = [block for block in blocks("python") if block.note != "fragment"]


def test_every_python_block_is_run_or_marked_a_fragment() -> None:
    notes = {block.name: block.note for block in blocks("python") if block.note is not None}
    assert all(_NOTE.fullmatch(note) for note in notes.values()), notes
    # Every note is read as one: a note the pattern misses would leave its block run as if it had
    # none.
    written = sum(len(re.findall(r"^<!-- snippet: ", page.read_text(), re.M)) for page in DOCS)
    assert written == sum(block.note is not None for block in blocks()), written
    # the README's first test, budgets, fixtures, unittest, ranks, child_env
    assert len(PYTHON_SNIPPETS) >= 5


@pytest.mark.parametrize("block", [
    pytest.param(block, marks=pytest.mark.spawns_ranks) if "mp.spawn(" in block.text else block
    for block in PYTHON_SNIPPETS], ids=lambda block: block.name)
def test_python_snippet_runs_as_written(block: Block, pytester: pytest.Pytester,
                                        run: RunPytest) -> None:
    if not block.holds_on(TORCH):
        pytest.skip(f"{block.name} runs where its note says ({block.note})")
    pytester.makepyfile(**{block.file_name[:-3]: block.text})
    result = run("--strict-markers", "--nocompile-json=nocompile.json")
    note = _NOTE.fullmatch(block.note or "")
    if note is None:
        outcomes = result.parseoutcomes()
        assert (outcomes.get("passed", 0) >= 1
                and not outcomes.keys() - {"passed", "warnings", "warning"}), result.stdout.str()
    else:
        result.assert_outcomes(**{note["word"]: int(note["count"])})
    shown = shown_output_after(block)
    if shown:  # the output the page shows for it
        expect_lines(result, shown)
    # Every field of the JSON report is in the reference's list of them.
    report = json.loads((pytester.path / "nocompile.json").read_text())
    missing = sorted(key for key in json_keys(report)
                     if f"`{key}`" not in reference_section("JSON report"))
    assert missing == []


def shown_output_after(block: Block) -> list[str]:
    """The lines of the ```text block that follows a failing snippet on its page (before any other
    Python block)."""
    if block.note is None or not block.note.startswith("failed"):
        return []
    following = [other for other in blocks()
                 if other.page == block.page and other.line > block.line]
    for other in following:
        if other.language == "python":
            return []
        if other.language == "text":
            return other.text.splitlines()
    return []


def json_keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in json_keys(item)}
    if isinstance(value, list):
        return {key for item in value for key in json_keys(item)}
    return set()


def test_readme_first_test_is_run_and_its_failure_shown() -> None:
    first = blocks("python")[0]
    assert first.page == README and first.file_name == "test_step.py" and first.note == "failed=1"
    assert shown_output_after(first)[0] == "1 recompile > max_recompiles(0) (marker on the test)"
    assert readme_test_command() == "pytest test_step.py"


@pytest.mark.parametrize("block", blocks("ini"), ids=lambda block: block.name)
def test_ini_block_is_a_valid_pytest_ini(block: Block, pytester: pytest.Pytester,
                                         run: RunPytest) -> None:
    pytester.makefile(".ini", pytest=block.text)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    run("--strict-config").assert_outcomes(passed=1)


@pytest.mark.parametrize("block", blocks("json"), ids=lambda block: block.name)
def test_json_block_parses_and_a_baseline_loads(block: Block, tmp_path: Path) -> None:
    document = json.loads(block.text)
    if document.get("format", "").startswith("pytest-nocompile-baseline/"):
        from pytest_nocompile.features.baselines.baseline import load_baseline

        (tmp_path / "base.json").write_text(block.text)
        assert load_baseline(str(tmp_path / "base.json"))


def test_readme_fixture_examples_can_fail(pytester: pytest.Pytester, run: RunPytest) -> None:
    # Same code with a recompile inside the zero-budget block: it must fail.
    broken = block_containing("def test_steady_state").text.replace(
        "            f(torch.ones(2))\n", "            f(torch.ones(2, 2))\n")
    pytester.makepyfile(test_readme_example=broken)
    result = run("-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["E   *RecompileBudgetExceeded: 1 recompile > nocompile_assert_max_recompiles(0)"])


def test_readme_unittest_example_passes_without_the_plugin(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_readme_unittest=block_containing("unittest.TestCase").text)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_readme_unittest_example_can_fail(pytester: pytest.Pytester, run: RunPytest) -> None:
    # A new shape each time round the loop: both the block and the decorated method must fail.
    broken = re.sub(r"^( {12}| {16})self\.f\(torch\.ones\(2\)\)$", r"\1self.f(torch.ones(2 + _))",
                    block_containing("unittest.TestCase").text, flags=re.M)  # the loop bodies only
    pytester.makepyfile(test_readme_unittest=broken)
    result = run("-p", "no:logging")
    result.assert_outcomes(failed=2)
    assert result.stdout.str().count("RecompileBudgetExceeded: ") >= 2


def reference_section(title: str | None = None) -> str:
    """docs/reference.md, or its section of that title."""
    text = (ROOT / "docs" / "reference.md").read_text()
    if title is None:
        return text
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end == -1 else text[start:end]


def test_reference_names_every_option_ini_key_marker_fixture_and_public_name(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    help_text = run("--help").stdout.str()
    group = (help_text.split("torch.compile recompile budgets (pytest-nocompile):\n")[1]
             .split("\n\n")[0])
    options = set(re.findall(r"^\s+(--[\w-]+)", group, flags=re.M))
    # A short key's help starts on its own line (max_syncs), a longer one's on the next.
    ini_keys = {name for name, description in re.findall(r"^  (\w+) \(\w+\):(.*\n(?:^ {20,}.*\n)*)",
                                                         help_text, flags=re.M)
                if "[pytest-nocompile]" in description}
    markers = set(re.findall(r"^@pytest\.mark\.((?:max|min|nocompile)_\w+|"
                             r"dynamic_dims|same_across_ranks)[(:]", run("--markers").stdout.str(),
                             flags=re.M))
    fixtures = set(re.findall(r"^(nocompile_\w+)", run("--fixtures").stdout.str(), flags=re.M))
    assert len(options) == 26 and len(ini_keys) == 19 and len(markers) == 13 and len(fixtures) == 13
    reference = reference_section()
    public = set(pytest_nocompile.__all__)
    missing = sorted(name for name in options | ini_keys | markers | fixtures | public
                     if f"`{name}" not in reference)
    assert missing == []
    # And the other way: every option the README and docs name exists.
    named = {option for page in DOCS
             for option in re.findall(r"--(?:nocompile|max|min)-[\w-]*\w", page.read_text())}
    assert sorted(named - options) == []


_LINK = re.compile(r"\]\((?!https?://)(?P<target>[^)#\s]*)(?:#(?P<anchor>[^)\s]+))?\)")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub and MkDocs make them."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_relative_links_resolve() -> None:
    broken = []
    for page in DOCS:
        for match in _LINK.finditer(page.read_text()):
            target = (page.parent / match["target"]).resolve() if match["target"] else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {match[0]}")
            elif match["anchor"] and (target.suffix != ".md"
                                      or match["anchor"] not in anchors(target)):
                broken.append(f"{page.relative_to(ROOT)}: {match[0]} (no such heading)")
    assert broken == []


def test_readme_is_short() -> None:
    assert len(README.read_bytes()) <= 12_000  # the rest belongs in docs/


def test_readme_ranks_example_fails_naming_rank_1(pytester: pytest.Pytester,
                                                  run: RunPytest) -> None:
    # The snippet as written passes (test_python_snippet_runs_as_written); with n = 2 rank 1
    # recompiles.
    block = block_containing("def test_ranks_do_not_recompile")
    pytester.makepyfile(test_ranks=block.text.replace('"store"), 1)', '"store"), 2)'))
    result = run()
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "rank 1 (pid *, multiprocessing SpawnProcess-*): 1 recompile > max_recompiles(0) "
        "(marker on the test)",
        "[1/1] recompiled <lambda> (test_ranks.py:9)",
        "    guard failed: 0/0: n == 1",
    ])
    result.stdout.fnmatch_lines(["    triggered by: test_ranks.py:11 in worker: f(torch.ones(2), "
                                 "n if rank == 1 else 1)  # rank 1*"])


# Install lines: every `pip install` / `pip wheel` line of a console or yaml block.
_INSTALL = re.compile(r"^(?:\$ |- run: )?(?P<command>pip (?:install|wheel) .*)$", re.M)
# The git URL the docs give is a form, not an address; the test puts a local clone in its place.
GIT_FORM = "git+https://git.example.com/your-team/pytest-nocompile.git"


def install_lines() -> list[str]:
    lines: list[str] = []
    for block in blocks():
        if block.language in ("console", "yaml", "shell", "bash", "sh"):
            lines += [match["command"] for match in _INSTALL.finditer(block.text)
                      if match["command"] not in lines]
    return lines


def readme_test_command() -> str:
    """The command the README runs its first test with."""
    (command,) = re.findall(r"^\$ (pytest .*)$", README.read_text(), flags=re.M)
    return command


def test_install_lines_are_found() -> None:
    lines = install_lines()
    assert lines[0] == "pip install ./pytest-nocompile"  # the README's
    assert (any(GIT_FORM in line for line in lines)
            and any(line.startswith("pip wheel") for line in lines))
    assert all("pytest-nocompile" in line or "pytest_nocompile" in line for line in lines)


def copy_of_this_checkout(destination: Path) -> None:
    """The files of this working tree a clone would have (tracked, or new and not ignored), as a git
    repository."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *command], cwd=destination, check=True, capture_output=True)


# The new venv's own: pip installs a newer setuptools there if torch needs one,
# as it did when it installed torch.
VENV_SEED_DISTRIBUTIONS = frozenset({"pip", "setuptools"})


def share_installed_torch(site_packages: Path, folder: Path) -> None:
    """Make this run's torch and what it needs installed in the venv of ``site_packages``, uncopied.

    ``folder`` gets a link to each top-level entry of those distributions (packages,
    modules, ``.dist-info``), and a ``.pth`` file in the venv puts it on ``sys.path``,
    where pip finds the distributions installed. pip installing the same torch again,
    about 1 GB unpacked, was most of this test's time on a busy machine (about 120 s of
    wall time), and it is not what the test checks: the install lines are.
    """
    folder.mkdir()
    # One link for each entry: distributions may share a namespace folder (the CUDA wheels'
    # nvidia-* all install into nvidia/).
    tops = {top: Path(str(distribution.locate_file(top)))
            for distribution in installed_requirements("torch")
            for top in {Path(str(file)).parts[0] for file in distribution.files or []}}
    for top, target in tops.items():
        if top not in ("..", "__pycache__"):
            (folder / top).symlink_to(target)
    (site_packages / "torch-of-this-run.pth").write_text(f"{folder}\n")


def installed_requirements(name: str) -> list[importlib.metadata.Distribution]:
    """The installed distribution ``name`` and those it requires, transitively, as pip reads it."""
    found: dict[str, importlib.metadata.Distribution] = {}
    wanted = [name]
    while wanted:
        key = canonicalize_name(wanted.pop())
        if key in found or key in VENV_SEED_DISTRIBUTIONS:
            continue
        distribution = found[key] = importlib.metadata.distribution(key)
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return list(found.values())


@pytest.mark.install
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs git and a git checkout")
def test_install_lines_work_as_written_in_a_fresh_venv(tmp_path: Path) -> None:
    """Each install line, run by bash in a fresh venv from a folder holding ./pytest-nocompile,
    installs a working plugin.

    The venv first gets this run's torch, installed (:func:`share_installed_torch`):
    the docs tell users to install their torch first, and left to itself pip
    would fetch the newest, several GB. Then, line by
    line: uninstall the plugin; the line as written (a ``pip wheel`` line
    just runs: the next line installs what it built); ``pytest --nocompile-check-hook`` (the plugin
    loads, and its start-up hook is live); after the first line, the
    README's own test command on the README's first test, which must fail
    as the README shows.
    """
    project = tmp_path / "project"
    clone = project / "pytest-nocompile"
    clone.mkdir(parents=True)
    copy_of_this_checkout(clone)
    (project / "test_step.py").write_text(blocks("python")[0].text)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    timings: list[str] = []

    def shell(command: str, expect: int = 0) -> str:
        started = time.monotonic()
        done = subprocess.run(["bash", "-c", command], cwd=project, env=env,
                              capture_output=True, text=True, timeout=600)
        timings.append(f"{time.monotonic() - started:6.1f} s  {command}")
        print(timings[-1])
        assert done.returncode == expect, (
            f"{command}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done.stdout

    try:
        site_packages = Path(shell(
            "python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'").strip())
        share_installed_torch(site_packages, tmp_path / "torch-of-this-run")
        installed = shell("python -m pip list --format=freeze")
        assert installed.count(f"torch=={importlib.metadata.version('torch')}") == 1
        for number, line in enumerate(install_lines()):
            if line.startswith("pip wheel"):  # builds what the next line installs
                shell(line)
                continue
            # Each install on its own: uninstall what the last one installed, and the folder pip
            # leaves behind (pytest's rewritten .pyc files), which would hide an editable install
            # (docs/troubleshooting.md).
            shell("python -m pip uninstall --quiet --yes pytest-nocompile")
            shutil.rmtree(site_packages / "pytest_nocompile", ignore_errors=True)
            shell(line.replace(GIT_FORM, f"git+file://localhost{clone}"))
            assert "start-up hook live in" in shell("pytest --nocompile-check-hook")
            if number == 0:
                output = shell(readme_test_command(), expect=1)
                result = pytest.RunResult(1, output.splitlines(), [], 0.0)
                expect_lines(result, shown_output_after(blocks("python")[0]))
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # about 1 GB with torch
        print("\n".join(timings))
