#!/usr/bin/env python3
"""Evaluate the candidate kernels against the top rungs and cuBLAS in one GPU run.

For every kernel in ``bench.candidates.CANDIDATES`` and the current
top rungs (``warptile``, ``wmma-fp16``, ``mma-fp16``, ``pipeline-sync``, ``cpasync2/3/4``):

(a) correctness gate first: ``pytest_gemm.checks.exact.check_exact`` (exact-integer
    inputs, guarded buffers, C poisoned, bit-for-bit against float64) at
    1x1x1, 17x33x65, 127x255x63, 1000^3 and 4096^3. A kernel that fails any of
    them is reported with the failure's category and message and is never timed.
(b) timing at 2048^3, 4096^3, 8192^3 with ``pytest_gemm.measure.timing.time_gpu`` (CUDA
    events, L2 flushed before every call) on seeded random inputs, interleaved
    with cuBLAS of the same precision (``reference_kernels.CUBLAS``) in the same
    process: for each size, ``--rounds`` rounds of cuBLAS then each kernel of
    the job; each figure is the median of its per-round medians. The last timed
    output is compared with cuBLAS's on the same inputs (``agree``: max |diff| /
    max |cuBLAS|); a rate above the theoretical roof is flagged.
(c) the cp.async rungs against their synchronous twin at 4096^3: the four are
    one job, timed interleaved, ``speedup = pipeline-sync ms / cpasyncN ms``.
(d) registers, spills and stack of each kernel as compiled for this device, and
    resident blocks per SM at 4096^3.

Each job (one candidate; or warptile; or wmma-fp16; or mma-fp16; or the pipeline four) runs
in its own child process (this script with ``--child``): an illegal address
poisons a CUDA context for good, and a hung kernel can only be stopped by
killing its process (``--child-timeout-s``). Jobs are not started after
``--deadline-s``; with the defaults the whole run takes about 3 minutes on an
H200. Prints a markdown table; ``--out PATH`` also writes the JSON report.

    python3 bench/perf_candidates.py --out perf_candidates.json
    python3 bench/perf_candidates.py --only mma-fp16-128x256x64-s3-cs3,wmma-fp16 --sizes 4096
    python3 bench/perf_candidates.py --only mma-fp16,mma-fp16-128x256x32-s4-cs1-lean --rounds 3   # issue 29
    python3 bench/perf_candidates.py --compile-only          # no GPU: registers/spills per arch

Exit status: 0 every kernel that ran passed its gate; 1 a kernel failed, crashed
or timed out; 2 could not run (no usable GPU, bad arguments).
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout: import the project beside it
    sys.path.insert(0, str(ROOT))

import reference_kernels  # noqa: E402  (never touches CUDA)
from bench import candidates  # noqa: E402
from pytest_gemm.model.contract import CudaKernel, PyKernel  # noqa: E402

Shape = tuple[int, int, int]

GATE_SHAPES: tuple[Shape, ...] = ((1, 1, 1), (17, 33, 65), (127, 255, 63), (1000, 1000, 1000), (4096, 4096, 4096))
SIZES: tuple[int, ...] = (2048, 4096, 8192)
RATIO_SIZE = 4096
SYNC_TWIN = "pipeline-sync"
#: The current top rungs, as jobs: kernels in one job are timed interleaved in one process.
RUNG_JOBS: tuple[tuple[str, ...], ...] = (
    ("warptile",), ("wmma-fp16",), ("mma-fp16",), (SYNC_TWIN, "cpasync2", "cpasync3", "cpasync4"),
)
DEFAULT_BUDGET_S = 0.25
DEFAULT_ROUNDS = 2
DEFAULT_DEADLINE_S = 200.0
DEFAULT_CHILD_TIMEOUT_S = 110.0
AGREE_LIMIT = 1e-2  # last timed output vs cuBLAS's on the same random inputs: max |diff| / max |cuBLAS|
RESULT_MARK = "@@perf_candidates@@ "
DEFAULT_ARCHES = ("sm_80", "sm_90")


# -- pure helpers (tested with no GPU) ------------------------------------------

def kernel_by_name(name: str) -> CudaKernel | PyKernel:
    """A candidate or a ladder entry by name."""
    if name in candidates.CANDIDATES:
        return candidates.CANDIDATES[name]
    return reference_kernels.by_name(name)


def valid_names() -> list[str]:
    return [*candidates.CANDIDATES, *(n for job in RUNG_JOBS for n in job)]


def build_jobs(only: Sequence[str] | None = None, rungs: bool = True) -> list[list[str]]:
    """The jobs to run, in order: each candidate alone, then the rung jobs.

    ``only`` keeps those names (a rung job keeps its listed members, in order);
    an unknown name raises ValueError listing the valid ones."""
    jobs = [[name] for name in candidates.CANDIDATES]
    if rungs:
        jobs += [list(job) for job in RUNG_JOBS]
    if only:
        valid = valid_names()
        unknown = [n for n in only if n not in valid]
        if unknown:
            raise ValueError(f"unknown kernel(s) {', '.join(map(repr, unknown))}; valid: {', '.join(valid)}")
        wanted = set(only)
        jobs = [[n for n in job if n in wanted] for job in jobs]
        jobs = [job for job in jobs if job]
    return jobs


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes {text!r}: expected comma-separated integers, e.g. 2048,4096,8192") from None
    if not sizes or any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"--sizes {text!r}: expected positive integers, e.g. 2048,4096,8192")
    return sizes


def median_of_medians(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("no rounds to summarise")
    return float(statistics.median(values))


def size_entry(size: int, kernel_rounds_ms: Sequence[float], cublas_rounds_ms: Sequence[float],
               spreads: Sequence[float] = (), agree: float | None = None,
               roof_flags: Sequence[str] = ()) -> dict[str, Any]:
    """One kernel at one size from its per-round medians and cuBLAS's (paired by round)."""
    flops = 2.0 * size ** 3
    ms = median_of_medians(kernel_rounds_ms)
    cublas_ms = median_of_medians(cublas_rounds_ms)
    return {
        "size": size,
        "median_ms": ms,
        "tflops": flops / (ms * 1e-3) / 1e12,
        "cublas_median_ms": cublas_ms,
        "cublas_tflops": flops / (cublas_ms * 1e-3) / 1e12,
        "fraction_of_cublas": cublas_ms / ms,
        "round_medians_ms": list(kernel_rounds_ms),
        "cublas_round_medians_ms": list(cublas_rounds_ms),
        "spread": max(spreads) if spreads else None,
        "agree": agree,
        "agrees": None if agree is None else agree <= AGREE_LIMIT,
        "roof_flags": list(roof_flags),
    }


