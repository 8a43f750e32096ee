#!/usr/bin/env python3
"""Fidelity of pytest-gemm's timing: does the harness measure what a plain event loop measures,
and how much does its median move from one process to the next?

Needs a GPU (CuPy, cuBLAS); the test suite never runs it (it only checks ``--help``). Run it
on the machine whose numbers you want to trust, from a checkout (or with pytest-gemm
installed):

    python tools/fidelity.py                               # cuBLAS FP32 at 4096^3
    python tools/fidelity.py --size 8192 --processes 5 --out fidelity.json

It times cuBLAS FP32 (cublasGemmEx, COMPUTE_32F: the reference ladder's ``cublas-fp32``)
at SIZE^3 on the speed check's exact-integer inputs, three ways:

1. harness: the speed check's own path, ``pytest_gemm.measure.timed.timed_run`` (CUDA
   events around every call, the L2 flushed and the inputs rotated between calls, the last
   output verified): its median per call.
2. loop: an independent measurement: CALLS back-to-back calls between two events on one
   set of buffers, no flush and no synchronisation in between; the time per call, LOOPS
   loops, the median kept.
3. processes: the harness median again in PROCESSES fresh processes, one after the other
   (this script with ``--harness-only``), for the spread of the median from run to run.
   With ``--kernels cublas-fp32,warptile`` each process also times the other ladder entries
   named. Every process also times the baseline once more at its end (drift inside one
   process) and through the plain loop (is that process's cuBLAS slower, or only the
   harness's reading of it), and samples the SM clock, power, temperature and NVML's
   clock-event (throttle) reasons while it measures (nvidia-ml-py; nvidia-smi before and
   after as well). If the rungs hold still while cuBLAS moves, at the same clocks, the change
   is in cuBLAS, not in the clocks or the harness.

Output: readable lines on stderr, and one JSON object on stdout (also written to ``--out``):
``{"device", "size", "harness": {...}, "loop": {...}, "relative_difference",
"processes": {"medians", "median_ms", "min_ms", "max_ms", "range", "stdev"},
"processes_by_kernel": {name: {...the same...}}, "processes_baseline_again": {...},
"processes_loop": {...}, "process_gpu_states": [{"before", "after", "while"}]}``.

Reading it. ``relative_difference`` = harness median / loop median - 1. The loop keeps the
L2 warm and hides the gaps between launches, so the harness is expected a little above it at
a compute-bound size (on an H200 at 4096, a harness-style median of 2.708 ms against Nsight
Compute's 2.68 ms per call: +1.0 %); a gap of several percent means the harness puts its own
overhead inside the timed region. ``processes.range`` = (max - min) / median of the
per-process medians: kernels whose ratios to cuBLAS differ by less than that cannot be told
apart by one run. On an H200 on 2026-11-30, 5 processes spanned 5.5 % for cuBLAS FP32 while
our own rungs held still: the start event ran before cuBLAS's host-side work had launched the
kernel. With the launch guard (pytest_gemm/measure/launch_guard.py) the same 5-process run spans
0.05 % (cuBLAS FP32) and 0.30 % (cuBLAS fp16), harness +0.34 % over the loop.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
BASELINE = "cublas-fp32"  # the kernel the fidelity figures are about
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))


# ---- pure: what the medians say ----------------------------------------------

def relative_difference(harness_ms: float, loop_ms: float) -> float:
    """harness / loop - 1 (0.01: the harness reads 1 % slower than the plain loop)."""
    return harness_ms / loop_ms - 1.0 if loop_ms > 0 else float("nan")


def median_spread(medians: Sequence[float]) -> dict[str, Any]:
    """The spread of several medians: their median, extremes, range over the median, stdev."""
    values = [float(v) for v in medians]
    mid = statistics.median(values)
    return {"medians": values, "median_ms": mid, "min_ms": min(values), "max_ms": max(values),
            "range": (max(values) - min(values)) / mid if mid > 0 else float("nan"),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0}


def parse_kernels(text: str) -> list[str]:
    """``"cublas-fp32,warptile"`` -> names, the baseline first and once; unknown names are an error."""
    import reference_kernels

    names = [BASELINE] + [n.strip() for n in text.split(",") if n.strip() and n.strip() != BASELINE]
    known = {str(k.name) for k in reference_kernels.LADDER}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown kernel(s) {', '.join(unknown)}; ladder entries: {', '.join(sorted(known))}")
    return list(dict.fromkeys(names))


def spreads_by_kernel(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kernel, the spread of its per-process medians (``runs``: one ``--harness-only`` JSON each).

    Which kernels move tells why the medians move: if our own rungs hold still while cuBLAS
    moves, the change is in cuBLAS (its choice of kernel, or where its buffers landed), not in
    the clocks or the harness."""
    names = list(dict.fromkeys(name for run in runs for name in run["kernels"]))
    return {name: median_spread([run["kernels"][name]["median_ms"] for run in runs if name in run["kernels"]])
            for name in names}


# ---- GPU: the measurements -------------------------------------------------------

