"""Record dynamo's recompile messages from the installed torch, as parser test data.

    python tests/data/record_messages.py OUT_DIR

writes ``torch-<major.minor>-recompiles.txt`` and ``..._verbose.txt`` (the two
logging artifacts) for the same scenarios: a Python int argument, a dtype
change, a requires_grad flip, a float LR changed by a scheduler, and an
optimizer that was deallocated. Each scenario runs in a fresh process per
artifact so that compile ids are comparable between the two files.
"""

from __future__ import annotations

import logging
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

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


def record(artifact: str) -> list[str]:
    """Run the scenarios in this process with ``artifact`` enabled; return the messages."""
    import torch._dynamo.guards  # noqa: F401  (configure its loggers before enabling)
    import torch._logging._internal as torch_logging

    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    torch_logging.log_state.enable_artifact(artifact)
    for name in ("torch._dynamo.guards.__recompiles", "torch._dynamo.guards.__recompiles_verbose"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(Keep())
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "record_scenarios.py"
        script.write_text(SCENARIOS)  # a real file, so torch can quote source lines
        runpy.run_path(str(script))
    return messages


def main(out_dir: Path) -> None:
    import torch

    version = ".".join(torch.__version__.split(".")[:2])
    for artifact in ("recompiles", "recompiles_verbose"):
        if len(sys.argv) > 2:  # child process: record and print
            break
        result = subprocess.run(
            [sys.executable, __file__, str(out_dir), artifact], check=True, capture_output=True, text=True
        )
        path = out_dir / f"torch-{version}-{artifact}.txt"
        path.write_text(
            f"# torch {torch.__version__}, {artifact} artifact, recorded by tests/data/record_messages.py\n"
            "# One recorded dynamo recompile message per block, blocks separated by lines of '=====':\n"
            + result.stdout
        )
        print(f"wrote {path} ({result.stdout.count('=====')} messages)")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        for message in record(sys.argv[2]):
            print("=====")
            print(message)
    else:
        main(Path(sys.argv[1]))
