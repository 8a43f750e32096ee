"""What a kernel launched: its GPU launches as CUPTI traced them (``measure/trace.py``), and the
judges read from them. Pure: tested on plain records, with no GPU and no CUPTI.

- ``Launch``: one GPU kernel launch (demangled name, grid, block, registers, static and
  dynamic shared memory, GPU start and end, stream) and the kernel call it was launched in.
- ``summary_line``: ``3 launches: my_kernel<128,128> x2, splitk_reduce x1``.
- ``vendor_kernels``: launches of a vendor library (cuBLAS, cuBLASLt, CUTLASS, cuDNN, or the
  course's own patterns), by name: what a course that requires the student's own kernel fails.
- ``call_escape``: the timed calls compared with their launches: fewer launches than calls
  (one launch serving several calls), or work still running after the harness had awaited
  the call (its end event completed). ``call_kernel_ms``: each timed call's GPU kernel time.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence
import ctypes
import ctypes.util


@dataclass(frozen=True)
class Launch:
    """One GPU kernel launch. Times are CUPTI's nanoseconds (one clock for host and GPU)."""

    name: str                           # demangled
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers: int
    static_shared: int
    dynamic_shared: int
    start_ns: int
    end_ns: int
    stream: int = 0
    correlation: int = 0
    call: int | None = None             # the kernel call it was launched in; None: outside the kernel's calls

    @property
    def gpu_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6

    @property
    def short(self) -> str:
        return short_name(self.name)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["grid"], d["block"] = list(self.grid), list(self.block)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Launch":
        return cls(**{**d, "grid": tuple(d["grid"]), "block": tuple(d["block"])})


def launch_from_activity(a: Any, call: int | None = None) -> Launch:
    """A CUPTI kernel activity record (``cupti.ActivityKernel*``: its documented fields) as a Launch."""
    return Launch(name=demangle(str(a.name)), grid=(int(a.grid_x), int(a.grid_y), int(a.grid_z)),
                  block=(int(a.block_x), int(a.block_y), int(a.block_z)),
                  registers=int(a.registers_per_thread), static_shared=int(a.static_shared_memory),
                  dynamic_shared=int(a.dynamic_shared_memory), start_ns=int(a.start), end_ns=int(a.end),
                  stream=int(getattr(a, "stream_id", 0)), correlation=int(getattr(a, "correlation_id", 0)), call=call)


