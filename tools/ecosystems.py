#!/usr/bin/env python3
"""The examples of examples/ecosystems/: which ones this machine can run, their specs, and
their verdicts and speed as a markdown table from ``--gemm-report`` JSON files.

    python3 tools/ecosystems.py --specs                  # --gemm-kernel arguments of the runnable ones
    python3 tools/ecosystems.py --specs --only triton    # ... of one group (triton, numba, rest)
    python3 tools/ecosystems.py a.json b.json            # the README's table from reports
    python3 tools/ecosystems.py --check a.json b.json    # ... and exit 1 unless each verdict is the expected one

An example whose package is missing is skipped with the reason (``unavailable``). Shared by
tests/test_ecosystems.py (no GPU), tests/test_ecosystems_gpu.py and tools/gpu_session.sh.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "examples" / "ecosystems"


@dataclass(frozen=True)
class Example:
    file: str                  # in examples/ecosystems/
    attr: str                  # what --gemm-kernel names
    kernel: str                # the kernel's name in the report
    ecosystem: str             # the README's first column
    needs: tuple[str, ...]     # modules it imports
    extra: str                 # pip install pytest-gemm[<extra>]
    verdict: str = "passed"
    category: str | None = None
    group: str = "rest"        # how tools/gpu_session.sh runs it: triton, numba, rest

    @property
    def spec(self) -> str:
        return f"examples/ecosystems/{self.file}:{self.attr}"


_CUPY = ("cupy",)
EXAMPLES: tuple[Example, ...] = (
    Example("cuda_c.py", "tiled", "cuda_c_tiled", "CUDA C (`CudaKernel`, a .cu file)", _CUPY, "cuda12"),
    Example("cupy_rawmodule.py", "tiled", "cupy_rawmodule_tiled", "CuPy `RawModule`", _CUPY, "cuda12"),
    Example("cupy_matmul.py", "matmul", "cupy_matmul", "`cupy.matmul` (cuBLAS)", _CUPY, "cuda12"),
    Example("triton_matmul.py", "matmul_fp16", "triton_tutorial_fp16", "Triton, tutorial 03 with autotune, fp16",
            _CUPY + ("torch", "triton"), "triton", group="triton"),
    Example("triton_matmul.py", "matmul_fp32", "triton_tutorial_fp32", "Triton, tutorial 03 with autotune, fp32",
            _CUPY + ("torch", "triton"), "triton", "failed", "precision_too_low", group="triton"),
    Example("numba_shared.py", "matmul", "numba_shared", "Numba CUDA (shared-memory matmul of its docs)",
            _CUPY + ("numba",), "numba", group="numba"),
    Example("torch_extension.py", "matmul", "torch_extension", "torch CUDA extension (`load_inline`)",
            _CUPY + ("torch",), "torch"),
    Example("kernelbench_module.py", "ModelNew", "ModelNew", "KernelBench `ModelNew` (`torch.nn.Module`)",
            _CUPY + ("torch",), "torch"),
)


def unavailable(example: Example) -> str | None:
    """Why this machine cannot run ``example`` (a missing package), or None."""
    missing = [name for name in example.needs if importlib.util.find_spec(name) is None]
    if missing:
        return (f"{example.file}: {', '.join(missing)} not installed; "
                f"pip install pytest-gemm[{example.extra}]")
    return None


def _bench(k: dict[str, Any]) -> dict[str, Any] | None:
    timings = k.get("timings") or []
    return max(timings, key=lambda t: (t.get("shape") or [0, 0, 0])[0]) if timings else None


def _by_name(reports: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The reports' kernels by name (a later report's entry wins)."""
    return {k["name"]: k for report in reports for k in report.get("kernels", [])}


def rows(reports: Sequence[dict[str, Any]]) -> list[list[str]]:
    """One row per example, found by kernel name in any of ``reports`` (later ones win)."""
    kernels = _by_name(reports)
    out = []
    for ex in EXAMPLES:
        k = kernels.get(ex.kernel)
        if k is None:
            out.append([ex.ecosystem, f"`{ex.file}:{ex.attr}`", "not run", "", "", ""])
            continue
        verdict = k["verdict"] + (f" ({k['primary_category']})" if k.get("primary_category") else "")
        t = _bench(k)
        speed = fraction = ""
        notes = []
        if t is not None and k["verdict"] != "passed":
            notes.append("not ranked: a failed kernel's speed is not reported")
        elif t is not None:
            speed = f"{t['tflops']:.1f} at {'x'.join(map(str, t['shape']))}"
            if isinstance(t.get("fraction_of_cublas"), (int, float)):
                fraction = f"{t['fraction_of_cublas']:.2f}"
        if t is not None:
            if t.get("autotune"):
                notes.append(f"autotune chose {t['autotune']}")
            if t.get("result_copy"):
                notes.append("result copied into C in each timed call")
        runs = {c["check"] for c in k.get("checks", [])}
        checks = len(k.get("checks", []))
        spent = sum(c.get("wall_s") or 0.0 for c in k.get("checks", []))
        notes.append(f"{checks} checks ({', '.join(sorted(runs))}) in {spent:.0f} s" if checks else "no checks")
        out.append([ex.ecosystem, f"`{ex.file}:{ex.attr}`", verdict, speed, fraction, "; ".join(notes)])
    return out


HEADERS = ("ecosystem", "kernel", "verdict", "TFLOP/s", "of cuBLAS", "notes")


def table(reports: Sequence[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(reports)]
    return "\n".join(lines)


def wrong_verdicts(reports: Sequence[dict[str, Any]]) -> list[str]:
    """Each example present in ``reports`` whose verdict is not the expected one."""
    kernels = _by_name(reports)
    wrong = []
    for ex in EXAMPLES:
        k = kernels.get(ex.kernel)
        if k is not None and (k["verdict"], k.get("primary_category")) != (ex.verdict, ex.category):
            wrong.append(f"{ex.kernel}: {k['verdict']} / {k.get('primary_category')} ({k.get('diagnosis')}); "
                         f"expected {ex.verdict} / {ex.category}")
    return wrong


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="*", type=Path, help="--gemm-report JSON files")
    parser.add_argument("--specs", action="store_true", help="print --gemm-kernel arguments of the runnable examples")
    parser.add_argument("--only", choices=("triton", "numba", "rest"), help="with --specs: one group")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every reported verdict is the expected one")
    args = parser.parse_args(argv)
    if args.specs:
        for ex in EXAMPLES:
            if args.only and ex.group != args.only:
                continue
            reason = unavailable(ex)
            if reason:
                print(f"skipped: {reason}", file=sys.stderr)
            else:
                print(f"--gemm-kernel {ex.spec}", end=" ")
        print()
        return 0
    reports = [json.loads(p.read_text()) for p in args.reports if p.is_file()]
    text = table(reports)
    print(text)
    wrong = wrong_verdicts(reports)
    for line in wrong:
        print(f"UNEXPECTED {line}", file=sys.stderr)
    return 1 if args.check and wrong else 0


if __name__ == "__main__":
    sys.exit(main())
