"""Time one Adam step on the tutorials' model against the memory-bandwidth floor.

    python examples/benchmark.py                        # CUDA, 10 x Linear(1024, 1024, bias=False)
    python examples/benchmark.py --device cpu --small   # checks that it runs; CPU timings mean
                                                        # nothing here

Prints a markdown table: eager ``torch.optim.Adam`` (for-loop, foreach, fused),
the compiled ``opt.step`` of scenario 1, the foreach_map Adam of scenario 3 (as
shipped, and without its two host-side cuts) and, with ``--with-tutorial-version``,
the tutorial's foreach_map Adam restated. Each step time is the median over many
back-to-back calls after warm-up, timed with CUDA events, and is set against the
floor: the bytes one fp32 Adam step must move (read param, grad, exp_avg,
exp_avg_sq; write param, exp_avg, exp_avg_sq: 7 x 4 bytes per element) over the
bandwidth of a large device-to-device copy measured here. "GPU busy" is the
kernel and copy time per step from the profiler: a step much longer than that
is waiting for the host. Compiled variants also report their warm-up: the wall
time of their first calls, compiles included, with inductor's on-disk caches
off so that it is a cold compile (``--allow-caches`` to keep them).

The benchmark needs only torch, not the plugin.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

# run as `python examples/benchmark.py`: resolve `examples.*` as pytest does
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch._inductor.config

from examples.compiled_optimizer import StepFunction, compile_optimizer_step, make_adam
from examples.foreach_map_adam import (
    ForeachMapAdam,
    foreach_map,
    foreach_map_adam_step,
    foreach_map_available,
)
from examples.workload import (
    Workload,
    add_workload_arguments,
    build_model,
    parameters_of,
    set_synthetic_grads,
    workload_from_arguments,
)

# fp32: read param, grad, exp_avg, exp_avg_sq; write param, exp_avg, exp_avg_sq
ADAM_BYTES_PER_ELEMENT = 7 * 4
WARMUP_CALLS = 3  # compiled opt.step compiles on its first call; later ones must be steady


@dataclass(frozen=True)
class Variant:
    """One way of taking an Adam step: ``make_step`` builds it for a model whose grads are set."""

    name: str
    make_step: Callable[[torch.nn.Module], StepFunction]
    compiled: bool


@dataclass(frozen=True)
class Measurement:
    variant: Variant
    step_times: Sequence[float] = ()  # seconds, one per timed call
    warmup_seconds: float | None = None
    gpu_busy_seconds: float | None = None  # per call, kernels and copies only
    error: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.step_times)

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.step_times)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# --- the tutorial's foreach_map Adam, restated for comparison --------------------------------
# Its structure, kept on purpose: three single-output foreach_map calls, per-parameter step
# tensors borrowed from an eager torch.optim.Adam (so on the CPU), three _foreach_copy_ back.


def _tutorial_exp_avg_sq(exp_avg_sq, grad, beta2):
    return exp_avg_sq.mul(beta2).addcmul(grad, grad, value=1 - beta2)


def _tutorial_param(param, step, exp_avg, exp_avg_sq, beta1, beta2, lr, eps):
    bias_correction1 = 1 - torch.pow(beta1, step)
    bias_correction2 = (1 - torch.pow(beta2, step)).sqrt()
    step_size = (lr / bias_correction1).neg()
    denom = (exp_avg_sq.sqrt() / (bias_correction2 * step_size)).add(eps / step_size)
    return torch.add(param, torch.div(exp_avg, denom))


def _tutorial_foreach_map_adam(steps, params, exp_avgs, exp_avg_sqs, beta1=0.9, beta2=0.999,
                               lr=1e-3, eps=1e-8):
    with torch.no_grad():
        grads = [param.grad for param in params]
        torch._foreach_copy_(steps, foreach_map(lambda x: x + 1, steps))
        new_exp_avgs = foreach_map(torch.lerp, exp_avgs, grads, 1 - beta1)
        new_exp_avg_sqs = foreach_map(_tutorial_exp_avg_sq, exp_avg_sqs, grads, beta2)
        new_params = foreach_map(_tutorial_param, params, steps, new_exp_avgs, new_exp_avg_sqs,
                                 beta1, beta2, lr, eps)
        torch._foreach_copy_(exp_avgs, new_exp_avgs)
        torch._foreach_copy_(exp_avg_sqs, new_exp_avg_sqs)
        torch._foreach_copy_(params, new_params)


def tutorial_foreach_map_step(model: torch.nn.Module) -> StepFunction:
    """The tutorial's compiled foreach_map Adam over ``model``, on state borrowed from an eager
    Adam."""
    donor = make_adam(model)
    donor.step()  # creates the state the tutorial's version borrows
    params = parameters_of(model)
    state = [donor.state[p] for p in params]
    steps = [s["step"] for s in state]
    exp_avgs = [s["exp_avg"] for s in state]
    exp_avg_sqs = [s["exp_avg_sq"] for s in state]
    compiled = torch.compile(_tutorial_foreach_map_adam)
    return lambda: compiled(steps, params, exp_avgs, exp_avg_sqs)


# --- what is measured ------------------------------------------------------------------------


def foreach_map_step_without_host_cuts(model: torch.nn.Module) -> StepFunction:
    """Scenario 3's step compiled with inductor's defaults and entered with grad mode on.

    The same kernel as the shipped one: the difference to it is host work per call.
    """
    optimizer = ForeachMapAdam(model.parameters())
    compiled = torch.compile(foreach_map_adam_step, fullgraph=True)
    state = (optimizer.params, optimizer.exp_avgs, optimizer.exp_avg_sqs, optimizer.step_count,
             optimizer.hyperparameters)
    return lambda: compiled(*state)


def foreach_map_step_in_cuda_graph(model: torch.nn.Module) -> StepFunction:
    """Scenario 3's step, captured once into a CUDA graph and replayed.

    What is left of a step's cost once the kernel is at the floor is host work
    (guards, wrappers, launch): a graph replay skips all of it. It is only valid
    while every input stays at its address: parameters and state do, and the
    gradients must be written in place (``zero_grad(set_to_none=False)``, as
    this benchmark's fixed gradients are), not replaced.
    """
    optimizer = ForeachMapAdam(model.parameters())
    graph = torch.cuda.CUDAGraph()
    captured = False

    def step() -> None:
        nonlocal captured
        if captured:
            graph.replay()
            return
        # Compile and take this call's step on a side stream, then capture a step:
        # capture only records kernels, so every call takes exactly one step.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            optimizer.step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            optimizer.step()
        captured = True

    return step


def check_cuda_graph_step(workload: Workload, steps: int = 10) -> float:
    """Largest parameter difference between the graph-replayed step and torch.optim.Adam.

    Both start from the same weights and see the same gradients, written in
    place into fixed ``.grad`` tensors as the graph requires.
    """
    ours, reference = build_model(workload), build_model(workload)
    for step in range(steps):
        for model in (ours, reference):
            set_synthetic_grads(parameters_of(model), step=step)
        if step == 0:
            graph_step = foreach_map_step_in_cuda_graph(ours)
            adam = make_adam(reference)
            fixed_grads = [p.grad for p in parameters_of(ours)]
        else:  # the graph read these tensors at capture: copy new gradients into them
            for fixed, p in zip(fixed_grads, parameters_of(ours)):
                fixed.copy_(p.grad)
                p.grad = fixed
        graph_step()
        adam.step()
    synchronize(torch.device(workload.device))
    return max((a - b).abs().max().item()
               for a, b in zip(parameters_of(ours), parameters_of(reference)))


def variants(with_tutorial_version: bool, device_type: str = "cuda") -> list[Variant]:
    """What the table compares, in its order."""
    chosen = [
        Variant("eager Adam, for-loop (foreach=False)", lambda m: make_adam(m, foreach=False).step,
                compiled=False),
        Variant("eager Adam, foreach=True", lambda m: make_adam(m, foreach=True).step,
                compiled=False),
        Variant("eager Adam, fused=True", lambda m: make_adam(m, fused=True).step, compiled=False),
        Variant("torch.compile(opt.step) (scenario 1)",
                lambda m: compile_optimizer_step(make_adam(m)), compiled=True),
    ]
    if foreach_map_available():
        chosen.append(Variant("foreach_map Adam (scenario 3)",
                              lambda m: ForeachMapAdam(m.parameters()).step, compiled=True))
        chosen.append(
            Variant("foreach_map Adam, inductor defaults, grad mode on",
                    foreach_map_step_without_host_cuts, compiled=True)
        )
        if device_type == "cuda":
            chosen.append(
                Variant("foreach_map Adam in a CUDA graph (grads in place)",
                        foreach_map_step_in_cuda_graph, compiled=True)
            )
        if with_tutorial_version:
            chosen.append(Variant("foreach_map Adam, tutorial's version", tutorial_foreach_map_step,
                                  compiled=True))
    return chosen


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op off CUDA)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(call: Callable[[], object], device: torch.device, repeats: int) -> list[float]:
    """Seconds per call, ``repeats`` calls back to back: CUDA events on the GPU, a host clock
    elsewhere."""
    if device.type != "cuda":
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return times
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(repeats)]
    for start, end in events:
        start.record()
        call()
        end.record()
    synchronize(device)
    return [start.elapsed_time(end) / 1e3 for start, end in events]


def timed_warmup(call: Callable[[], object], device: torch.device, calls: int) -> float:
    """Wall seconds for the first ``calls`` calls, finished on the device: the compiles live
    here."""
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        call()
    synchronize(device)
    return time.perf_counter() - start


def gpu_busy(call: Callable[[], object], device: torch.device, calls: int = 20) -> float | None:
    """Seconds per call the GPU spends in kernels and copies (profiler), or None off CUDA.

    Against the step time this tells host-bound from device-bound: a step much
    longer than its GPU busy time waits for the CPU to launch work.
    """
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        synchronize(device)
    busy = sum(e.self_device_time_total for e in prof.key_averages()
               if e.device_type == DeviceType.CUDA)
    return busy / 1e6 / calls


def copy_bandwidth(device: torch.device, megabytes: int, repeats: int) -> float:
    """Bytes per second a large device-to-device copy moves, counting bytes read and written."""
    source = torch.rand(megabytes * 2**20 // 4, device=device)
    target = torch.empty_like(source)
    target.copy_(source)  # first touch
    seconds = statistics.median(time_calls(lambda: target.copy_(source), device, repeats))
    return 2 * source.numel() * source.element_size() / seconds


def prime_compiler(device: torch.device) -> float:
    """Pay the once-per-process costs (inductor import, compile workers, device init) before any
    variant."""
    start = time.perf_counter()
    torch.compile(lambda x: x * 2 + 1)(torch.ones(8, device=device))
    synchronize(device)
    return time.perf_counter() - start


def measure(variant: Variant, workload: Workload, repeats: int) -> Measurement:
    """Build ``variant`` on a fresh model, warm it up, time it; a failure becomes a row, not a
    crash."""
    device = torch.device(workload.device)
    try:
        model = build_model(workload)
        set_synthetic_grads(parameters_of(model), step=0)
        step = variant.make_step(model)
        warmup = timed_warmup(step, device, WARMUP_CALLS)
        times = time_calls(step, device, repeats)
        return Measurement(variant, times, warmup if variant.compiled else None,
                           gpu_busy(step, device))
    except Exception as error:  # one broken variant must not hide the others' numbers
        traceback.print_exc()
        return Measurement(variant,
                           error=f"{type(error).__name__}: "
                                 f"{str(error).splitlines()[0] if str(error) else ''}")
    finally:
        torch._dynamo.reset()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def format_table(measurements: Sequence[Measurement], floor_seconds: float) -> str:
    """The markdown table printed last (and, row by row, as progress on stderr)."""
    lines = [
        "| variant | step, median (µs) | × floor | p10–p90 (µs) | GPU busy (µs) | warm-up (s) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| memory-bandwidth floor | {floor_seconds * 1e6:.1f} | 1.00 | | | |",
    ]
    for m in measurements:
        if m.error:
            lines.append(f"| {m.variant.name} | failed: {m.error} | | | | |")
            continue
        warmup = f"{m.warmup_seconds:.1f}" if m.warmup_seconds is not None else "–"
        spread = f"{m.percentile(0.1) * 1e6:.1f}–{m.percentile(0.9) * 1e6:.1f}"
        busy = f"{m.gpu_busy_seconds * 1e6:.1f}" if m.gpu_busy_seconds is not None else "–"
        lines.append(
            f"| {m.variant.name} | {m.median * 1e6:.1f} | {m.median / floor_seconds:.2f} | "
            f"{spread} | {busy} | {warmup} |"
        )
    return "\n".join(lines)


def describe_device(device: torch.device) -> str:
    """The GPU's name, or the CPU and its thread count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type} ({torch.get_num_threads()} threads)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser)
    parser.add_argument("--repeats", type=int, default=200,
                        help="timed calls per variant (default: 200)")
    parser.add_argument("--copy-megabytes", type=int, default=1024,
                        help="size of the bandwidth copy (default: 1024)")
    parser.add_argument("--with-tutorial-version", action="store_true",
                        help="also time the tutorial's foreach_map Adam")
    parser.add_argument("--allow-caches", action="store_true",
                        help="keep inductor's on-disk caches (warm-ups get faster)")
    args = parser.parse_args(argv)
    workload = workload_from_arguments(args)
    device = torch.device(workload.device)
    if not args.allow_caches:
        torch._inductor.config.force_disable_caches = True
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")  # what we asked for

    bandwidth = copy_bandwidth(device, args.copy_megabytes, repeats=50)
    floor = ADAM_BYTES_PER_ELEMENT * workload.numel / bandwidth
    primed = prime_compiler(device)
    measurements = []
    if workload.device == "cuda" and foreach_map_available():
        difference = check_cuda_graph_step(workload)
        print("CUDA-graph foreach_map Adam vs torch.optim.Adam after 10 steps: max |param "
              f"difference| = {difference:.2e}", flush=True)
    for variant in variants(args.with_tutorial_version, workload.device):
        measurements.append(measure(variant, workload, args.repeats))
        # progress
        print(format_table(measurements[-1:], floor).splitlines()[-1], file=sys.stderr, flush=True)

    print(f"\ntorch {torch.__version__}, {describe_device(device)}")
    print(f"{workload.describe()}: {workload.numel:,} fp32 parameters")
    print(
        f"device-to-device copy: {bandwidth / 1e12:.2f} TB/s (read + write, "
        f"{args.copy_megabytes} MiB); floor = {ADAM_BYTES_PER_ELEMENT} B x {workload.numel:,} / "
        f"bandwidth = {floor * 1e6:.1f} µs"
    )
    print(
        f"median of {args.repeats} steps after {WARMUP_CALLS} warm-up calls; warm-up = wall time "
        f"of those calls ({'caches allowed' if args.allow_caches else 'inductor caches off'};"
        f" one-time compiler start-up of {primed:.1f} s paid before)\n"
    )
    print(format_table(measurements, floor))
    if not foreach_map_available():
        print("\n(foreach_map Adam skipped: this torch has no torch._higher_order_ops.foreach_map)")


if __name__ == "__main__":
    main()
