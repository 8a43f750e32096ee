"""The reference ladder: every rung a conformance target, slowest to fastest.

Each CUDA rung is a numbered ``.cu`` file in this package (``01_naive_rows.cu`` ..
``12_wgmma.cu``, shipped as package data) declared once below as a
:class:`~pytest_gemm.CudaKernel`; the order of the declarations is the ladder's
order (``CUDA_RUNGS``). Parameters reach the source as ``-D`` options. The cuBLAS baselines are Python launchers in
``pytest_gemm/measure/cublas.py``. README.md in this directory has one line per rung: design,
tile, threads, and what it teaches. Every rung handles any M, N, K >= 1.

Importing this package never imports CuPy or touches CUDA.
"""
from __future__ import annotations

from typing import Any

from pytest_gemm.model.contract import CudaKernel, PyKernel, kernel

from pytest_gemm.measure.cublas import cublas_bf16, cublas_fp16, cublas_fp32, cublas_tf32
from . import wgmma as _wgmma

_AB = "A,B,C,M,N,K"
_AB_ALPHA_BETA = "A,B,C,M,N,K,alpha,beta"

naive_rows = CudaKernel(
    source="01_naive_rows.cu", entry="gemm_naive_rows", block=(16, 16), tile=(16, 16),
    signature=_AB, precision="fp32", min_cc=(7, 0), name="naive-rows",
)
naive_coalesced = CudaKernel(
    source="02_naive_coalesced.cu", entry="gemm_naive_coalesced", block=(32, 32), tile=(32, 32),
    signature=_AB, precision="fp32", min_cc=(7, 0), name="naive-coalesced",
)
tiled16 = CudaKernel(
    source="03_tiled.cu", entry="gemm_tiled", block=(16, 16), tile=(16, 16),
    signature=_AB, precision="fp32", min_cc=(7, 0), options=("-DTILE=16",), name="tiled16",
)
tiled32 = CudaKernel(
    source="03_tiled.cu", entry="gemm_tiled", block=(32, 32), tile=(32, 32),
    signature=_AB, precision="fp32", min_cc=(7, 0), options=("-DTILE=32",), name="tiled32",
)
regtile1d = CudaKernel(
    source="04_regtile1d.cu", entry="gemm_regtile1d", block=(512,), tile=(64, 64),
    signature=_AB, precision="fp32", min_cc=(7, 0), name="regtile1d",
)
regtile2d = CudaKernel(
    source="05_regtile2d.cu", entry="gemm_regtile2d", block=(256,), tile=(128, 128),
    signature=_AB_ALPHA_BETA, precision="fp32", min_cc=(7, 0), name="regtile2d",
)
vectorized = CudaKernel(
    source="06_vectorized.cu", entry="gemm_vectorized", block=(256,), tile=(128, 128),
    signature=_AB_ALPHA_BETA, precision="fp32", min_cc=(7, 0), name="vectorized",
)
warptile = CudaKernel(
    source="07_warptile.cu", entry="gemm_warptile", block=(256,), tile=(128, 128),
    signature=_AB_ALPHA_BETA, precision="fp32", min_cc=(7, 0), name="warptile",
)


# The top FP32 SIMT rung: warptile's warp and lane layout widened to 128 x 256 blocks (8 warps
# of 64 x 64, 8 x 16 outputs per lane, cuBLAS's own work per thread), K slices of 16 prefetched
# into registers and stored into two shared buffers, one barrier per slice. bench/NOTES.md: measured.
warptile_256 = CudaKernel(
    source="08_warptile_256.cu", entry="gemm_sgemm", block=(256,), tile=(128, 256),
    signature=_AB, precision="fp32", min_cc=(7, 0),
    shared_mem=2 * (16 * (128 + 4) + 16 * 256) * 4,  # two buffers of A^T (16 x 132) and B (16 x 256) floats
    name="warptile-256",
)

wmma_fp16 = CudaKernel(
    source="09_wmma.cu", entry="gemm_wmma_fp16", block=(128,), tile=(64, 64),
    signature=_AB, precision="fp16", min_cc=(7, 0), name="wmma-fp16",
)
wmma_bf16 = CudaKernel(
    source="09_wmma.cu", entry="gemm_wmma_bf16", block=(128,), tile=(64, 64),
    signature=_AB, precision="bf16", min_cc=(8, 0), name="wmma-bf16",
)
pipeline_sync = CudaKernel(
    source="10_pipeline.cu", entry="gemm_pipeline_sync", block=(256,), tile=(64, 64),
    signature=_AB, precision="fp32", min_cc=(7, 0), name="pipeline-sync",
)


def _cpasync(stages: int) -> CudaKernel:
    return CudaKernel(
        source="10_pipeline.cu", entry="gemm_pipeline_cpasync", block=(256,), tile=(64, 64),
        signature=_AB, precision="fp32", min_cc=(8, 0), options=(f"-DSTAGES={stages}",),
        name=f"cpasync{stages}",
    )


