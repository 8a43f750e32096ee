"""Candidates for the top of the ladder: kernels to be measured, not yet rungs.

Nothing here is part of ``reference_kernels.LADDER``: a candidate becomes a rung
only after ``bench/perf_candidates.py`` has shown on a GPU that it is bit-exact
and worth ranking against. Two sources beside this file, each built several ways
through ``-D`` options (``bench/NOTES.md`` gives the reasoning and the predictions
for each). They are the rungs' sources with every knob the research used; the
rungs in ``reference_kernels/`` keep only their shipped build:

``mma_fp16.cu`` (``gemm_mma_fp16``; its 256 x 128 ``-mbar-ce-tw-se`` build is the rung ``mma-fp16``,
``reference_kernels/11_mma_fp16.cu``)
    fp16 in, fp32 accumulate: inline-PTX ``mma.sync.m16n8k16``, operands from
    XOR-swizzled shared memory through ``ldmatrix`` (``.trans`` for B), a
    ``cp.async`` ring of 3 K slices of 64 (guarded by a block barrier per slice,
    or by full/empty mbarriers: ``-mbar``), fragments one k16 step ahead, fp32
    pairs stored straight from the accumulators (or staged through shared
    memory and stored as float4 rows: ``-se``). sm_80+.
``sgemm.cu`` (``gemm_sgemm``; its 128 x 256 x 16 register-prefetch build is the rung ``warptile-256``,
``reference_kernels/08_warptile_256.cu``)
    FP32 FFMA only: 256 threads, warps 2 x 4, lanes 8 x 4, 8 x 8 or 8 x 16
    outputs per lane in 4-wide column groups; the shared tiles filled either by
    register prefetch into a double buffer (A transposed, "rp") or by a
    ``cp.async`` ring ("cp", A as stored, read conflict-free through an odd
    row pitch).

Three more sources here are copies of rungs that keep a build the rung does not ship:
``vectorized.cu`` and ``warptile.cu`` (``-DGEMM_NO_EDGE``: no edge handling, for
``bench/edge_cost.py``) and ``wgmma_clusters.cu`` (``-DWG_CLUSTER=2``: clusters multicasting B, for
``bench/wgmma_try.py``).

Every candidate handles any M, N, K >= 1 (ragged edges zero-filled, scalar
fallbacks when K or N is not a multiple of the vector width or a pointer is
misaligned). Importing this package never imports CuPy or touches CUDA.
"""
from __future__ import annotations

from pytest_gemm.model.contract import CudaKernel

_AB = "A,B,C,M,N,K"


def sgemm_smem_bytes(bm: int, bn: int, bk: int, fill: int, stages: int) -> int:
    """Dynamic shared memory of sgemm.cu: per stage the A tile (transposed BK x (BM+4)
    for fill 0, BM x (BK+4) for fill 1) and the B tile BK x BN, in floats; fill 0 has 2 stages."""
    if fill == 0:
        return 2 * (bk * (bm + 4) + bk * bn) * 4
    return stages * (bm * (bk + 4) + bk * bn) * 4


def sgemm_kernel(bn: int, bk: int, fill: int, stages: int, min_blocks: int, name: str | None = None) -> CudaKernel:
    """sgemm.cu built for a 128 x ``bn`` block tile and K slices of ``bk``: fill 0, register
    prefetch into two shared buffers (A transposed, name ``...-rp2``); fill 1, a cp.async ring of
    ``stages`` slices (``...-cp<stages>``). The rung ``warptile-256`` is its 128 x 256 x 16 ``rp2`` build."""
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
    ring of ``stages`` K slices of ``bk`` (the rung ``mma-fp16`` is its 256 x 128 ``-mbar-ce-tw-se`` build);
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




#: One line per candidate: what it is, for tables and NOTES.md (filled as each build is declared).
DESIGNS: dict[str, str] = {}


def _declare(kernel: CudaKernel, design: str) -> CudaKernel:
    DESIGNS[str(kernel.name)] = design
    return kernel