def gpu_state(index: int = 0) -> dict[str, float] | None:
    """SM clock (MHz), power (W) and temperature (C) from nvidia-smi, or None where it cannot say."""
    fields = ("clocks.sm", "power.draw", "temperature.gpu")
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
                              "-i", str(index)], capture_output=True, text=True, timeout=20, check=False)
        values = [float(v) for v in out.stdout.strip().splitlines()[0].split(",")]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return dict(zip(("sm_mhz", "power_w", "temp_c"), values))

def _device() -> Any:
    from pytest_gemm.kernels.device import probe

    found = probe()
    if isinstance(found, str):
        raise SystemExit(f"fidelity.py needs a GPU: {found}")
    return found


def harness_median(size: int, budget_s: float, kernel: str = BASELINE) -> dict[str, Any]:
    """A ladder entry (cuBLAS FP32 unless named) at size^3 through the speed check's harness (verified)."""
    import cupy
    import reference_kernels

    from pytest_gemm.kernels.harness import harness_for
    from pytest_gemm.measure.timed import timed_run

    device = _device()
    h = harness_for(reference_kernels.by_name(kernel), device)
    with cupy.cuda.Stream.null:
        timing, verify = timed_run(h, (size, size, size), budget_s)
        verify()
    return {"median_ms": timing.median_ms, "min_ms": timing.min_ms, "spread": timing.spread,
            "repeats": timing.repeats, "tflops": timing.tflops, "escaped_ms": timing.escaped_ms}


def loop_median(size: int, calls: int, loops: int) -> dict[str, Any]:
    """cuBLAS FP32 at size^3: ``calls`` back-to-back calls between two events, ``loops`` times."""
    import cupy
    import reference_kernels

    from pytest_gemm.judges.inputs import exact_inputs
    from pytest_gemm.measure.timing import gemm_flops

    _device()
    problem = exact_inputs(size, size, size, precision="fp32", seed=100)  # the harness's first input set
    a, b = cupy.asarray(problem.a), cupy.asarray(problem.b)
    c = cupy.empty((size, size), dtype=cupy.float32)
    gemm = reference_kernels.CUBLAS["fp32"].fn
    null = cupy.cuda.Stream.null
    per_call: list[float] = []
    with null:
        for _ in range(3):
            gemm(a, b, c)
        cupy.cuda.runtime.deviceSynchronize()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        for _ in range(loops):
            start.record(null)
            for _ in range(calls):
                gemm(a, b, c)
            end.record(null)
            end.synchronize()
            per_call.append(cupy.cuda.get_elapsed_time(start, end) / calls)
    mid = statistics.median(per_call)
    return {"calls": calls, "loops": loops, "per_call_ms": per_call, "median_ms": mid,
            "tflops": gemm_flops(size, size, size) / (mid * 1e-3) / 1e12}


class ClockSampler:
    """Samples the GPU's SM clock, power, temperature and clock-event (throttle) reasons every
    ``period_s`` in a thread while a process measures, through NVML (nvidia-ml-py) where it is
    installed: clocks read before and after, on an idle GPU, say nothing about the clocks the
    kernels ran at."""

    def __init__(self, index: int, period_s: float = 0.05):
        self.index, self.period_s, self.samples = index, period_s, []
        self._stop = None
        self._thread = None

    def __enter__(self) -> "ClockSampler":
        import threading

        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception:  # no NVML here: the summary says so
            return self
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons

        def sample() -> None:
            while not self._stop.is_set():
                try:
                    self.samples.append((pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                                         pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                                         pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
                                         int(reasons(handle))))
                except Exception:
                    return
                self._stop.wait(self.period_s)

        self._stop = threading.Event()
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()

    def summary(self) -> dict[str, Any] | None:
        return summarize_samples(self.samples)


def summarize_samples(samples: Sequence[tuple[float, float, float, int]]) -> dict[str, Any] | None:
    """Clock, power and temperature over a run's samples; ``reasons``: every clock-event reason
    bit seen (NVML's mask, OR-ed), 0 when nothing but the application clock held it back."""
    if not samples:
        return None
    clocks, power, temps, reasons = zip(*samples)
    mask = 0
    for r in reasons:
        mask |= int(r)
    return {"samples": len(samples), "sm_mhz_min": min(clocks), "sm_mhz_median": statistics.median(clocks),
            "sm_mhz_max": max(clocks), "power_w_median": statistics.median(power), "power_w_max": max(power),
            "temp_c_first": temps[0], "temp_c_last": temps[-1], "reasons_mask": hex(mask)}


def harness_run(size: int, budget_s: float, kernels: Sequence[str]) -> dict[str, Any]:
    """What one ``--harness-only`` process reports: each kernel's harness timing, the baseline's
    harness median once more at the end (drift inside the process), its plain-loop median (is the
    process's cuBLAS itself slower, or only the harness's reading of it), the GPU's clock, power
    and temperature before and after, and sampled while it measured."""
    index = _device().index
    before = gpu_state(index)
    with ClockSampler(index) as sampler:
        timings = {name: harness_median(size, budget_s, name) for name in kernels}
        again = harness_median(size, budget_s)
        loop = loop_median(size, calls=50, loops=3)
    return {"kernels": timings, "median_ms": timings[BASELINE]["median_ms"], "baseline_again_ms": again["median_ms"],
            "loop_ms": loop["median_ms"], "gpu_before": before, "gpu_after": gpu_state(index),
            "gpu_while": sampler.summary()}


