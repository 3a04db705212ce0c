"""Record dynamo's recompile messages from the installed torch, as parser test data.

    python tests/data/record_messages.py OUT_DIR [--kinds KIND,KIND,...]

writes, for the installed torch ``<major.minor>``:

``torch-<X.Y>-recompiles.txt`` and ``..._verbose.txt``
    the two recompile logging artifacts, for the same scenarios: a Python int
    argument, a dtype change, a requires_grad flip, a float LR changed by a
    scheduler, and an optimizer that was deallocated. Each runs in a fresh
    process so that compile ids are comparable between the two files.
``torch-<X.Y>-dynamic_sizes.txt``
    the recompiles artifact for sizes: a function compiled with
    ``dynamic=True`` called with sizes 4, 5, 0 and 1 (dynamo's own 0/1
    specialisation), one that branches on a size (``if x.shape[0] == 3``)
    called with 4 and 3, a Python loop over a size under ``dynamic=True``
    (the user's code specialises it), and automatic dynamic (no
    ``dynamic=``) on a function and on a module's ``forward`` called with
    4 and 8.
``torch-<X.Y>-compiled_modules.txt``
    the recompiles artifact for modules compiled whole, whose ``forward``
    is torch's (dynamo compiles its wrapper ``inner`` and names the
    arguments ``args[0]``, ``kwargs['name']``, the module ``fn``): an
    ``nn.Sequential`` called with an input that requires grad, then with a
    new size; an ``nn.Linear`` compiled after it, which shares the wrapper's
    code (a guard on ``fn``); an ``nn.MultiheadAttention`` called with
    ``need_weights=`` True, then False (a keyword argument).
``torch-<X.Y>-limit.txt``
    every record of WARNING and above on ``torch._dynamo.convert_frame`` while
    frames go past a recompile limit of 2 (``recompile_limit``, called
    ``cache_size_limit`` in older torch): an int argument taking the values
    0..5 (newer torch makes it dynamic first, so it may not reach the limit)
    and a dtype changing six times.
``torch-<X.Y>-graph_breaks.txt``
    the ``graph_breaks`` artifact's messages (every ``*.__graph_breaks``
    logger) for a ``print``, a ``torch._dynamo.graph_break()``, a call to a
    builtin dynamo cannot trace (``os.getpid``) and a data-dependent branch.
``torch-<X.Y>-capabilities.json``
    facts probed from that torch: which config names, loggers and internals
    the plugin relies on exist, how dynamo's counters move on a compile, what
    imports ``torch._dynamo``, the recompile-limit warning and the exception
    ``error_on_recompile`` raises.

``--kinds`` limits the output to some of ``recompiles``,
``recompiles_verbose``, ``limit``, ``graph_breaks``, ``capabilities``.
Message files hold one message per block, blocks separated by lines of
``=====``, after ``#`` header lines. Every scenario runs in a fresh process,
from a real temporary file, so that torch can quote its source lines.
"""

from __future__ import annotations

import json
import logging
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

KINDS = ("recompiles", "recompiles_verbose", "dynamic_sizes", "compiled_modules", "limit",
         "graph_breaks", "capabilities")
# Recorded on the torch versions at hand when the kind was added, not on every one: dynamic_sizes on
# 2.4, 2.6, 2.11, 2.13, 2.14; compiled_modules on 2.4, 2.13, 2.15.
PARTIAL_KINDS = ("dynamic_sizes", "compiled_modules")
LIMIT = 2  # the recompile limit the limit scenario runs under
LIMIT_LOGGER = "torch._dynamo.convert_frame"