def _mma(design: str, bm: int, bn: int, wm: int, wn: int, stages: int, min_blocks: int, spread: int = 3,
         bk: int = MMA_BK, lean: bool = False, se: bool = False, mbar: bool = False, copy_at: int = 0,
         tw: bool = False, aa: bool = False, ce: bool = False) -> CudaKernel:
    return _declare(mma_fp16_kernel(bm, bn, wm, wn, stages, min_blocks, bk=bk, spread=spread, lean=lean,
                                    smem_epilogue=se, mbar=mbar, copy_at=copy_at, try_wait=tw, arrive_all=aa,
                                    copy_early=ce),
                    design)


def _sgemm(design: str, bn: int, bk: int, fill: int, stages: int, min_blocks: int) -> CudaKernel:
    return _declare(sgemm_kernel(bn, bk, fill, stages, min_blocks), design)


# Tensor cores, fp16 in / fp32 out: 8 warps of 64 x 64 (4 on 128 x 128), K slices of 64, the
# swizzled shared rows and the pipelined loop of the rung. The builds measured before (K slices
# of 32, padded rows, other loops, blocks grouped for the L2: NOTES.md) were taken out of
# mma_fp16.cu with their options; they are in its history up to commit 7303d22.
mma_256x128x64_s3_cs1 = _mma("the rung's build with the next slice's copies all issued in the first k16 step",
                             256, 128, 64, 64, stages=3, min_blocks=1, spread=1)
mma_256x128x64_s3_cs3 = _mma("256x128, 8 warps of 64x64, K slices of 64, 3-slice ring, copies over 3 k16 steps "
                             "(the rung mma-fp16)", 256, 128, 64, 64, stages=3, min_blocks=1, spread=3)
mma_128x256x64_s3_cs3 = _mma("128x256, 8 warps of 64x64, the same loop",
                             128, 256, 64, 64, stages=3, min_blocks=1, spread=3)
mma_128x128x64_s3_cs3 = _mma("128x128, 4 warps of 64x64, 2 blocks/SM on sm_90, the same loop",
                             128, 128, 64, 64, stages=3, min_blocks=2, spread=3)
# Issue 29: toward CUTLASS's best sm_80 kernel (128x256x32, 4 stages: 0.629-0.632 of cuBLAS fp16
# on the H200, the rung 0.572-0.575). K slices of 32 (64-byte A rows, swizzled in pairs), and the
# lean loop (-DMMA_LEAN=1: partial K slice first, one unchecked steady loop, a copy-free tail,
# 32-bit copy strides, the scalar fill not unrolled): 216-234 registers instead of 255, no
# spills; measured on the H200 no faster than the rung (0.96x with K slices of 32, 1.00x with
# 64; NOTES.md, "Issue 29: mma-fp16 toward CUTLASS's best sm_80 tile").
mma_128x256x32_s4_cs1 = _mma("CUTLASS's best tile: 128x256, K slices of 32 (A rows swizzled in pairs), 4-slice ring "
                             "(96 KB), the rung's loop", 128, 256, 64, 64, stages=4, min_blocks=1, spread=1, bk=32)
mma_128x256x32_s4_cs1_lean = _mma("the same tile with the lean loop (partial slice first, one unchecked steady loop, "
                                  "32-bit strides)", 128, 256, 64, 64, stages=4, min_blocks=1, spread=1, bk=32,
                                  lean=True)
mma_256x128x32_s4_cs1_lean = _mma("256x128, K slices of 32, 4-slice ring, the lean loop",
                                  256, 128, 64, 64, stages=4, min_blocks=1, spread=1, bk=32, lean=True)
mma_128x256x64_s3_cs3_lean = _mma("128x256x64, 3-slice ring, copies over 3 k16 steps, the lean loop",
                                  128, 256, 64, 64, stages=3, min_blocks=1, spread=3, lean=True)
mma_256x128x64_s3_cs3_lean = _mma("the rung's build with the lean loop",
                                  256, 128, 64, 64, stages=3, min_blocks=1, spread=3, lean=True)
# Issue 29, what separates the rung from CUTLASS (NOTES.md: its epilogue and its slice barrier
# each cost it about 6 %): C staged through shared memory and stored as float4 rows (se), and
# the ring guarded by mbarriers, no block barrier per slice (mbar; at1: copies from step 1 on).
mma_256x128x64_s3_cs3_se = _mma("the rung's build, C staged through shared memory and stored as float4 rows",
                                256, 128, 64, 64, stages=3, min_blocks=1, spread=3, se=True)
