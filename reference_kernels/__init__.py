"""The reference ladder: every rung a conformance target, slowest to fastest.

Each CUDA rung is a ``.cu`` file in this package (shipped as package data)
declared below as a :class:`~pytest_gemm.CudaKernel`; parameters reach the
source as ``-D`` options. The cuBLAS baselines are Python launchers in
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
    source="naive_rows.cu", entry="gemm_naive_rows", block=(16, 16), tile=(16, 16),
    signature=_AB, precision="fp32", min_cc=(7, 0), name="naive-rows",
)
naive_coalesced = CudaKernel(
    source="naive_coalesced.cu", entry="gemm_naive_coalesced", block=(32, 32), tile=(32, 32),
    signature=_AB, precision="fp32", min_cc=(7, 0), name="naive-coalesced",
)
tiled16 = CudaKernel(
    source="tiled.cu", entry="gemm_tiled", block=(16, 16), tile=(16, 16),
    signature=_AB, precision="fp32", min_cc=(7, 0), options=("-DTILE=16",), name="tiled16",
)
tiled32 = CudaKernel(
    source="tiled.cu", entry="gemm_tiled", block=(32, 32), tile=(32, 32),
    signature=_AB, precision="fp32", min_cc=(7, 0), options=("-DTILE=32",), name="tiled32",
)
regtile1d = CudaKernel(
    source="regtile1d.cu", entry="gemm_regtile1d", block=(512,), tile=(64, 64),
    signature=_AB, precision="fp32", min_cc=(7, 0), name="regtile1d",
)
regtile2d = CudaKernel(
    source="regtile2d.cu", entry="gemm_regtile2d", block=(256,), tile=(128, 128),
    signature=_AB_ALPHA_BETA, precision="fp32", min_cc=(7, 0), name="regtile2d",
)
vectorized = CudaKernel(
    source="vectorized.cu", entry="gemm_vectorized", block=(256,), tile=(128, 128),
    signature=_AB_ALPHA_BETA, precision="fp32", min_cc=(7, 0), name="vectorized",
)
warptile = CudaKernel(
    source="warptile.cu", entry="gemm_warptile", block=(256,), tile=(128, 128),
    signature=_AB_ALPHA_BETA, precision="fp32", min_cc=(7, 0), name="warptile",
)


def sgemm_smem_bytes(bm: int, bn: int, bk: int, fill: int, stages: int) -> int:
    """Dynamic shared memory of sgemm.cu: per stage the A tile (transposed BK x (BM+4)
    for fill 0, BM x (BK+4) for fill 1) and the B tile BK x BN, in floats; fill 0 has 2 stages."""
    if fill == 0:
        return 2 * (bk * (bm + 4) + bk * bn) * 4
    return stages * (bm * (bk + 4) + bk * bn) * 4


def sgemm_kernel(bn: int, bk: int, fill: int, stages: int, min_blocks: int, name: str | None = None) -> CudaKernel:
    """sgemm.cu built for a 128 x ``bn`` block tile and K slices of ``bk``: fill 0, register
    prefetch into two shared buffers (A transposed, name ``...-rp2``); fill 1, a cp.async ring of
    ``stages`` slices (``...-cp<stages>``). The rung ``warptile-256`` and the candidates."""
    bm = 128
    kind = "rp" if fill == 0 else "cp"
    depth = 2 if fill == 0 else stages
    return CudaKernel(
        source="sgemm.cu", entry="gemm_sgemm", block=(256,), tile=(bm, bn),
        signature=_AB, precision="fp32",
        # cp.async needs sm_80; the register-prefetch fill runs wherever warptile.cu does.
        min_cc=(7, 0) if fill == 0 else (8, 0),
        shared_mem=sgemm_smem_bytes(bm, bn, bk, fill, depth),
        options=(f"-DSG_BM={bm}", f"-DSG_BN={bn}", f"-DSG_BK={bk}", f"-DSG_FILL={fill}",
                 f"-DSG_STAGES={depth}", f"-DSG_MIN_BLOCKS={min_blocks}"),
        name=name or f"sgemm-{bm}x{bn}x{bk}-{kind}{depth}",
    )


# The top FP32 SIMT rung: warptile's warp and lane layout widened to 128 x 256 blocks (8 warps
# of 64 x 64, 8 x 16 outputs per lane, cuBLAS's own work per thread), K slices of 16 prefetched
# into registers and stored into two shared buffers, one barrier per slice. NOTES.md: measured.
warptile_256 = sgemm_kernel(256, 16, fill=0, stages=2, min_blocks=1, name="warptile-256")

wmma_fp16 = CudaKernel(
    source="wmma.cu", entry="gemm_wmma_fp16", block=(128,), tile=(64, 64),
    signature=_AB, precision="fp16", min_cc=(7, 0), name="wmma-fp16",
)
wmma_bf16 = CudaKernel(
    source="wmma.cu", entry="gemm_wmma_bf16", block=(128,), tile=(64, 64),
    signature=_AB, precision="bf16", min_cc=(8, 0), name="wmma-bf16",
)
pipeline_sync = CudaKernel(
    source="pipeline.cu", entry="gemm_pipeline_sync", block=(256,), tile=(64, 64),
    signature=_AB, precision="fp32", min_cc=(7, 0), name="pipeline-sync",
)


def _cpasync(stages: int) -> CudaKernel:
    return CudaKernel(
        source="pipeline.cu", entry="gemm_pipeline_cpasync", block=(256,), tile=(64, 64),
        signature=_AB, precision="fp32", min_cc=(8, 0), options=(f"-DSTAGES={stages}",),
        name=f"cpasync{stages}",
    )


cpasync2 = _cpasync(2)
cpasync3 = _cpasync(3)
cpasync4 = _cpasync(4)

MMA_BK = 64  # the K slice of mma_fp16.cu's rung (-DMMA_BK): one 128-byte swizzled row of A (32 also builds)


def mma_smem_bytes(bm: int, bn: int, stages: int, bk: int = MMA_BK, mbar: bool = False) -> int:
    """Dynamic shared memory of mma_fp16.cu: STAGES x (BM x BK + BK x BN) halves, and with
    ``mbar`` two 8-byte mbarriers per stage after them."""
    return stages * (bm * bk + bk * bn) * 2 + (2 * stages * 8 if mbar else 0)


def mma_fp16_kernel(bm: int, bn: int, wm: int, wn: int, stages: int, min_blocks: int,
                    name: str | None = None, bk: int = MMA_BK, spread: int = 3, lean: bool = False,
                    smem_epilogue: bool = False, mbar: bool = False, copy_at: int = 0, try_wait: bool = False,
                    arrive_all: bool = False, copy_early: bool = False) -> CudaKernel:
    """mma_fp16.cu built for a block tile ``bm x bn``, warp tiles ``wm x wn`` and a cp.async
    ring of ``stages`` K slices of ``bk`` (the rung below, and the variants in ``candidates``);
    ``spread``: the steady-state loop issues the next slice's copies over that many k16 steps
    (``-DMMA_SPREAD``, name suffix ``-cs<n>``); ``lean``: the inner blocks' loop of issue 29
    (``-DMMA_LEAN=1``, name suffix ``-lean``); ``smem_epilogue``: C staged through shared memory
    and stored as float4 rows (``-DMMA_SMEM_EPILOGUE=1``, ``-se``); ``mbar``: the ring guarded by
    mbarriers instead of a block barrier per slice (``-DMMA_MBAR=1``, ``-mbar``), its copies
    issued from k16 step ``copy_at`` on (``-DMMA_COPY_AT``, ``-at<n>``), waited for with sm_90's
    ``try_wait`` (``try_wait``: ``-DMMA_TRY_WAIT=1``, ``-tw``), released by every thread rather than
    one per warp (``arrive_all``: ``-DMMA_ARRIVE_ALL=1``, ``-aa``), the copies after the first copy
    step issued at the start of their k16 step (``copy_early``: ``-DMMA_COPY_EARLY=1``, ``-ce``)."""
    threads = (bm // wm) * (bn // wn) * 32
    options = (f"-DMMA_BM={bm}", f"-DMMA_BN={bn}", f"-DMMA_WM={wm}", f"-DMMA_WN={wn}", f"-DMMA_BK={bk}",
               f"-DMMA_STAGES={stages}", f"-DMMA_MIN_BLOCKS={min_blocks}", f"-DMMA_SPREAD={spread}")
    flags = (("-DMMA_LEAN=1", lean, "-lean"), ("-DMMA_MBAR=1", mbar, "-mbar"),
             (f"-DMMA_COPY_AT={copy_at}", copy_at != 0, f"-at{copy_at}"),
             ("-DMMA_COPY_EARLY=1", copy_early, "-ce"), ("-DMMA_TRY_WAIT=1", try_wait, "-tw"),
             ("-DMMA_ARRIVE_ALL=1", arrive_all, "-aa"),
             ("-DMMA_SMEM_EPILOGUE=1", smem_epilogue, "-se"))
    return CudaKernel(
        source="mma_fp16.cu", entry="gemm_mma_fp16", block=(threads,), tile=(bm, bn),
        signature=_AB, precision="fp16", min_cc=(8, 0), shared_mem=mma_smem_bytes(bm, bn, stages, bk, mbar),
        options=options + tuple(opt for opt, on, _ in flags if on),
        name=name or f"mma-fp16-{bm}x{bn}x{bk}-s{stages}-cs{spread}" + "".join(sfx for _, on, sfx in flags if on),
    )


# The top tensor-core rung: mma.sync m16n8k16 through ldmatrix, 8 warps of 64 x 64 on a
# 256 x 128 block tile, a 3-slice cp.async ring of K slices of 64 in unpadded, XOR-swizzled
# shared rows (144 KB: inside sm_80's 163 KB) guarded by full/empty mbarriers instead of a block
# barrier per slice, the next k16 step's fragments loaded during this step's mma.sync, the next
# slice's copies unchecked and spread over three k16 steps in the steady state (each issued at the
# start of its step; on sm_90 the waits use try_wait), and C staged through shared memory and
# stored as float4 rows. reference_kernels/NOTES.md: the variants measured (this build is candidate
# mma-fp16-256x128x64-s3-cs3-mbar-ce-tw-se since 2026-12-02, "Issue 29, fourth").
mma_fp16 = mma_fp16_kernel(256, 128, 64, 64, stages=3, min_blocks=1, name="mma-fp16", bk=64, spread=3,
                           mbar=True, smem_epilogue=True, copy_early=True, try_wait=True)

# The Hopper rung (wgmma.cu): TMA into 128-byte swizzled shared memory, wgmma.mma_async
# m64n256k16, a 4-stage mbarrier ring, a producer and two consumer warpgroups (setmaxnreg),
# persistent tiles; problems of at most one wave of tiles run its ping-pong build (5 stages, a
# 64 x 256 tile per consumer). Built for sm_90a and claimed on compute capability 9.0 only. A
# Python launcher (wgmma.py) because TMA needs tensor maps built on the host; it declares the
# three kernels it builds (builds=), so a machine with no GPU compile-checks them for sm_90a.


@kernel(precision="fp16", min_cc=(9, 0), arches=("sm_90a",), name="wgmma-fp16",
        builds=(_wgmma.main_kernel("fp16"), _wgmma.tail_kernel("fp16"),
                _wgmma.main_kernel("fp16", **_wgmma.ONE_WAVE_BUILD)))
def wgmma_fp16(a: Any, b: Any, c: Any) -> None:
    """wgmma.cu, fp16 in, fp32 out (TMA + wgmma; a tiled tail path where TMA cannot go)."""
    from .wgmma import launch

    launch("fp16", a, b, c)


@kernel(precision="bf16", min_cc=(9, 0), arches=("sm_90a",), name="wgmma-bf16",
        builds=(_wgmma.main_kernel("bf16"), _wgmma.tail_kernel("bf16"),
                _wgmma.main_kernel("bf16", **_wgmma.ONE_WAVE_BUILD)))
def wgmma_bf16(a: Any, b: Any, c: Any) -> None:
    """wgmma.cu, bf16 in (uint16 bit patterns), fp32 out."""
    from .wgmma import launch

    launch("bf16", a, b, c)


#: The Hopper rungs: Python launchers of sm_90a code, skipped on any other device.
HOPPER_RUNGS: list[PyKernel] = [wgmma_fp16, wgmma_bf16]

#: The CUDA rungs, in ladder order.
CUDA_RUNGS: list[CudaKernel] = [
    naive_rows, naive_coalesced, tiled16, tiled32, regtile1d, regtile2d, vectorized, warptile, warptile_256,
    wmma_fp16, wmma_bf16, mma_fp16, pipeline_sync, cpasync2, cpasync3, cpasync4,
]

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
    "LADDER", "CUDA_RUNGS", "HOPPER_RUNGS", "CUBLAS", "by_name", "wgmma_fp16", "wgmma_bf16",
    "naive_rows", "naive_coalesced", "tiled16", "tiled32", "regtile1d", "regtile2d", "vectorized",
    "warptile", "warptile_256", "wmma_fp16", "wmma_bf16", "mma_fp16", "pipeline_sync", "cpasync2", "cpasync3", "cpasync4",
    "cublas_fp32", "cublas_tf32", "cublas_fp16", "cublas_bf16", "mma_fp16_kernel", "mma_smem_bytes", "MMA_BK",
    "sgemm_kernel", "sgemm_smem_bytes",
]