SCENARIOS = '''
import torch

def scale(x, n):
    return x * n

f = torch.compile(scale, backend="eager")
f(torch.ones(3), 2)
f(torch.ones(3), 3)                        # int argument
f(torch.ones(3, dtype=torch.float64), 3)   # dtype

g = torch.compile(lambda x: x + 1, backend="eager")
x = torch.ones(2)
g(x)
g(x.clone().requires_grad_())              # requires_grad

model = torch.nn.Linear(3, 3)
model(torch.ones(3)).sum().backward()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.LinearLR(opt, total_iters=5)

@torch.compile(backend="eager")
def step():
    opt.step()
    sched.step()

for _ in range(3):
    step()                                 # float LR

def fresh_optimizer_step():
    o = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    torch.compile(o.step, backend="eager")()

fresh_optimizer_step()
fresh_optimizer_step()                     # deallocated optimizer
'''

DYNAMIC_SIZE_SCENARIOS = '''
import torch

def plain(x, y):
    return x * 2 + y.sum()

def branchy(x):
    if x.shape[0] == 3:
        return x + 1
    return x * 2

def loops(x):
    out = x
    for i in range(x.shape[0]):
        out = out + i
    return out

class Doubler(torch.nn.Module):
    def forward(self, x):
        return x * 2

f = torch.compile(plain, backend="eager", dynamic=True)
for n in (4, 5, 0, 1):
    f(torch.ones(n), torch.ones(3))        # 0, 1: dynamo's own 0/1 specialisation
torch._dynamo.reset()
g = torch.compile(branchy, backend="eager", dynamic=True)
for n in (4, 3):
    g(torch.ones(n))                       # 3: the user's branch on the size
torch._dynamo.reset()
h = torch.compile(loops, backend="eager", dynamic=True)
for n in (4, 5):
    h(torch.ones(n))                       # 5: range(x.shape[0]) specialised the size
torch._dynamo.reset()
a = torch.compile(plain, backend="eager")
for n in (4, 8):
    a(torch.ones(n), torch.ones(3))        # 8: automatic dynamic, the dim compiled static at first
torch._dynamo.reset()
m = torch.compile(Doubler(), backend="eager")
for n in (4, 8):
    m(torch.ones(n))                       # 8: the same, through a module's forward
'''

COMPILED_MODULE_SCENARIOS = ('''
import torch
from torch import nn

seq = torch.compile(nn.Sequential(nn.Linear(3, 3), nn.ReLU()), backend="eager")
seq(torch.ones(2, 3))
seq(torch.ones(2, 3, requires_grad=True))  # the input requires grad
seq(torch.ones(5, 3))                      # a new size: automatic dynamic
lin = torch.compile(nn.Linear(3, 3), backend="eager")
'''
'lin(torch.ones(2, 3))                      # another module through the same wrapper code: '
'a guard on fn\n'
'''torch._dynamo.reset()
attention = torch.compile(nn.MultiheadAttention(4, 1), backend="eager")
q = torch.ones(2, 1, 4)
attention(q, q, q, need_weights=True)
attention(q, q, q, need_weights=False)     # a keyword argument
''')

LIMIT_SCENARIO = ('''
import torch

h = torch.compile(lambda x, n: x * n, backend="eager")
for n in range(6):
'''
'    h(torch.ones(3), n)                    # int argument: newer torch makes n dynamic before '
'the limit\n'
'''
d = torch.compile(lambda x: x + 1, backend="eager")
'''
'for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, '
'torch.int64):\n'
'''    d(torch.ones(3, dtype=dtype))          # dtype: never dynamic, always past the limit
''')

GRAPH_BREAK_SCENARIOS = '''
import os
import torch

def with_print(x):
    x = x + 1
    print("side effect")
    return x * 2

def with_graph_break(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2

def with_builtin(x):
    x = x + 1
    os.getpid()
    return x * 2

def with_branch(x):
    x = x + 1
    if x.sum() > 0:
        return x * 2
    return x - 1

for fn in (with_print, with_graph_break, with_builtin, with_branch):
    torch.compile(fn, backend="eager")(torch.ones(3))
'''