mma_256x128x64_s3_cs3_mbar = _mma("the rung's build, the ring guarded by full/empty mbarriers (no block barrier "
                                  "per slice)", 256, 128, 64, 64, stages=3, min_blocks=1, spread=3, mbar=True)
mma_256x128x64_s3_cs3_mbar_se = _mma("the rung's build with both: mbarrier ring and shared-memory epilogue",
                                     256, 128, 64, 64, stages=3, min_blocks=1, spread=3, mbar=True, se=True)
mma_256x128x64_s3_cs3_mbar_at1_se = _mma("mbarrier ring, copies from k16 step 1 (more slack for the slowest warp), "
                                         "shared-memory epilogue", 256, 128, 64, 64, stages=3, min_blocks=1,
                                         spread=3, mbar=True, copy_at=1, se=True)
mma_256x128x64_s3_cs1_mbar_se = _mma("mbarrier ring and shared-memory epilogue, the next slice's copies all in the "
                                     "first k16 step", 256, 128, 64, 64, stages=3, min_blocks=1, spread=1, mbar=True,
                                     se=True)
mma_256x128x64_s3_cs2_mbar_se = _mma("mbarrier ring and shared-memory epilogue, copies over two k16 steps",
                                     256, 128, 64, 64, stages=3, min_blocks=1, spread=2, mbar=True, se=True)
mma_256x128x64_s3_cs3_lean_mbar_se = _mma("the rung's tile with the lean loop, mbarrier ring, shared-memory "
                                          "epilogue", 256, 128, 64, 64, stages=3, min_blocks=1, spread=3, lean=True,
                                          mbar=True, se=True)
mma_128x256x64_s3_cs3_mbar_se = _mma("128x256x64, mbarrier ring, shared-memory epilogue",
                                     128, 256, 64, 64, stages=3, min_blocks=1, spread=3, mbar=True, se=True)
mma_256x128x32_s5_cs1_mbar_se = _mma("256x128, K slices of 32, 5-slice ring (120 KB), mbarrier ring, shared-memory "
                                     "epilogue", 256, 128, 64, 64, stages=5, min_blocks=1, spread=1, bk=32, mbar=True,
                                     se=True)
# The rung's build with waits that suspend (sm_90's try_wait), every thread releasing a stage, both.
mma_256x128x64_s3_cs3_mbar_tw_se = _mma("the rung's build waiting with sm_90's try_wait (may suspend) instead of "
                                        "spinning on test_wait", 256, 128, 64, 64, stages=3, min_blocks=1, spread=3,
                                        mbar=True, tw=True, se=True)
mma_256x128x64_s3_cs3_mbar_aa_se = _mma("the rung's build with every thread arriving on a stage's empty barrier "
                                        "(no __syncwarp)", 256, 128, 64, 64, stages=3, min_blocks=1, spread=3,
                                        mbar=True, aa=True, se=True)
mma_256x128x64_s3_cs3_mbar_tw_aa_se = _mma("the rung's build with both: try_wait, every thread arriving",
                                           256, 128, 64, 64, stages=3, min_blocks=1, spread=3, mbar=True, tw=True,
                                           aa=True, se=True)
# The rung's build with its steady loop's copies issued at the start of their k16 step (ptxas then
# spreads them between the mma.sync), alone and with try_wait: 862 and 835 stall cycles a slice
# in the loop's SASS against the rung's 872 (NOTES.md, "Issue 29, fourth").
mma_256x128x64_s3_cs3_mbar_ce_se = _mma("the rung's build with the copies issued at the start of their k16 step",
                                        256, 128, 64, 64, stages=3, min_blocks=1, spread=3, mbar=True, ce=True,
                                        se=True)
mma_256x128x64_s3_cs3_mbar_ce_tw_se = _mma("the rung's build with early copies and sm_90's try_wait",
                                           256, 128, 64, 64, stages=3, min_blocks=1, spread=3, mbar=True, ce=True,
                                           tw=True, se=True)
mma_128x256x64_s3_cs3_mbar_ce_tw_se = _mma("128x256x64 with the rung's early copies and try_wait",
                                           128, 256, 64, 64, stages=3, min_blocks=1, spread=3, mbar=True, ce=True,
                                           tw=True, se=True)