def cpasync_ratios(records: Sequence[dict[str, Any]], size: int = RATIO_SIZE) -> list[dict[str, Any]]:
    """``pipeline-sync ms / cpasyncN ms`` at ``size`` for every cpasync rung timed with its twin."""
    def ms_at(rec: dict[str, Any]) -> float | None:
        for t in rec.get("timings") or []:
            if t.get("size") == size:
                return t.get("median_ms")
        return None

    sync = next((r for r in records if r.get("name") == SYNC_TWIN), None)
    sync_ms = ms_at(sync) if sync else None
    out = []
    for rec in records:
        name = str(rec.get("name"))
        if not name.startswith("cpasync"):
            continue
        ms = ms_at(rec)
        out.append({"name": name, "size": size, "median_ms": ms, "sync_median_ms": sync_ms,
                    "speedup_vs_sync": (sync_ms / ms) if (ms and sync_ms) else None})
    return out


def not_run_records(names: Sequence[str], verdict: str, why: str) -> list[dict[str, Any]]:
    out = []
    for name in names:
        kernel = kernel_by_name(name)
        out.append({"name": name, "precision": kernel.precision, "verdict": verdict, "error": why,
                    "gate": [], "timings": []})
    return out


def parse_child_output(stdout: str) -> dict[str, Any] | None:
    """The child's result (the last line starting with RESULT_MARK), or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            try:
                return json.loads(line[len(RESULT_MARK):])
            except json.JSONDecodeError:
                return None
    return None


def _fmt_rate(entry: dict[str, Any] | None) -> str:
    if not entry:
        return ""
    text = f"{entry['tflops']:.1f} ({entry['fraction_of_cublas']:.2f})"
    if entry.get("agrees") is False:
        text += " DISAGREES"
    if entry.get("roof_flags"):
        text += " ABOVE ROOF"
    return text


def _gate_text(rec: dict[str, Any]) -> str:
    gate = rec.get("gate") or []
    failed = [g for g in gate if not g.get("ok")]
    if failed:
        g = failed[0]
        return f"FAIL {g.get('category')} at {'x'.join(map(str, g['shape']))}"
    if not gate:  # never gated: not run, timeout, crashed, skipped, compile_error, error
        return str(rec.get("verdict", ""))
    return f"{len(gate)}/{len(GATE_SHAPES)} exact"


def markdown(report: dict[str, Any]) -> str:
    """The report as markdown: one row per kernel, the cuBLAS baselines, the cp.async ratios."""
    sizes = list(report.get("sizes") or SIZES)
    lines = []
    dev = report.get("device") or {}
    if dev:
        lines.append(f"Device: {dev.get('name')} ({dev.get('arch')}, {dev.get('sm_count')} SMs). "
                     f"Timing: median of {report.get('rounds')} round medians, {report.get('budget_s')} s of GPU "
                     "time per timing, L2 flushed before every call. Cells: TFLOP/s (fraction of cuBLAS, same "
                     "precision, same process).")
        lines.append("")
    head = ["kernel", "prec", "regs", "spill B", "blocks/SM", "smem KB", "gate",
            *[f"{s}^3 TFLOP/s (x cuBLAS)" for s in sizes]]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + " --- |" * len(head))
    for rec in report.get("kernels") or []:
        res = rec.get("resources") or {}
        by_size = {t["size"]: t for t in rec.get("timings") or []}
        smem = rec.get("dynamic_smem_bytes")
        row = [rec.get("name", ""), rec.get("precision", ""),
               "" if res.get("registers") is None else str(res["registers"]),
               "" if res.get("spill_bytes") is None else str(res["spill_bytes"]),
               "" if rec.get("blocks_per_sm") is None else str(rec["blocks_per_sm"]),
               "" if smem is None else f"{smem / 1024:.1f}",
               _gate_text(rec),
               *[_fmt_rate(by_size.get(s)) for s in sizes]]
        lines.append("| " + " | ".join(row) + " |")
    cublas = report.get("cublas") or {}
    if cublas:
        lines.append("")
        lines.append("| cuBLAS | " + " | ".join(f"{s}^3 TFLOP/s" for s in sizes) + " |")
        lines.append("|" + " --- |" * (len(sizes) + 1))
        for precision, per_size in cublas.items():
            cells = [f"{per_size[str(s)]:.1f}" if per_size.get(str(s)) else "" for s in sizes]
            lines.append(f"| cublas-{precision} (median over jobs) | " + " | ".join(cells) + " |")
    ratios = report.get("cpasync_vs_sync") or []
    if ratios:
        lines.append("")
        lines.append(f"| cp.async rung | ms at {RATIO_SIZE}^3 | {SYNC_TWIN} ms | speedup (sync / rung) |")
        lines.append("| --- | --- | --- | --- |")
        for r in ratios:
            ms = "" if r["median_ms"] is None else f"{r['median_ms']:.3f}"
            sms = "" if r["sync_median_ms"] is None else f"{r['sync_median_ms']:.3f}"
            sp = "" if r["speedup_vs_sync"] is None else f"{r['speedup_vs_sync']:.3f}"
            lines.append(f"| {r['name']} | {ms} | {sms} | {sp} |")
    failures = [(rec["name"], g) for rec in report.get("kernels") or [] for g in rec.get("gate") or []
                if not g.get("ok")]
    errors = [(rec["name"], rec["error"]) for rec in report.get("kernels") or [] if rec.get("error")]
    if failures or errors:
        lines.append("")
        for name, g in failures:
            lines.append(f"- {name}: [{g.get('category')}] at {'x'.join(map(str, g['shape']))}: {g.get('summary')}")
        for name, err in errors:
            lines.append(f"- {name}: {err}")
    return "\n".join(lines)


def cublas_summary(job_results: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """cuBLAS TFLOP/s per precision per size: the median over the jobs that timed it."""
    seen: dict[str, dict[int, list[float]]] = {}
    for res in job_results:
        for precision, per_size in (res.get("cublas") or {}).items():
            for size, tflops in per_size.items():
                seen.setdefault(precision, {}).setdefault(int(size), []).append(float(tflops))
    return {p: {str(s): float(statistics.median(v)) for s, v in sorted(d.items())} for p, d in seen.items()}


def exit_status(records: Sequence[dict[str, Any]]) -> int:
    bad = [r for r in records if r.get("verdict") not in ("passed", "skipped")]
    return 1 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perf_candidates.py",
        description=("Gate (bit-exact) and time the candidate kernels of bench/candidates and the top "
                     "rungs against cuBLAS at the same precision; print a markdown table. Needs a GPU, except "
                     "--help and --compile-only."),
        epilog=("Exit status: 0 every kernel that ran passed its gate; 1 a kernel failed, crashed or timed out; "
                "2 could not run (no usable GPU, bad arguments)."))
    parser.add_argument("--only", default="",
                        help="comma-separated kernel names to run (default: every candidate and the top rungs)")
    parser.add_argument("--no-rungs", action="store_true", help="candidates only, no warptile/wmma/pipeline jobs")
    parser.add_argument("--sizes", type=parse_sizes, default=list(SIZES),
                        help="square sizes to time (default: 2048,4096,8192)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                        help=f"seconds of GPU time per timing (default: {DEFAULT_BUDGET_S})")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help=f"interleaved rounds per size (default: {DEFAULT_ROUNDS})")
    parser.add_argument("--deadline-s", type=float, default=DEFAULT_DEADLINE_S,
                        help=f"start no job after this many seconds (default: {DEFAULT_DEADLINE_S:.0f})")
    parser.add_argument("--child-timeout-s", type=float, default=DEFAULT_CHILD_TIMEOUT_S,
                        help=f"kill a job's process after this many seconds (default: {DEFAULT_CHILD_TIMEOUT_S:.0f})")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON report to this file")
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU: compile every kernel with NVRTC for --arch and print registers and spills")
    parser.add_argument("--arch", default=",".join(DEFAULT_ARCHES),
                        help="architectures for --compile-only (default: sm_80,sm_90)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: run one job, print its JSON
    return parser


# -- compile-only (no GPU) -------------------------------------------------------

def compile_report(names: Sequence[str], arches: Sequence[str]) -> list[dict[str, Any]]:
    from pytest_gemm.kernels.compiler import GemmCompileError, compile_for_arch

    rows = []
    for name in names:
        kernel = kernel_by_name(name)
        if not isinstance(kernel, CudaKernel):
            continue
        kernel.validate()
        for arch in arches:
            row: dict[str, Any] = {"name": name, "arch": arch}
            if arch not in kernel.claimed_arches():
                row["error"] = f"not claimed (min_cc {tuple(kernel.min_cc)})"
            else:
                try:
                    res = compile_for_arch(kernel, arch).resources
                    row.update(registers=res.registers, spill_stores=res.spill_stores, spill_loads=res.spill_loads,
                               stack_frame=res.stack_frame)
                except GemmCompileError as exc:
                    row["error"] = "compile error: " + exc.log.strip().splitlines()[0] if exc.log.strip() else "compile error"
            rows.append(row)
    return rows


def compile_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| kernel | arch | registers | spill stores B | spill loads B | stack B |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['arch']} | {r['error']} | | | |")
        else:
            lines.append(f"| {r['name']} | {r['arch']} | {r['registers']} | {r['spill_stores']} | "
                         f"{r['spill_loads']} | {r['stack_frame']} |")
    return "\n".join(lines)


# -- GPU part: one job in a child process ------------------------------------------

def _describe(kernel: CudaKernel | PyKernel, size: int = RATIO_SIZE) -> dict[str, Any]:
    rec: dict[str, Any] = {"name": str(kernel.name), "precision": kernel.precision, "gate": [], "timings": []}
    if isinstance(kernel, CudaKernel):
        rec.update(source=kernel.source, entry=kernel.entry, options=list(kernel.options),
                   block=list(kernel.block), tile=list(kernel.tile) if kernel.tile else None,
                   min_cc=list(kernel.min_cc), dynamic_smem_bytes=kernel.dynamic_shared_mem(size, size, size))
    return rec


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_job(names: Sequence[str], sizes: Sequence[int], budget_s: float, rounds: int,
            gate_shapes: Sequence[Shape] = GATE_SHAPES) -> dict[str, Any]:
    """Gate, then time, the kernels of one job (same precision) in this process."""
    from pytest_gemm.kernels.device import probe

    device = probe()
    if isinstance(device, str):
        return {"error": device}

    import cupy

    from pytest_gemm.model import categories as cat
    from pytest_gemm.model.categories import GemmCheckFailure
    from pytest_gemm.checks.exact import check_exact
    from pytest_gemm.kernels.harness import harness_for
    from pytest_gemm.kernels.launch import load
    from pytest_gemm.measure.roofs import roof_tflops
    from pytest_gemm.measure.timing import above_roof, gemm_flops, time_gpu

    kernels = [kernel_by_name(n) for n in names]
    precisions = {k.precision for k in kernels}
    if len(precisions) != 1:
        raise ValueError(f"a job's kernels must share one precision, got {sorted(precisions)}")
    precision = precisions.pop()
    out: dict[str, Any] = {"device": {"name": device.name, "arch": device.arch, "sm_count": device.sm_count,
                                      "l2_bytes": device.l2_bytes, "clock_mhz": device.clock_mhz},
                           "kernels": [], "cublas": {}}
    records: list[dict[str, Any]] = []
    passed: list[tuple[Any, Any, dict[str, Any]]] = []
    poisoned: str | None = None

    for kernel in kernels:
        rec = _describe(kernel)
        records.append(rec)
        if poisoned is not None:
            rec.update(verdict="not run", error=f"CUDA context unusable after {poisoned}")
            continue
        if not device.supports(tuple(kernel.min_cc)):
            rec.update(verdict="skipped", error=f"needs compute capability {tuple(kernel.min_cc)}")
            continue
        t0 = time.perf_counter()
        try:
            h = harness_for(kernel, device)
        except GemmCheckFailure as exc:
            rec.update(verdict=exc.category, error=exc.summary, details=exc.details[:20])
            continue
        except Exception as exc:  # toolchain missing, module load refused, ...
            rec.update(verdict="error", error=f"could not load: {type(exc).__name__}: {exc}")
            continue
        rec["load_s"] = round(time.perf_counter() - t0, 2)
        compiled = h.loaded.compiled
        if compiled is not None:
            res = compiled.resources
            rec["resources"] = {"arch": device.arch, "registers": res.registers, "spill_stores": res.spill_stores,
                                "spill_loads": res.spill_loads, "spill_bytes": res.spills,
                                "stack_frame": res.stack_frame}
        attrs = h.loaded.attributes(RATIO_SIZE, RATIO_SIZE, RATIO_SIZE)
        if attrs is not None:
            rec["blocks_per_sm"] = attrs.blocks_per_sm
            rec["occupancy"] = round(attrs.occupancy, 3)
            rec.setdefault("resources", {})["driver_registers"] = attrs.registers
            rec["resources"]["local_bytes"] = attrs.local_bytes
        ok = True
        for shape in gate_shapes:
            t1 = time.perf_counter()
            try:
                check_exact(h, shape)
                rec["gate"].append({"shape": list(shape), "ok": True, "s": round(time.perf_counter() - t1, 2)})
            except GemmCheckFailure as exc:
                rec["gate"].append({"shape": list(shape), "ok": False, "category": exc.category,
                                    "summary": exc.summary, "details": exc.details[:12]})
                ok = False
                if exc.category in (cat.FAULT, cat.LAUNCH_ERROR):
                    poisoned = f"{kernel.name} ({exc.category} at {'x'.join(map(str, shape))})"
                break
            except Exception as exc:  # anything else: report it, and trust nothing after it
                rec["gate"].append({"shape": list(shape), "ok": False, "category": "error",
                                    "summary": f"{type(exc).__name__}: {exc}"})
                ok = False
                poisoned = f"{kernel.name} ({type(exc).__name__})"
                break
        _log(f"  {kernel.name}: gate {'passed' if ok else 'FAILED'}")
        if ok:
            rec["verdict"] = "passed"
            passed.append((kernel, h, rec))
        else:
            rec["verdict"] = "failed"

    if passed and poisoned is not None:
        for _, _, rec in passed:
            rec["error"] = f"passed its gate but not timed: CUDA context unusable after {poisoned}"
    if passed and poisoned is None:
        cublas = load(reference_kernels.CUBLAS[precision], device)
        roof = roof_tflops(device, precision)
        dtype = {"fp32": cupy.float32, "fp16": cupy.float16}[precision]
        try:
            for size in sizes:
                m = n = k = size
                flops = gemm_flops(m, n, k)
                rng = cupy.random.RandomState(1234 + size)
                a = rng.uniform(-1.0, 1.0, size=(m, k), dtype=cupy.float32).astype(dtype)
                b = rng.uniform(-1.0, 1.0, size=(k, n), dtype=cupy.float32).astype(dtype)
                c_ref = cupy.empty((m, n), dtype=cupy.float32)
                outs = {rec["name"]: cupy.empty((m, n), dtype=cupy.float32) for _, _, rec in passed}
                cublas_rounds: list[float] = []
                kernel_rounds: dict[str, list[float]] = {rec["name"]: [] for _, _, rec in passed}
                spreads: dict[str, list[float]] = {rec["name"]: [] for _, _, rec in passed}
                flags: dict[str, list[str]] = {rec["name"]: [] for _, _, rec in passed}

                def timed(fn: Callable[[], None]) -> Any:
                    return time_gpu(fn, flops=flops, l2_bytes=device.l2_bytes, budget_s=budget_s)

                for _ in range(rounds):
                    t = timed(lambda: cublas(a, b, c_ref, m, n, k))
                    cublas_rounds.append(t.median_ms)
                    for _, h, rec in passed:
                        name = rec["name"]
                        t = timed(lambda h=h, c=outs[name]: h.loaded(a, b, c, m, n, k))
                        kernel_rounds[name].append(t.median_ms)
                        spreads[name].append(t.spread)
                        flag = above_roof(t, roof, precision)
                        if flag is not None:
                            flags[name].append(flag[0])
                cupy.cuda.runtime.deviceSynchronize()
                scale = float(cupy.abs(c_ref).max()) or 1.0
                for _, _, rec in passed:
                    name = rec["name"]
                    agree = float(cupy.abs(outs[name] - c_ref).max()) / scale
                    entry = size_entry(size, kernel_rounds[name], cublas_rounds, spreads[name], agree, flags[name])
                    rec["timings"].append(entry)
                    _log(f"  {name} {size}^3: {entry['tflops']:.1f} TFLOP/s = {entry['fraction_of_cublas']:.3f} "
                         f"of cuBLAS ({entry['cublas_tflops']:.1f}); agree {agree:.1e}")
                out["cublas"].setdefault(precision, {})[str(size)] = gemm_flops(m, n, k) / (
                    median_of_medians(cublas_rounds) * 1e-3) / 1e12
                del a, b, c_ref, outs
                cupy.get_default_memory_pool().free_all_blocks()
        except Exception as exc:  # a fault during timing: keep what was measured, say what happened
            for _, _, rec in passed:
                rec["verdict"] = "timing_error"
                rec["error"] = f"timing stopped: {type(exc).__name__}: {exc}"
    out["kernels"] = records
    out["cpasync_vs_sync"] = cpasync_ratios(records)
    return out


def child_main(spec_text: str) -> int:
    spec = json.loads(spec_text)
    result = run_job(spec["kernels"], spec["sizes"], spec["budget_s"], spec["rounds"],
                     [tuple(s) for s in spec.get("gate_shapes", GATE_SHAPES)])
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


# -- parent: one child per job ----------------------------------------------------------

def run_all(jobs: Sequence[Sequence[str]], args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    start = time.monotonic()
    report: dict[str, Any] = {
        "tool": "bench/perf_candidates.py",
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "sizes": list(args.sizes), "budget_s": args.budget_s, "rounds": args.rounds,
        "gate_shapes": [list(s) for s in GATE_SHAPES], "agree_limit": AGREE_LIMIT,
        "jobs": [list(j) for j in jobs],
    }
    records: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    for job in jobs:
        elapsed = time.monotonic() - start
        if elapsed > args.deadline_s:
            records += not_run_records(job, "not run", f"deadline: {elapsed:.0f} s > --deadline-s {args.deadline_s:.0f}")
            continue
        _log(f"[{elapsed:5.0f} s] {', '.join(job)}")
        spec = {"kernels": list(job), "sizes": list(args.sizes), "budget_s": args.budget_s, "rounds": args.rounds}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, cwd=str(ROOT),
                                  timeout=args.child_timeout_s)
        except subprocess.TimeoutExpired:
            records += not_run_records(job, "timeout", f"its process was killed after {args.child_timeout_s:.0f} s "
                                                       "(a hung kernel, or the job needs a larger --child-timeout-s)")
            continue
        result = parse_child_output(proc.stdout)
        if result is None:
            tail = proc.stdout.strip().splitlines()[-5:]
            records += not_run_records(job, "crashed", f"its process exited with status {proc.returncode} and no "
                                                       f"result; last output: {' / '.join(tail) or '(none)'}")
            continue
        if "error" in result and "kernels" not in result:
            report.update(error=result["error"], kernels=records)
            return report, 2
        report.setdefault("device", result.get("device"))
        records += result["kernels"]
        results.append(result)
        ratios += result.get("cpasync_vs_sync") or []
    report["kernels"] = records
    report["cublas"] = cublas_summary(results)
    report["cpasync_vs_sync"] = ratios
    report["elapsed_s"] = round(time.monotonic() - start, 1)
    return report, exit_status(records)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child is not None:
        return child_main(args.child)
    only = [n.strip() for n in args.only.split(",") if n.strip()]
    try:
        jobs = build_jobs(only or None, rungs=not args.no_rungs)
    except ValueError as exc:
        parser.error(str(exc))
    if args.rounds < 1 or args.budget_s <= 0 or args.child_timeout_s <= 0:
        parser.error("--rounds must be >= 1, --budget-s and --child-timeout-s > 0")
    if args.compile_only:
        from pytest_gemm.kernels.compiler import parse_arch_list

        try:
            arches = parse_arch_list(args.arch)
        except ValueError as exc:
            parser.error(str(exc))
        names = [n for job in jobs for n in job]
        rows = compile_report(names, arches)
        print(compile_markdown(rows))
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"compile": rows}, indent=2) + "\n")
        bad = [r for r in rows if r.get("spill_stores") or r.get("spill_loads") or
               str(r.get("error", "")).startswith("compile error")]
        return 1 if bad else 0
    report, status = run_all(jobs, args)
    print(markdown(report) if "error" not in report else f"could not run: {report['error']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