# Counters, compilation metrics and error_on_recompile, probed in one process.
PROBE_SCENARIO = '''
import torch
from torch._dynamo.utils import counters

def snap():
    return int(counters["frames"]["total"]), int(counters["stats"]["unique_graphs"])

def delta(before, after):
    return {"frames.total": after[0] - before[0], "stats.unique_graphs": after[1] - before[1]}

def kscale(x, n):
    return x * n

k = torch.compile(kscale, backend="eager")
s0 = snap()
k(torch.ones(3), 2)
s1 = snap()
k(torch.ones(3), 3)                        # recompile
s2 = snap()

def whole(x):
    return x.sin() + 1

w = torch.compile(whole, backend="eager", fullgraph=True)
s3 = snap()
w(torch.ones(3))
s4 = snap()
RESULT["counters_delta"] = {
    "compile": delta(s0, s1),
    "recompile": delta(s1, s2),
    "fullgraph_compile": delta(s3, s4),
}

def estrict(x, n):
    return x + n

torch._dynamo.config.error_on_recompile = True
e = torch.compile(estrict, backend="eager")
e(torch.ones(3), 2)
try:
    e(torch.ones(3), 3)
except Exception as error:
    RESULT["error_on_recompile_exception"] = {
        "name": type(error).__name__,
        "module": type(error).__module__,
        "mro": [c.__name__ for c in type(error).__mro__],
        "message_first_line": str(error).splitlines()[0] if str(error) else "",
    }
else:
    RESULT["error_on_recompile_exception"] = None
finally:
    torch._dynamo.config.error_on_recompile = False
'''