mma_128x256x64_s3_cs3_lean_se = _mma("128x256x64 lean, shared-memory epilogue",
                                     128, 256, 64, 64, stages=3, min_blocks=1, spread=3, lean=True, se=True)
mma_128x256x64_s3_cs3_lean_mbar_se = _mma("128x256x64 lean, mbarrier ring, shared-memory epilogue",
                                          128, 256, 64, 64, stages=3, min_blocks=1, spread=3, lean=True, mbar=True,
                                          se=True)
mma_128x256x32_s4_cs1_lean_mbar_se = _mma("CUTLASS's tile (128x256x32, 4 stages), lean, mbarrier ring, "
                                          "shared-memory epilogue", 128, 256, 64, 64, stages=4, min_blocks=1,
                                          spread=1, bk=32, lean=True, mbar=True, se=True)

# FP32 FFMA. 128 x 128 (8 x 8 per lane): 2 blocks per SM wanted; 128 x 256
# (8 x 16 per lane, cuBLAS's per-thread work): 1 block per SM.
sgemm_128x128x8_rp2 = _sgemm("warptile layout (8x8/lane, A transposed), register prefetch, 2 shared buffers, "
                             "1 barrier per K=8 slice", 128, 8, fill=0, stages=2, min_blocks=2)
sgemm_128x128x16_cp2 = _sgemm("8x8/lane, cp.async 2-slice ring, A untransposed (rows 8 apart per lane, odd pitch)",
                              128, 16, fill=1, stages=2, min_blocks=2)
sgemm_128x128x16_cp3 = _sgemm("the same, 3-slice ring", 128, 16, fill=1, stages=3, min_blocks=2)
sgemm_128x256x8_rp2 = _sgemm("8x16/lane (cuBLAS's work per thread), register prefetch, A transposed, 2 buffers",
                             256, 8, fill=0, stages=2, min_blocks=1)
sgemm_128x256x16_cp2 = _sgemm("8x16/lane, cp.async 2-slice ring, A untransposed",
                              256, 16, fill=1, stages=2, min_blocks=1)
sgemm_128x256x8_cp3 = _sgemm("8x16/lane, cp.async 3-slice ring of K=8 slices (cuBLAS's own tiling on this card is "
                             "256x128x8, 3 stages)", 256, 8, fill=1, stages=3, min_blocks=1)
# Issue 18: the register-prefetch fill with K slices of 16 (one barrier per 16 k, as warptile
# has two): warptile's own work per lane, 2 blocks per SM; and cuBLAS's per-lane work.
sgemm_128x128x16_rp2 = _sgemm("warptile's lanes (8x8, A transposed), register prefetch, 2 shared buffers, "
                              "1 barrier per K=16 slice, 2 blocks/SM", 128, 16, fill=0, stages=2, min_blocks=2)
sgemm_128x256x16_rp2 = _sgemm("8x16/lane, register prefetch, 2 shared buffers, 1 barrier per K=16 slice",
                              256, 16, fill=0, stages=2, min_blocks=1)

# The lists below are read off the declarations above (in their order), so a new build is
# declared in one place: its line here, with its design.
_DECLARED: dict[str, CudaKernel] = {attr: k for attr, k in list(globals().items()) if isinstance(k, CudaKernel)}
MMA_CANDIDATES: list[CudaKernel] = [k for attr, k in _DECLARED.items() if attr.startswith("mma_")]
SGEMM_CANDIDATES: list[CudaKernel] = [k for attr, k in _DECLARED.items() if attr.startswith("sgemm_")]

#: Every candidate by name (tensor-core ones first).
CANDIDATES: dict[str, CudaKernel] = {str(k.name): k for k in [*MMA_CANDIDATES, *SGEMM_CANDIDATES]}


def by_name(name: str) -> CudaKernel:
    """The candidate called ``name``."""
    try:
        return CANDIDATES[name]
    except KeyError:
        raise KeyError(f"no candidate named {name!r}; valid names: {', '.join(CANDIDATES)}") from None


__all__ = ["CANDIDATES", "MMA_CANDIDATES", "SGEMM_CANDIDATES", "DESIGNS", "by_name",
           "mma_smem_bytes", "sgemm_smem_bytes", "MMA_BK", *_DECLARED]