def process_runs(size: int, budget_s: float, processes: int, kernels: Sequence[str]) -> list[dict[str, Any]]:
    """``harness_run`` in ``processes`` fresh processes, one after the other."""
    runs = []
    for i in range(processes):
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--harness-only",
                              "--size", str(size), "--budget", str(budget_s), "--kernels", ",".join(kernels)],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"process {i + 1} of {processes} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        run = runs[-1]
        medians = ", ".join(f"{name} {t['median_ms']:.4f}" for name, t in run["kernels"].items())
        print(f"  process {i + 1}/{processes}: harness medians (ms) {medians}; {BASELINE} again "
              f"{run['baseline_again_ms']:.4f}, loop {run['loop_ms']:.4f}; GPU while measuring "
              f"{run['gpu_while']}; before/after {run['gpu_before']} / {run['gpu_after']}", file=sys.stderr)
    return runs


# ---- the command ---------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fidelity.py",
        description="Needs a GPU. Times cuBLAS FP32 at SIZE^3 through pytest-gemm's harness "
                    "(timed.timed_run: events per call, L2 flush, rotated inputs) and through a plain "
                    "loop of CALLS back-to-back calls between two events; prints both medians and their "
                    "relative difference, then the harness median in PROCESSES fresh processes (the spread "
                    "of the median). One JSON object on stdout.",
        epilog="See the module docstring for how to read the numbers.")
    parser.add_argument("--size", type=int, default=4096, help="M = N = K (default 4096)")
    parser.add_argument("--calls", type=int, default=100, help="calls per event-timed loop (default 100)")
    parser.add_argument("--loops", type=int, default=5, help="event-timed loops; the median is kept (default 5)")
    parser.add_argument("--processes", type=int, default=5,
                        help="fresh processes that each report a harness median (default 5; 0 skips)")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="seconds of timed GPU work per harness median, as the speed check (default 1.0)")
    parser.add_argument("--kernels", default=BASELINE,
                        help="ladder entries each process also times, comma-separated, to tell whose median "
                             f"moves (default {BASELINE} alone; e.g. {BASELINE},warptile)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    parser.add_argument("--harness-only", action="store_true",
                        help="print only this process's harness median as JSON (what --processes runs)")
    args = parser.parse_args(argv)
    if args.size < 1 or args.calls < 1 or args.loops < 1 or args.processes < 0 or args.budget <= 0:
        parser.error("--size, --calls and --loops must be >= 1, --processes >= 0 and --budget > 0")
    try:
        args.kernels = parse_kernels(args.kernels)
    except ValueError as exc:
        parser.error(f"--kernels: {exc}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.harness_only:
        print(json.dumps(harness_run(args.size, args.budget, args.kernels)))
        return 0
    device = _device()
    size = args.size
    print(f"cuBLAS FP32 at {size}^3 on {device.name} ({device.arch})", file=sys.stderr)
    harness = harness_median(size, args.budget)
    print(f"  harness: median {harness['median_ms']:.4f} ms over {harness['repeats']} calls "
          f"(spread {100 * harness['spread']:.1f} %), {harness['tflops']:.2f} TFLOP/s", file=sys.stderr)
    loop = loop_median(size, args.calls, args.loops)
    print(f"  loop:    median {loop['median_ms']:.4f} ms per call ({args.loops} loops of {args.calls} calls), "
          f"{loop['tflops']:.2f} TFLOP/s", file=sys.stderr)
    diff = relative_difference(harness["median_ms"], loop["median_ms"])
    print(f"  harness vs loop: {100 * diff:+.2f} %", file=sys.stderr)
    result: dict[str, Any] = {"device": device.name, "arch": device.arch, "size": size, "precision": "fp32",
                              "harness": harness, "loop": loop, "relative_difference": diff, "processes": None}
    if args.processes:
        runs = process_runs(size, args.budget, args.processes, args.kernels)
        by_kernel = spreads_by_kernel(runs)
        result["processes"] = by_kernel[BASELINE]
        result["processes_by_kernel"] = by_kernel
        result["process_gpu_states"] = [{"before": r["gpu_before"], "after": r["gpu_after"], "while": r["gpu_while"]}
                                        for r in runs]
        result["processes_baseline_again"] = median_spread([r["baseline_again_ms"] for r in runs])
        result["processes_loop"] = median_spread([r["loop_ms"] for r in runs])
        for label in ("processes_baseline_again", "processes_loop"):
            print(f"  {label}: range {100 * result[label]['range']:.2f} % over {result[label]['medians']}",
                  file=sys.stderr)
        for name, spread in by_kernel.items():
            print(f"  {name}: median over {args.processes} processes {spread['median_ms']:.4f} ms, range "
                  f"{100 * spread['range']:.2f} %, stdev {spread['stdev']:.4f} ms", file=sys.stderr)
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