def _run_scenario(source: str, namespace: dict | None = None) -> str | None:
    """Run ``source`` from a real temporary file; return the error it raised, if any."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "record_scenarios.py"
        script.write_text(source)  # a real file, so torch can quote source lines
        try:
            runpy.run_path(str(script), init_globals=namespace)
        except Exception as error:  # recorded in the output's header, not fatal
            return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return None


class _Keep(logging.Handler):
    def __init__(self, messages: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _enable_artifact(artifact: str) -> None:
    import torch._logging._internal as torch_logging

    if hasattr(torch_logging.log_state, "enable_artifact"):
        torch_logging.log_state.enable_artifact(artifact)
    else:  # not seen so far; set_logs is the public way
        import torch._logging

        torch._logging.set_logs(**{artifact: True})


def _keep_loggers(names: list[str], messages: list[str]) -> None:
    for name in names:
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(_Keep(messages))


def _artifact_loggers(suffix: str) -> list[str]:
    return sorted(name for name in logging.root.manager.loggerDict if name.endswith(suffix))


def record(artifact: str, scenarios: str = SCENARIOS) -> dict:
    """Run the scenarios in this process with ``artifact`` enabled; return the messages."""
    import torch._dynamo.guards  # noqa: F401  (configure its loggers before enabling)

    messages: list[str] = []
    _enable_artifact(artifact)
    _keep_loggers(["torch._dynamo.guards.__recompiles",
                   "torch._dynamo.guards.__recompiles_verbose"], messages)
    error = _run_scenario(scenarios)
    return {"messages": messages, "error": error}


def _set_limit(value: int) -> list[str]:
    """Set the recompile limit under whichever name(s) this torch has; return the names set."""
    import torch._dynamo.config as config

    names = [name for name in ("recompile_limit", "cache_size_limit") if hasattr(config, name)]
    for name in names[:1]:  # the newer name; the older one is an alias of it where both exist
        setattr(config, name, value)
    return names[:1]


class _WarningSpy:
    """Every record of WARNING and above that any ``torch`` logger handles, wherever it goes."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self._handle = logging.Logger.handle
        spy = self

        def handle(logger: logging.Logger, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING and record.name.startswith("torch"):
                spy.records.append({"logger": record.name, "level": record.levelname,
                                    "message": record.getMessage()})
            spy._handle(logger, record)

        logging.Logger.handle = handle  # type: ignore[method-assign,assignment]


def record_limit() -> dict:
    """Run the limit scenario; return the WARNING+ records of every torch logger and Python
    warnings."""
    import warnings

    import torch._dynamo.convert_frame  # noqa: F401

    limit_names = _set_limit(LIMIT)
    spy = _WarningSpy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        error = _run_scenario(LIMIT_SCENARIO)
    return {
        "records": spy.records,
        "python_warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
        "limit_config": limit_names,
        "error": error,
    }


def record_graph_breaks() -> dict:
    import torch._dynamo.convert_frame
    import torch._dynamo.exc
    import torch._dynamo.symbolic_convert  # noqa: F401

    messages: list[str] = []
    loggers = _artifact_loggers("__graph_breaks")
    _enable_artifact("graph_breaks")
    _keep_loggers(loggers, messages)
    error = _run_scenario(GRAPH_BREAK_SCENARIOS)
    return {"messages": messages, "loggers": loggers, "error": error}


class _ImportSpy:
    """Remember where ``torch._dynamo`` was first imported from."""

    def __init__(self) -> None:
        self.first: dict | None = None
        sys.meta_path.insert(0, self)

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name == "torch._dynamo" and self.first is None:
            import traceback

            stack = [
                frame
                for frame in traceback.extract_stack()[:-1]
                if not frame.filename.startswith("<frozen") and "importlib" not in frame.filename
            ]
            self.first = {"chain": [_where(frame) for frame in stack[-4:]]}
            self.first["importer"] = self.first["chain"][-1] if self.first["chain"] else None
        return None


def _where(frame: object) -> str:
    filename = frame.filename  # type: ignore[attr-defined]
    marker = "site-packages" + os.sep
    short = filename.split(marker, 1)[1] if marker in filename else filename
    if short.endswith("record_messages.py") or "record_scenarios" in short:
        short = "<recorder>"
    return f"{short}:{frame.lineno} in {frame.name}"  # type: ignore[attr-defined]


def probe_import_torch() -> dict:
    """In a fresh process: does ``import torch`` alone import dynamo?"""
    spy = _ImportSpy()
    import torch  # noqa: F401

    return {"dynamo_after_import_torch": "torch._dynamo" in sys.modules, "importer": spy.first}


def probe_import_compile() -> dict:
    """In a fresh process: does ``torch.compile(f)`` import dynamo, or only the first call?"""
    import torch

    after_import = "torch._dynamo" in sys.modules
    spy = _ImportSpy()

    def f(x):
        return x + 1

    compiled = torch.compile(f, backend="eager")
    after_compile = "torch._dynamo" in sys.modules
    compile_importer = spy.first
    compiled(torch.ones(2))
    return {
        "dynamo_after_import_torch": after_import,
        "dynamo_after_torch_compile": after_compile,
        "dynamo_after_first_call": "torch._dynamo" in sys.modules,
        "first_importer": compile_importer if after_compile else spy.first,
        "first_imported_by": ("torch.compile(f)" if after_compile
                              else "first call of the compiled f"),
    }


def _config_value(config: object, name: str) -> object:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(config, name) if hasattr(config, name) else None


def probe() -> dict:
    """Facts about the installed torch the plugin relies on."""
    import dataclasses

    import torch
    import torch._dynamo
    import torch._dynamo.config as config
    import torch._dynamo.convert_frame
    import torch._dynamo.exc
    import torch._dynamo.guards
    import torch._dynamo.symbolic_convert
    import torch._dynamo.utils as dynamo_utils
    import torch._guards
    import torch._logging._internal as torch_logging

    facts: dict = {"torch_version": torch.__version__}
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        facts[f"config.{name}"] = {"exists": hasattr(config, name),
                                   "default": _config_value(config, name)}
    if hasattr(config, "recompile_limit") and hasattr(config, "cache_size_limit"):
        config.recompile_limit = 123
        facts["cache_size_limit_aliases_recompile_limit"] = (
            _config_value(config, "cache_size_limit") == 123)
        config.recompile_limit = facts["config.recompile_limit"]["default"]
    facts["config.error_on_recompile"] = {
        "exists": hasattr(config, "error_on_recompile"),
        "default": _config_value(config, "error_on_recompile"),
    }
    facts["torch.compiler.set_stance"] = hasattr(torch.compiler, "set_stance")
    facts["CompileContext.current_compile_id"] = hasattr(torch._guards.CompileContext,
                                                         "current_compile_id")
    facts["get_compilation_metrics"] = hasattr(dynamo_utils, "get_compilation_metrics")
    facts["foreach_map"] = _has_foreach_map()
    facts["log_state"] = {
        name: hasattr(torch_logging.log_state, name)
        for name in ("is_artifact_enabled", "enable_artifact", "artifact_names")
    }
    facts["log_registry.artifact_names"] = hasattr(getattr(torch_logging, "log_registry", None),
                                                   "artifact_names")
    facts["artifact_loggers"] = {
        suffix: _artifact_loggers(suffix)
        for suffix in ("__recompiles", "__recompiles_verbose", "__graph_breaks")
    }

    result: dict = {}
    facts["probe_error"] = _run_scenario(PROBE_SCENARIO, {"RESULT": result})
    facts.update(result)
    if facts["get_compilation_metrics"]:
        metrics = list(dynamo_utils.get_compilation_metrics())
        facts["compilation_metrics"] = {"entries": len(metrics)}
        if metrics:
            entry = metrics[-1]
            if dataclasses.is_dataclass(entry):
                fields = [field.name for field in dataclasses.fields(entry)]
            else:
                fields = list(getattr(entry, "_fields", None) or vars(entry))
            facts["compilation_metrics"]["fields"] = fields
            facts["compilation_metrics"]["has_recompile_reason"] = "recompile_reason" in fields
            facts["compilation_metrics"]["recompile_reasons"] = [
                str(getattr(m, "recompile_reason", None)) for m in metrics
                if getattr(m, "recompile_reason", None)
            ]
    return facts


def _has_foreach_map() -> bool:
    try:
        import torch._higher_order_ops as hops
    except ImportError:
        return False
    return hasattr(hops, "foreach_map")


CHILDREN = {
    "recompiles": lambda: record("recompiles"),
    "recompiles_verbose": lambda: record("recompiles_verbose"),
    "dynamic_sizes": lambda: record("recompiles", DYNAMIC_SIZE_SCENARIOS),
    "compiled_modules": lambda: record("recompiles", COMPILED_MODULE_SCENARIOS),
    "limit": record_limit,
    "graph_breaks": record_graph_breaks,
    "probe": probe,
    "probe_import_torch": probe_import_torch,
    "probe_import_compile": probe_import_compile,
}


def _child(name: str) -> dict:
    """Run ``name`` in a fresh interpreter; return the JSON it wrote."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("TORCH_LOGS", "TORCH_COMPILE_DEBUG")}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "result.json"
        subprocess.run([sys.executable, __file__, "--child", name, str(out)], check=True,
                       capture_output=True, env=env)
        return json.loads(out.read_text())


def _blocks(messages: list[str]) -> str:
    return "".join(f"=====\n{message}\n" for message in messages)


def _device() -> str:
    import torch

    try:
        if torch.cuda.is_available():
            return f"an {torch.cuda.get_device_name(0)}"
    except Exception:
        pass
    return "CPU"


def _write(path: Path, header: list[str], messages: list[str], error: str | None) -> None:
    if error:
        header = [*header, f"# The scenarios stopped early: {error}"]
    header = [*header,
              "# One recorded dynamo message per block, blocks separated by lines of '=====':"]
    path.write_text("".join(f"{line}\n" for line in header) + _blocks(messages))
    print(f"wrote {path} ({len(messages)} messages)")


def main(out_dir: Path, kinds: tuple[str, ...]) -> None:
    import torch

    version = ".".join(torch.__version__.split(".")[:2])
    on = f"{torch.__version__} on {_device()}"
    limit: dict | None = None
    for kind in kinds:
        if kind in ("recompiles", "recompiles_verbose"):
            result = _child(kind)
            header = [f"# torch {on}, {kind} artifact, recorded by tests/data/record_messages.py"]
            _write(out_dir / f"torch-{version}-{kind}.txt", header,
                   result["messages"], result["error"])
        elif kind == "dynamic_sizes":
            result = _child(kind)
            header = [f"# torch {on}, recompiles artifact for sizes, "
                      "recorded by tests/data/record_messages.py",
                      "# Scenarios: dynamic=True over 4, 5, 0, 1; `if x.shape[0] == 3` over 4, 3; "
                      "range(x.shape[0]) over 4, 5;",
                      "# automatic dynamic over 4, 8 on a function, then on a module's forward; "
                      "backend eager"]
            _write(out_dir / f"torch-{version}-{kind}.txt", header,
                   result["messages"], result["error"])
        elif kind == "compiled_modules":
            result = _child(kind)
            header = [f"# torch {on}, recompiles artifact for modules compiled whole, "
                      "recorded by tests/data/record_messages.py",
                      "# Scenarios: nn.Sequential (input requiring grad, then a new size), "
                      "nn.Linear through the same wrapper code,",
                      "# nn.MultiheadAttention with need_weights=True, then False; backend eager"]
            _write(out_dir / f"torch-{version}-{kind}.txt", header,
                   result["messages"], result["error"])
        elif kind == "graph_breaks":
            result = _child(kind)
            header = [
                f"# torch {on}, graph_breaks artifact ({', '.join(result['loggers'])}),"
                " recorded by tests/data/record_messages.py",
                "# Scenarios: print(), torch._dynamo.graph_break(), os.getpid(), "
                "`if x.sum() > 0:`; backend eager",
            ]
            _write(out_dir / f"torch-{version}-graph_breaks.txt", header,
                   result["messages"], result["error"])
        elif kind in ("limit", "capabilities") and limit is None:
            limit = _child("limit")
        if kind == "limit":
            assert limit is not None
            kept = [r for r in limit["records"] if r["logger"] == LIMIT_LOGGER]
            header = [
                f"# torch {on}, records of WARNING and above on {LIMIT_LOGGER} past the "
                f"recompile limit ({'/'.join(limit['limit_config'])} = {LIMIT}), "
                "recorded by tests/data/record_messages.py",
                f"# Levels: {', '.join(sorted({r['level'] for r in kept})) or 'none'}",
            ]
            _write(out_dir / f"torch-{version}-limit.txt", header,
                   [r["message"] for r in kept], limit["error"])
        if kind == "capabilities":
            assert limit is not None
            facts = _child("probe")
            facts["recorded_on"] = _device()
            facts["python"] = sys.version.split()[0]
            facts["import_torch"] = _child("probe_import_torch")
            facts["import_on_compile"] = _child("probe_import_compile")
            facts["recompile_limit_hit"] = {
                "config": limit["limit_config"],
                "value": LIMIT,
                "warnings": limit["records"],
                "python_warnings": limit["python_warnings"],
                "error": limit["error"],
            }
            path = out_dir / f"torch-{version}-capabilities.json"
            path.write_text(json.dumps(facts, indent=2) + "\n")
            print(f"wrote {path}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        Path(sys.argv[3]).write_text(json.dumps(CHILDREN[sys.argv[2]]()))
    else:
        import argparse

        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("out_dir", type=Path)
        parser.add_argument("--kinds", default=",".join(KINDS),
                            help=f"comma-separated, of {', '.join(KINDS)}")
        arguments = parser.parse_args()
        chosen = tuple(kind for kind in arguments.kinds.split(",") if kind)
        unknown = sorted(set(chosen) - set(KINDS))
        if unknown:
            parser.error(f"unknown kinds: {', '.join(unknown)}")
        main(arguments.out_dir, chosen)