# ---- names ---------------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """A C++ symbol demangled by the C++ runtime's own demangler (``abi::__cxa_demangle`` in
    libstdc++, as the CUDA tools and TensorFlow's CUPTI tracer do; CUPTI reports the mangled
    name); anything that is not a mangled name (an ``extern "C"`` kernel, Triton's) as it is."""
    if not name.startswith("_Z"):
        return name
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        fn = lib.__cxa_demangle
        fn.restype = ctypes.c_void_p
        status = ctypes.c_int()
        out = fn(name.encode(), None, None, ctypes.byref(status))
        if not out or status.value != 0:
            return name
        try:
            return ctypes.string_at(out).decode()
        finally:
            ctypes.CDLL(None).free(ctypes.c_void_p(out))
    except (OSError, AttributeError):
        return name


def _top_level(text: str, open_at: int) -> int:
    """Index of the first '(' outside template brackets at or after ``open_at`` (-1: none)."""
    depth = 0
    for i in range(open_at, len(text)):
        ch = text[i]
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            return i
    return -1


def short_name(demangled: str, width: int = 80) -> str:
    """``void my_kernel<128, 128>(float const*, ...)`` -> ``my_kernel<128,128>`` (clipped to ``width``)."""
    text = demangled.strip()
    if text.startswith("void "):
        text = text[5:]
    cut = _top_level(text, 0)
    if cut > 0:
        text = text[:cut]
    text = re.sub(r",\s+", ",", text)
    return text if len(text) <= width else text[:width - 3] + "..."


# ---- grouping and the summary line ---------------------------------------------------------

def group(launches: Iterable[Launch]) -> list[dict[str, Any]]:
    """One entry per kernel (by demangled name, in order of first launch): how many launches,
    their grids and blocks, registers, shared memory, and GPU time (total and median)."""
    by_name: dict[str, list[Launch]] = {}
    for launch in launches:
        by_name.setdefault(launch.name, []).append(launch)
    entries = []
    for name, ls in by_name.items():
        times = [x.gpu_ms for x in ls]
        entries.append({"name": name, "short": short_name(name), "count": len(ls),
                        "grids": [list(g) for g in dict.fromkeys(x.grid for x in ls)][:4],
                        "block": list(ls[0].block), "registers": ls[0].registers,
                        "static_shared": ls[0].static_shared,
                        "dynamic_shared": max(x.dynamic_shared for x in ls),
                        "gpu_ms": round(sum(times), 6), "median_ms": round(statistics.median(times), 6)})
    return entries


def summary_line(entries: Sequence[Mapping[str, Any]]) -> str:
    """``3 launches: my_kernel<128,128> x2, splitk_reduce x1`` (``group``'s entries)."""
    total = sum(int(e["count"]) for e in entries)
    if not total:
        return "no GPU kernel launched"
    return f"{total} launch{'es' if total != 1 else ''}: " + ", ".join(f"{e['short']} x{e['count']}" for e in entries)


# ---- vendor libraries ----------------------------------------------------------------------

# Kernel-name patterns of the vendor libraries (searched in the demangled name, case-insensitive).
# cuBLAS names its kernels after the library (cublas, cublasLt::), its GEMM families (nvjet_ on
# Hopper and later, xmma_gemm, <arch>_sgemm/hgemm/...) or its helpers (gemv, splitKreduce, gemmk1,
# gemmSN); CUTLASS kernels live in its namespace or carry its name; cuDNN the same.
VENDOR_PATTERNS: dict[str, tuple[str, ...]] = {
    "cuBLASLt": (r"cublasLt", r"\bnvjet_"),
    "cuBLAS": (r"cublas", r"xmma_gemm", r"\b(?:sm\d+|maxwell|pascal|volta|turing|ampere|hopper|ada)_[a-z]*gemm",
               r"\bgemv", r"\bscal_kernel", r"\bsplitKreduce_kernel", r"\bgemmk1_kernel", r"\bgemmSN_",
               r"\bgemmSmall"),
    "CUTLASS": (r"cutlass",),
    "cuDNN": (r"cudnn", r"xmma_fprop", r"xmma_dgrad", r"xmma_wgrad", r"implicit_convolve_sgemm"),
}


def vendor_library(name: str, extra: Sequence[str] = ()) -> str | None:
    """The vendor library a kernel name belongs to, ``"course list"`` for one of the course's
    own patterns (``extra``: regular expressions), or None."""
    for library, patterns in VENDOR_PATTERNS.items():
        if any(re.search(p, name, re.IGNORECASE) for p in patterns):
            return library
    if any(re.search(p, name) for p in extra):
        return "course list"
    return None


def vendor_kernels(entries: Sequence[Mapping[str, Any]], extra: Sequence[str] = ()) -> list[tuple[str, str, int]]:
    """(short name, library, launches) of every vendor kernel among ``group``'s entries."""
    found = []
    for e in entries:
        library = vendor_library(str(e["name"]), extra)
        if library is not None:
            found.append((str(e["short"]), library, int(e["count"])))
    return found


def vendor_sentence(found: Sequence[tuple[str, str, int]]) -> str:
    return "; ".join(f"{name} ({library}) x{count}" for name, library, count in found)


# ---- the timed calls against their launches -------------------------------------------------

@dataclass(frozen=True)
class CallWindow:
    """One call of the kernel's launcher: when it was entered and returned (host), and, for a
    timed call, when the harness's wait for it ended (its end event had completed: ``awaited_ns``)."""

    index: int
    entered_ns: int
    returned_ns: int
    awaited_ns: int | None = None


LATE_TOLERANCE_NS = 50_000  # CUPTI's GPU timestamps against its host clock: tens of microseconds at worst


def _by_call(launches: Iterable[Launch]) -> dict[int, list[Launch]]:
    out: dict[int, list[Launch]] = {}
    for launch in launches:
        if launch.call is not None:
            out.setdefault(launch.call, []).append(launch)
    return out


def call_escape(calls: Sequence[CallWindow], launches: Sequence[Launch]) -> tuple[str, list[str]] | None:
    """(summary, details) when the timed calls (those awaited) and their launches disagree, else None:

    - work still running after a call returned: a launch of a timed call that ended after the
      harness's wait for that call had ended (its end event completed, so the GPU work the
      harness awaits, everything on the stream it times, was done); a kernel launched
      asynchronously on that stream, however long after the launcher returned it runs, ends
      before that and is never flagged;
    - fewer launches than calls: some timed calls launched GPU kernels and others none, so those
      calls' outputs came from other calls' launches (a merged launch) or from none (a kept result)
      (a launcher that never launches a kernel, working with copies
      alone, is not judged here).
    """
    timed = [c for c in calls if c.awaited_ns is not None]
    if not timed:
        return None
    mine = _by_call(launches)
    late = [(c, x) for c in timed for x in mine.get(c.index, []) if x.end_ns > c.awaited_ns + LATE_TOLERANCE_NS]
    if late:
        call, worst = max(late, key=lambda cx: cx[1].end_ns - cx[0].awaited_ns)  # type: ignore[operator]
        calls_late = len({c.index for c, _ in late})
        return (f"work still running after a call returned: in {calls_late} of {len(timed)} timed calls a GPU "
                f"kernel was still running after the harness's wait for that call had ended "
                f"({worst.short}: {(worst.end_ns - call.awaited_ns) / 1e6:.3f} ms after it): not ranked",
                ["the harness waits for the work on the stream it times (its end event); work left running "
                 "after that (another stream, another thread, a kernel that keeps going) is not in the timing",
                 "launch all work on the current stream (cupy.cuda.get_current_stream()) and let each call's "
                 "work finish with that call"])
    counts = [len(mine.get(c.index, [])) for c in timed]
    idle = sum(1 for n in counts if n == 0)
    if idle and sum(counts):
        names = summary_line(group(x for c in timed for x in mine.get(c.index, [])))
        return (f"fewer launches than calls: {len(timed)} timed calls launched {sum(counts)} GPU kernel"
                f"{'s' if sum(counts) != 1 else ''} ({names}); {idle} calls launched none, so their outputs "
                "were not computed by launches of their own: not ranked",
                ["each call must compute its own output with its own launches: a kernel that batches or "
                 "merges calls is timed for less work than it was asked to do"])
    return None


def kernel_rate_escape(calls: Sequence[CallWindow], launches: Sequence[Launch], flops: float,
                       roof_tflops: float, basis: str, margin: float) -> tuple[str, list[str]] | None:
    """(summary, details) when every timed call launched GPU kernels and yet their GPU time (the
    median over the calls) is too short for the product at this GPU's roof (``margin`` times it),
    else None: the outputs were not computed by the calls' own kernels (a result kept from an
    earlier call and copied). The event time cannot show it where a launcher's Python overhead
    fills the call (a memoizing launcher read 180 TFLOP/s by its events, under the 3xTF32 roof,
    and 467 by its kernels). Calls with no kernel at all are not judged here (``call_escape``)."""
    timed = [c for c in calls if c.awaited_ns is not None]
    mine = _by_call(launches)
    if not timed or roof_tflops <= 0 or flops <= 0 or any(not mine.get(c.index) for c in timed):
        return None
    kernel_ms = statistics.median(call_kernel_ms(timed, launches))
    rate = flops / (kernel_ms * 1e9) if kernel_ms > 0 else 0.0
    if rate <= margin * roof_tflops:
        return None
    names = summary_line(group(x for c in timed for x in mine.get(c.index, [])))
    return (f"the kernels of a timed call ran {kernel_ms:.4f} ms on the GPU (median of {len(timed)} calls): "
            f"{rate:.1f} TFLOP/s, faster than this GPU's {basis} roof ({roof_tflops:.1f} TFLOP/s), so they did "
            "not compute the product: not ranked",
            [f"their launches: {names}",
             "each call must compute its own output: a result kept from an earlier call and copied is "
             "timed for a copy, not for the product"])


def _union_ms(spans: list[tuple[int, int]]) -> float:
    total, end = 0, None
    for s, e in sorted(spans):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total / 1e6


def call_kernel_ms(calls: Sequence[CallWindow], launches: Sequence[Launch]) -> list[float]:
    """The GPU time of each timed call's own launches (their union: overlapping kernels once)."""
    mine = _by_call(launches)
    return [_union_ms([(x.start_ns, x.end_ns) for x in mine[c.index]])
            for c in calls if c.awaited_ns is not None and mine.get(c.index)]


def kernel_time_facts(calls: Sequence[CallWindow], launches: Sequence[Launch], event_ms: float) -> dict[str, Any] | None:
    """Kernel time beside event time: the median of the timed calls' kernel times, the event
    median, and the difference (the launcher's overhead per call inside the timed region)."""
    per_call = call_kernel_ms(calls, launches)
    if not per_call:
        return None
    kernel_ms = statistics.median(per_call)
    timed = [c for c in calls if c.awaited_ns is not None]
    launched = sum(len(v) for k, v in _by_call(launches).items() if k in {c.index for c in timed})
    return {"kernel_ms": kernel_ms, "event_ms": event_ms, "overhead_ms": event_ms - kernel_ms,
            "calls": len(timed), "launches_per_call": launched / len(timed) if timed else 0.0}
