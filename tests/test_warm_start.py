"""The ``nocompile_warm_start`` fixture: a user's code cold, then warm, in two fresh processes
sharing a private cache.

One test compiles for real with inductor (the cache outcomes exist only
there: ~10-50 s cold on a loaded 2-core CPU); the others use the eager
backend, which compiles and recompiles like inductor at a fraction of the
time but keeps no cache.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nocompile_testing import TORCH, RunPytest, expect_lines

pytest.importorskip("torch")
# Older torch is refused with a message naming 2.5 (test_cache_misses.py checks it).
pytestmark = pytest.mark.skipif(TORCH < (2, 5), reason="nocompile_warm_start needs torch >= 2.5")


def passed(result: pytest.RunResult, count: int = 1) -> None:
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed") == count
            and not {"failed", "errors", "error"} & outcomes.keys()), result.stdout.str()


def test_the_cold_run_misses_the_cache_and_the_warm_run_hits_it_and_misses_nothing(
        pytester: pytest.Pytester, run: RunPytest, monkeypatch: pytest.MonkeyPatch,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # The temp folder where torch keeps the user's own cache (torchinductor_<user>) unless told
    # otherwise.
    users_temp = tmp_path_factory.mktemp("users-temp")
    monkeypatch.setenv("TMPDIR", str(users_temp))
    pytester.makepyfile(test_warm='''
        import json, os
        from pathlib import Path
        import torch

        def add_one():
            # inductor: the FX-graph and AOT-autograd caches
            torch.compile(lambda x: x + 1)(torch.ones(2))

        def test_warm_start(nocompile_warm_start):
            cold, warm = nocompile_warm_start(add_one)
            Path("runs.json").write_text(json.dumps({run.name: vars(run) for run in (cold, warm)}))
            Path("user_cache.txt").write_text(os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""))
    ''')
    passed(run(f"--basetemp={pytester.path / 'basetemp'}"))
    runs = json.loads((pytester.path / "runs.json").read_text())
    cold, warm = runs["cold"], runs["warm"]
    # figures, with -s
    print({name: {key: value for key, value in run.items() if key != "output"}
           for name, run in runs.items()})
    assert ((cold["compiles"], cold["recompiles"], warm["compiles"], warm["recompiles"])
            == (1, 0, 1, 0))
    # An FX graph and, where the AOTAutograd cache is on by default (torch >= 2.7), its entry there
    # too.
    caches = (("inductor.fxgraph_cache", "aot_autograd.autograd_cache") if TORCH >= (2, 7)
              else ("inductor.fxgraph_cache",))
    assert cold["cache_misses"] >= len(caches) and cold["cache_hits"] == 0
    assert (warm["cache_misses"] == 0 and warm["cache_hits"] == cold["cache_misses"]
            and warm["cache_bypasses"] == 0)
    assert {f"{cache}_miss" for cache in caches} <= cold["signals"].keys()
    assert {f"{cache}_hit" for cache in caches} <= warm["signals"].keys()
    assert 0 < warm["compile_seconds"] < cold["compile_seconds"] < cold["seconds"]
    # The cache the two runs shared is the call's own folder, and it was used; the test's
    # environment is untouched.
    # pytest numbers the folders of mktemp
    folder = pytester.path / "basetemp" / "nocompile-warm-start0"
    assert any((folder / "caches" / "inductor").rglob("*"))
    assert ((pytester.path / "user_cache.txt").read_text()
            == os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""))
    assert list(users_temp.glob("torchinductor_*")) == []


WHAT_RUNS_SEE = '''
import json, os, sys
import torch

VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TMPDIR",
        "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE")

def scale(x, n):
    return x * n

def broken(x):
    x = x + 1
    print("a graph break")
    return x * 2

def step():
    print(json.dumps({name: os.environ.get(name) for name in VARS}))
    f = torch.compile(scale, backend="eager")
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)  # a recompile
    torch.compile(broken, backend="eager")(torch.ones(2))
'''


def test_each_run_counts_what_its_process_compiled_and_each_call_has_caches_of_its_own(
        pytester: pytest.Pytester, run: RunPytest) -> None:
    pytester.makepyfile(steps=WHAT_RUNS_SEE, test_runs='''
        import json
        from pathlib import Path
        from pytest_nocompile import CompileRun, WarmStart
        from steps import step

        def seen(run):
            return json.loads(next(line for line in run.output.splitlines()
                                   if line.startswith("{")))

        def test_runs(nocompile_warm_start):
            first = nocompile_warm_start(step)
            assert isinstance(first, WarmStart) and isinstance(first.cold, CompileRun)
            assert [run.name for run in first] == ["cold", "warm"]
            for run in first:
                # scale: a compile and a recompile; broken: 2 graphs around its graph break
                assert ((run.compiles, run.recompiles, run.graph_breaks, run.recompile_limit_hits)
                        == (4, 1, 1, 0))
                # the eager backend caches nothing
                assert (run.cache_hits, run.cache_misses, run.cache_bypasses) == (0, 0, 0)
                assert run.seconds > 0 and "a graph break" in run.output
            second = nocompile_warm_start("steps:step")
            assert second.cold.recompiles == 1
            Path("seen.json").write_text(json.dumps([seen(run) for run in (*first, *second)]))
    ''')
    basetemp = pytester.path / "basetemp"
    # the runs' recompiles are theirs, not the test's
    passed(run(f"--basetemp={basetemp}", "--max-recompiles=0"))
    first_cold, first_warm, second_cold, second_warm = json.loads(
        (pytester.path / "seen.json").read_text())
    assert first_cold == first_warm and second_cold == second_warm
    assert first_cold["TORCHINDUCTOR_CACHE_DIR"] != second_cold["TORCHINDUCTOR_CACHE_DIR"]
    for seen in (first_cold, second_cold):
        for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TMPDIR"):
            assert Path(seen[name]).is_relative_to(basetemp.resolve())
        assert seen["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"] == "0"


def test_a_run_that_hits_the_recompile_limit_says_so(pytester: pytest.Pytester,
                                                     run: RunPytest) -> None:
    pytester.makepyfile(test_limit='''
        import torch

        def scale(x, n):
            return x * n

        def every_int():
            f = torch.compile(scale, backend="eager", dynamic=False)  # a recompile for each new int
            for n in range(12):
                f(torch.ones(2), n)

        def test_limit(nocompile_warm_start):
            cold, warm = nocompile_warm_start(every_int)
            assert cold.recompile_limit_hits >= 1 and warm.recompile_limit_hits >= 1
            assert cold.compiles < 12  # past the limit, scale ran without compiling
    ''')
    passed(run())


def test_a_script_runs_as_python_runs_it(pytester: pytest.Pytester, run: RunPytest) -> None:
    (pytester.path / "scripts").mkdir()
    (pytester.path / "scripts" / "train.py").write_text(
        WHAT_RUNS_SEE + '\nif __name__ == "__main__":\n    step()\n')
    pytester.makepyfile(test_script='''
        def test_script(nocompile_warm_start):
            cold, warm = nocompile_warm_start("scripts/train.py")
            assert (cold.compiles, cold.recompiles, warm.recompiles) == (4, 1, 1)
    ''')
    passed(run())


def test_a_failing_run_fails_the_test_with_the_end_of_its_traceback(pytester: pytest.Pytester,
                                                                    run: RunPytest) -> None:
    pytester.makepyfile(test_fails='''
        def load_weights():
            raise FileNotFoundError("weights.pt")

        def step():
            load_weights()

        def test_fails(nocompile_warm_start):
            nocompile_warm_start(step)
    ''')
    result = run()
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "E       pytest_nocompile.exceptions.WarmStartFailed: nocompile_warm_start: "
        "the cold run of test_fails.step failed (exit status 1); its output ends:",
        "E           Traceback (most recent call last):",
        f'E             File "{pytester.path / "test_fails.py"}", line 5, in step',
        "E               load_weights()",
        f'E             File "{pytester.path / "test_fails.py"}", line 2, in load_weights',
        'E               raise FileNotFoundError("weights.pt")',
        "E           FileNotFoundError: weights.pt",
        "",
        "test_fails.py:8: WarmStartFailed",
    ])


def test_a_run_past_its_timeout_is_stopped_and_fails_the_test_with_what_it_wrote(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_slow='''
        import time

        def wait():
            print("loading the dataset", flush=True)
            time.sleep(30)

        def test_slow(nocompile_warm_start):
            nocompile_warm_start(wait, timeout=2)
    ''')
    result = run()
    result.assert_outcomes(failed=1)
    expect_lines(result, [
        "E       pytest_nocompile.exceptions.WarmStartFailed: nocompile_warm_start: "
        "the cold run of test_slow.wait did not end within 2 s; its output ends:",
        "E           loading the dataset",
    ])
    assert result.duration < 25


def test_what_a_fresh_process_cannot_find_is_refused_before_anything_runs(pytester: pytest.Pytester,
                                                                          run: RunPytest) -> None:
    pytester.makepyfile(test_refused='''
        import pytest

        def test_refused(nocompile_warm_start):
            def inner():
                pass
            for target, message in ((inner, "is not a top-level function of an importable module"),
                                    (lambda: None, "is not a top-level function"),
                                    ("missing.py", "no script at missing.py"),
                                    ("no_colon",
                                     "is neither 'module:function' nor a script's path")):
                with pytest.raises(ValueError, match=message):
                    nocompile_warm_start(target)
    ''')
    passed(run())