cpasync2 = _cpasync(2)
cpasync3 = _cpasync(3)
cpasync4 = _cpasync(4)


# The top tensor-core rung: mma.sync m16n8k16 through ldmatrix, 8 warps of 64 x 64 on a
# 256 x 128 block tile, a 3-slice cp.async ring of K slices of 64 in unpadded, XOR-swizzled
# shared rows (144 KB: inside sm_80's 163 KB) guarded by full/empty mbarriers instead of a block
# barrier per slice, the next k16 step's fragments loaded during this step's mma.sync, the next
# slice's copies unchecked and spread over three k16 steps in the steady state (each issued at the
# start of its step; on sm_90 the waits use try_wait), and C staged through shared memory and
# stored as float4 rows. bench/NOTES.md: the variants measured (this build is candidate
# mma-fp16-256x128x64-s3-cs3-mbar-ce-tw-se since 2026-12-02, "Issue 29, fourth").
mma_fp16 = CudaKernel(
    source="11_mma_fp16.cu", entry="gemm_mma_fp16", block=(256,), tile=(256, 128),
    signature=_AB, precision="fp16", min_cc=(8, 0),
    shared_mem=3 * (256 * 64 + 64 * 128) * 2 + 2 * 3 * 8,  # 3 stages of A and B halves, 2 mbarriers a stage
    name="mma-fp16",
)

#: The CUDA rungs, in ladder order: every CudaKernel declared above, in the order declared. A rung
#: is its numbered .cu file plus its one declaration here (tests/test_ladder_layout.py says what
#: else adding one touches).
CUDA_RUNGS: list[CudaKernel] = [v for v in dict(globals()).values() if isinstance(v, CudaKernel)]
_RUNG_ATTRS = [name for name, v in dict(globals()).items() if isinstance(v, CudaKernel)]


# The Hopper rung (12_wgmma.cu): TMA into 128-byte swizzled shared memory, wgmma.mma_async
# m64n256k16, a 4-stage mbarrier ring, a producer and two consumer warpgroups (setmaxnreg),
# persistent tiles; problems of at most one wave of tiles run its ping-pong build (5 stages, a
# 64 x 256 tile per consumer). Built for sm_90a and claimed on compute capability 9.0 only. A
# Python launcher (wgmma.py) because TMA needs tensor maps built on the host; it declares the
# three kernels it builds (builds=), so a machine with no GPU compile-checks them for sm_90a.


@kernel(precision="fp16", min_cc=(9, 0), arches=("sm_90a",), name="wgmma-fp16",
        builds=(_wgmma.main_kernel("fp16"), _wgmma.tail_kernel("fp16"),
                _wgmma.main_kernel("fp16", **_wgmma.ONE_WAVE_BUILD)))
def wgmma_fp16(a: Any, b: Any, c: Any) -> None:
    """12_wgmma.cu, fp16 in, fp32 out (TMA + wgmma; a tiled tail path where TMA cannot go)."""
    _wgmma.launch("fp16", a, b, c)


@kernel(precision="bf16", min_cc=(9, 0), arches=("sm_90a",), name="wgmma-bf16",
        builds=(_wgmma.main_kernel("bf16"), _wgmma.tail_kernel("bf16"),
                _wgmma.main_kernel("bf16", **_wgmma.ONE_WAVE_BUILD)))
def wgmma_bf16(a: Any, b: Any, c: Any) -> None:
    """12_wgmma.cu, bf16 in (uint16 bit patterns), fp32 out."""
    _wgmma.launch("bf16", a, b, c)


#: The Hopper rungs: Python launchers of sm_90a code, skipped on any other device.
HOPPER_RUNGS: list[PyKernel] = [wgmma_fp16, wgmma_bf16]

#: The cuBLAS baseline for each precision.
CUBLAS: dict[str, PyKernel] = {
    "fp32": cublas_fp32,
    "tf32": cublas_tf32,
    "fp16": cublas_fp16,
    "bf16": cublas_bf16,
}

#: Every rung and baseline, in ladder order.
LADDER: list[CudaKernel | PyKernel] = [*CUDA_RUNGS, *HOPPER_RUNGS, *CUBLAS.values()]


def by_name(name: str) -> CudaKernel | PyKernel:
    """The ladder entry called ``name`` (e.g. ``"tiled16"``, ``"cublas-fp32"``)."""
    for entry in LADDER:
        if entry.name == name:
            return entry
    raise KeyError(f"no reference kernel named {name!r}; valid names: {', '.join(str(k.name) for k in LADDER)}")


__all__ = [
    "LADDER", "CUDA_RUNGS", "HOPPER_RUNGS", "CUBLAS", "by_name", "wgmma_fp16", "wgmma_bf16", *_RUNG_ATTRS,
    "cublas_fp32", "cublas_tf32", "cublas_fp16", "cublas_bf16",
]
