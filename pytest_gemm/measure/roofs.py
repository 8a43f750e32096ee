"""Roofs: the rates a timing is judged and reported against.

Two kinds, used for two different questions.

*Theoretical peaks* (``roof_tflops``, ``memory_peak_gb_s``), from the SM count,
the clock and the memory bus. A time faster than they allow is physically
impossible, so they judge ``timing_escape`` (``ceilings`` and
``impossible_timing``): a rate above the arithmetic peak, or a time shorter
than the bytes a GEMM must move take at the memory peak. Where a peak is
unknown (no clock reported), or a measurement beat it (a wrong clock), the
measured roof x ``MEASURED_HEADROOM`` judges instead.

*Measured roofs* (``measured_roofs(device)``), once per device per process (a
sandbox child measures on its first speed check; the dict travels back in the
check's facts, so the report can show it). They are what "of roof" means in
the ranking, because no kernel reaches the datasheet figure:

- ``fp32``: ``gemm_roof_fma`` in ``roofs.cu``, CHAINS independent FMA chains
  per thread, a full wave of 256-thread blocks on every SM, the iteration count
  grown until one launch takes ``FMA_TARGET_MS`` (which also settles the clocks),
  then the median of ``REPEATS`` event-timed launches.
- ``fp16``, ``bf16``, ``tf32`` (tensor cores; bf16 and tf32 from sm_80): the
  practical roof, cuBLAS GemmEx (fp32 out, COMPUTE_32F, or FAST_TF32) at
  ``TENSOR_SIZE`` cubed on random inputs, timed with ``timing.time_gpu``.
- memory: a device-to-device ``cudaMemcpyAsync`` of a large buffer
  (``copy_bytes``), counting the bytes read and the bytes written.

A measurement that fails (no NVRTC, no cuBLAS type) is left out and its error
kept under ``"errors"``; ``roof_tflops`` is the fallback for reporting.
The pure helpers that turn times into rates are unit-tested with no GPU.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .timing import ROOF_MARGIN, TimingResult, above_roof

# FP32 FMA lanes per SM by major compute capability (sm_75: 64; sm_80: 64; sm_86/89: 128; sm_90: 128).
_FP32_LANES = {(7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128}
# Dense fp16/bf16 tensor FLOP per SM per clock (fp32 accumulate), the datasheets' rates: T4 65 TFLOP/s
# (40 SMs, 1590 MHz), A100 312 (108, 1410), A10 / A40 / L40S full rate (GeForce parts accumulate fp32
# at half that: the higher is kept, since a ceiling must bound every part), H100 989 (132, 1830).
_TENSOR_FLOP = {(7, 5): 1024, (8, 0): 2048, (8, 6): 1024, (8, 7): 1024, (8, 9): 1024, (9, 0): 4096}
_TENSOR_FLOP_UNKNOWN = 8192  # a GPU the table does not know: Blackwell's rate, an upper bound for the others

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")

# The FMA micro-benchmark (roofs.cu): the same CHAINS and UNROLL are passed to the compiler.
CHAINS = 8            # independent FMA chains per thread
UNROLL = 16           # FMA rounds per loop iteration
FMA_THREADS = 256     # threads per block
FMA_TARGET_MS = 20.0  # one timed launch lasts about this long
REPEATS = 5           # timed launches (FMA) or copies (memory); the median is kept
TENSOR_SIZE = 8192    # the cuBLAS tensor roof's M = N = K
MEASURED_HEADROOM = 1.25  # with no usable theoretical peak: impossible above 1.25 x the measured roof


# ---- theoretical peaks (pure) ------------------------------------------------

def fp32_peak_tflops(device: Any) -> float:
    lanes = _FP32_LANES.get(tuple(device.compute_capability), 128)
    return device.sm_count * lanes * 2 * device.clock_mhz * 1e6 / 1e12


def tensor_peak_tflops(device: Any) -> float:
    per_sm = _TENSOR_FLOP.get(tuple(device.compute_capability), _TENSOR_FLOP_UNKNOWN)
    return device.sm_count * per_sm * device.clock_mhz * 1e6 / 1e12


def fp32_accurate_peak_tflops(device: Any) -> float:
    """The fastest arithmetic that gives fp32 accuracy: the FP32 FMA lanes, or, from sm_80, three
    TF32 tensor-core products per product (3xTF32, as CUTLASS's fp32-accurate tensor-core GEMMs
    compute), whichever is faster. A kernel declared fp32 may legitimately beat the FMA peak that
    way: only a rate above this is physically impossible for it (a rate from a lower precision is
    the accuracy check's to judge, precision_too_low)."""
    fma = fp32_peak_tflops(device)
    if tuple(device.compute_capability) < (8, 0):
        return fma  # no TF32 tensor cores
    return max(fma, tensor_peak_tflops(device) / 2 / 3)


def roof_tflops(device: Any, precision: str) -> float:
    """The theoretical peak for this precision (0 when the clock is unknown)."""
    if not getattr(device, "clock_mhz", 0):
        return 0.0
    if precision == "fp32":
        return fp32_peak_tflops(device)
    if precision == "tf32":
        return tensor_peak_tflops(device) / 2
    return tensor_peak_tflops(device)


def memory_peak_gb_s(device: Any) -> float:
    """Theoretical DRAM bandwidth: memory clock x 2 (double data rate) x bus width (0 when unknown)."""
    clock = float(getattr(device, "memory_clock_mhz", 0) or 0)
    bus = int(getattr(device, "memory_bus_width", 0) or 0)
    return clock * 1e6 * 2 * bus / 8 / 1e9


# ---- times to rates (pure) -------------------------------------------------

def rate_tflops(flops: float, ms: float) -> float:
    """FLOPs done in ``ms`` milliseconds, in TFLOP/s (0 for a non-positive time)."""
    return flops / (ms * 1e-3) / 1e12 if ms > 0 else 0.0


def fma_flops(threads: int, iters: int, chains: int = CHAINS, unroll: int = UNROLL) -> float:
    """FLOPs of one ``gemm_roof_fma`` launch: 2 per FMA, chains x unroll FMAs per iteration per thread."""
    return 2.0 * chains * unroll * iters * threads


def copy_gb_s(nbytes: int, ms: float) -> float:
    """Bandwidth of a device-to-device copy of ``nbytes``: bytes read plus bytes written, in GB/s."""
    return 2.0 * nbytes / (ms * 1e-3) / 1e9 if ms > 0 else 0.0


def fma_blocks(sm_count: int, max_threads_per_sm: int, threads: int = FMA_THREADS) -> int:
    """Blocks of the FMA benchmark: a full wave, as many as fit on every SM (at least 2 per SM)."""
    per_sm = max(2, (max_threads_per_sm or 1024) // threads)
    return max(1, sm_count) * per_sm


def calibrated_iterations(iters: int, ms: float, target_ms: float = FMA_TARGET_MS) -> int:
    """The iteration count that makes a launch which took ``ms`` for ``iters`` last ``target_ms``
    (grown at most 64x per step, so a launch timed too short to resolve cannot explode it)."""
    if ms <= 0:
        return iters * 64
    return max(1, min(iters * 64, int(round(iters * target_ms / ms))))


def copy_bytes(total_memory: int, l2_bytes: int) -> int:
    """Bytes of the bandwidth copy: 1 GiB, or an eighth of memory on a small GPU, and always
    well past the L2 (8x), so the copy runs from DRAM."""
    size = min(1 << 30, max(total_memory // 8, 64 << 20))
    return max(size, 8 * l2_bytes)


def tensor_size(total_memory: int, size: int = TENSOR_SIZE) -> int:
    """The cuBLAS roof's M = N = K: TENSOR_SIZE, halved until its fp32 operands take a quarter of memory."""
    while size > 1024 and total_memory and 3 * 4 * size * size > total_memory // 4:
        size //= 2
    return size


def tensor_precisions(compute_capability: Sequence[int]) -> tuple[str, ...]:
    """Tensor-core precisions with a cuBLAS roof on this device: fp16 from sm_70, bf16 and tf32 from sm_80."""
    cc = tuple(compute_capability)
    if cc >= (8, 0):
        return ("fp16", "bf16", "tf32")
    return ("fp16",) if cc >= (7, 0) else ()


def measured_tflops(measured: dict[str, Any] | None, precision: str) -> float | None:
    """The measured roof for a precision, or None."""
    value = ((measured or {}).get("tflops") or {}).get(precision)
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def reported_roof(precision: str, measured: dict[str, Any] | None, theoretical: float) -> tuple[float, str]:
    """(roof, kind) a rate is reported as a fraction of: the measured roof when there is one,
    else the theoretical peak; (0, "none") when neither is known."""
    value = measured_tflops(measured, precision)
    if value:
        return value, "measured"
    return (theoretical, "theoretical") if theoretical > 0 else (0.0, "none")


# ---- what no honest timing can beat (pure) ---------------------------------

@dataclass(frozen=True)
class Ceilings:
    """The physical limits an honest timing stays under (0: unknown, nothing judged)."""

    tflops: float    # arithmetic: the theoretical peak (or the measured roof x MEASURED_HEADROOM)
    gb_s: float      # memory: the theoretical bandwidth (or the measured one x MEASURED_HEADROOM)
    l2_bytes: int    # bytes that may be served by the L2 instead of DRAM
    basis: str = ""  # what the arithmetic ceiling is, where it is not the precision's own peak


def _ceiling(theoretical: float, measured: float | None) -> float:
    """The theoretical peak; the measured roof x MEASURED_HEADROOM where there is no peak, or where
    the measurement beat it (then the device reported a wrong clock, and the peak cannot judge)."""
    if measured and measured > theoretical:
        return measured * MEASURED_HEADROOM
    return theoretical


def ceilings(device: Any, precision: str, measured: dict[str, Any] | None = None) -> Ceilings:
    """The theoretical peaks, with the measured roofs as a fallback (``_ceiling``)."""
    memory = (measured or {}).get("memory_gb_s")
    peak, basis = roof_tflops(device, precision), ""
    accurate = fp32_accurate_peak_tflops(device) if precision == "fp32" and peak > 0 else 0.0
    if accurate > peak:
        peak, basis = accurate, "fp32-accurate (3xTF32 on tensor cores)"
    return Ceilings(_ceiling(peak, measured_tflops(measured, precision)),
                    _ceiling(memory_peak_gb_s(device), float(memory) if isinstance(memory, (int, float)) else None),
                    int(getattr(device, "l2_bytes", 0) or 0), basis)


_INPUT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}


def compulsory_bytes(shape: Sequence[int], precision: str, l2_bytes: int = 0) -> float:
    """Bytes a GEMM must move through DRAM: A and B read once, C written once, less twice the
    L2 (what may already sit there, or still be unwritten, when the timed region ends)."""
    m, n, k = shape
    size = _INPUT_BYTES.get(precision, 4)
    return max(0.0, float(size * (m * k + k * n) + 4 * m * n - 2 * l2_bytes))


def below_memory_floor(timing: TimingResult, shape: Sequence[int], precision: str, gb_s: float,
                       l2_bytes: int = 0) -> tuple[str, list[str]] | None:
    """(summary, details) when the median is shorter than the compulsory bytes take at
    ``ROOF_MARGIN`` x ``gb_s``, else None (also when the bandwidth is unknown)."""
    moved = compulsory_bytes(shape, precision, l2_bytes)
    if gb_s <= 0 or moved <= 0 or timing.median_ms <= 0:
        return None
    achieved = moved / (timing.median_ms * 1e-3) / 1e9
    if achieved <= ROOF_MARGIN * gb_s:
        return None
    shape_text = "x".join(map(str, shape))
    return (f"{shape_text} in {timing.median_ms:.4f} ms moves at least {moved / 1e6:.1f} MB through memory, "
            f"{achieved:.0f} GB/s: faster than this GPU's memory ({gb_s:.0f} GB/s): not ranked",
            ["A and B must be read and C written at least once (less twice the L2, which may hold some of it)",
             "work was probably left outside the timed region (another stream or thread), "
             "or results were reused instead of computed"])


def impossible_timing(timing: TimingResult, shape: Sequence[int], precision: str,
                      limits: Ceilings) -> tuple[str, list[str]] | None:
    """Why a timing is physically impossible (a rate above the arithmetic ceiling, or a time
    below the memory floor), or None."""
    return (above_roof(timing, limits.tflops, limits.basis or precision)
            or below_memory_floor(timing, shape, precision, limits.gb_s, limits.l2_bytes))


# ---- combining and describing measurements (pure) --------------------------

def combine_roofs(measurements: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Several processes' measured roofs (one per sandbox) as one: the median of every figure,
    and how many measurements it came from. None when there is none."""
    found = [m for m in measurements if isinstance(m, dict) and (m.get("tflops") or m.get("memory_gb_s"))]
    if not found:
        return None
    tflops: dict[str, float] = {}
    for precision in PRECISIONS:
        values = [v for m in found if isinstance(v := (m.get("tflops") or {}).get(precision), (int, float))]
        if values:
            tflops[precision] = statistics.median(values)
    memory = [m["memory_gb_s"] for m in found if isinstance(m.get("memory_gb_s"), (int, float))]
    first = found[0]
    combined: dict[str, Any] = {
        "device": first.get("device"), "tflops": tflops,
        "memory_gb_s": statistics.median(memory) if memory else None,
        "theoretical_tflops": first.get("theoretical_tflops"),
        "theoretical_memory_gb_s": first.get("theoretical_memory_gb_s"),
        "methods": first.get("methods"), "measurements": len(found),
    }
    if len(found) > 1:
        spread = {p: (max(vs) - min(vs)) / statistics.median(vs)
                  for p in tflops if (vs := [m["tflops"][p] for m in found if p in (m.get("tflops") or {})])
                  and statistics.median(vs) > 0}
        combined["spread"] = spread
    return combined


def roofs_summary(roofs: dict[str, Any] | None) -> str | None:
    """One line for the terminal: each measured roof with its theoretical peak."""
    if not roofs:
        return None
    theory = roofs.get("theoretical_tflops") or {}
    parts = []
    for precision in PRECISIONS:
        value = (roofs.get("tflops") or {}).get(precision)
        if value:
            peak = theory.get(precision)
            kind = "FMA" if precision == "fp32" else "cuBLAS"
            parts.append(f"{precision}: {value:.1f} TFLOP/s ({kind}"
                         + (f", {100 * value / peak:.0f}% of the {peak:.1f} peak)" if peak else ")"))
    if roofs.get("memory_gb_s"):
        peak = roofs.get("theoretical_memory_gb_s")
        parts.append(f"memory: {roofs['memory_gb_s']:.0f} GB/s"
                     + (f" ({100 * roofs['memory_gb_s'] / peak:.0f}% of the {peak:.0f} peak)" if peak else ""))
    if not parts:
        return None
    count = roofs.get("measurements")
    where = f" (median of {count} processes)" if count and count > 1 else ""
    return "measured roofs" + where + ": " + "; ".join(parts)


# ---- measuring (GPU) -------------------------------------------------------
