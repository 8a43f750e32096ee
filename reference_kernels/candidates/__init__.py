"""Candidates for the top of the ladder: kernels to be measured, not yet rungs.

Nothing here is part of ``reference_kernels.LADDER``: a candidate becomes a rung
only after ``tools/perf_candidates.py`` has shown on a GPU that it is bit-exact
and worth ranking against. Two sources, each built several ways through ``-D``
options (NOTES.md beside the ladder's README gives the reasoning and the
predictions for each):

``../mma_fp16.cu`` (``gemm_mma_fp16``; its 128 x 256, 4-slice build is the rung ``mma-fp16``)
    fp16 in, fp32 accumulate: inline-PTX ``mma.sync.m16n8k16``, operands from
    padded shared memory through ``ldmatrix`` (``.trans`` for B), a
    ``cp.async`` ring of 3 or 4 K slices of 32, fp32 pairs stored straight from
    the accumulators. sm_80+.
``../sgemm.cu`` (``gemm_sgemm``; its 128 x 256 x 16 register-prefetch build is the rung ``warptile-256``)
    FP32 FFMA only: 256 threads, warps 2 x 4, lanes 8 x 4, 8 x 8 or 8 x 16
    outputs per lane in 4-wide column groups; the shared tiles filled either by
    register prefetch into a double buffer (A transposed, "rp") or by a
    ``cp.async`` ring ("cp", A as stored, read conflict-free through an odd
    row pitch).

Every candidate handles any M, N, K >= 1 (ragged edges zero-filled, scalar
fallbacks when K or N is not a multiple of the vector width or a pointer is
misaligned). Importing this package never imports CuPy or touches CUDA.
"""
from __future__ import annotations

from pytest_gemm.model.contract import CudaKernel
from reference_kernels import MMA_BK, mma_fp16_kernel, mma_smem_bytes, sgemm_kernel, sgemm_smem_bytes


def _mma(bm: int, bn: int, wm: int, wn: int, stages: int, min_blocks: int, bk: int = MMA_BK,
         frag_pipe: int = 0, group_m: int = 0, swizzle: bool = False, spread: int = 0) -> CudaKernel:
    return mma_fp16_kernel(bm, bn, wm, wn, stages, min_blocks, bk=bk, frag_pipe=frag_pipe, group_m=group_m,
                           swizzle=swizzle, spread=spread)


def _sgemm(bn: int, bk: int, fill: int, stages: int, min_blocks: int) -> CudaKernel:
    return sgemm_kernel(bn, bk, fill, stages, min_blocks)


# Tensor cores, fp16 in / fp32 out. 128 x 128: 8 warps of 64 x 32, 2 blocks per SM
# wanted (<= 128 registers). 128 x 256: 8 warps of 64 x 64, 1 block per SM.
mma_128x128_s3 = _mma(128, 128, 64, 32, stages=3, min_blocks=2)
mma_128x128_s4 = _mma(128, 128, 64, 32, stages=4, min_blocks=2)
mma_128x256_s3 = _mma(128, 256, 64, 64, stages=3, min_blocks=1)
mma_128x256_s4 = _mma(128, 256, 64, 64, stages=4, min_blocks=1)
# K slices of 64 (measured 2026-11-30: +7-9 %, NOTES.md): the four above all ran 275-292 TFLOP/s on the H200,
# whatever the tile and ring depth; half the barriers per K (4 k16 steps between two instead
# of 2) is what none of them changed. 3 stages keep it inside sm_80's 163 KB. (128 x 128 with
# K slices of 64 spills at the 128 registers that 2 blocks per SM allow.)
mma_128x256x64_s3 = _mma(128, 256, 64, 64, stages=3, min_blocks=1, bk=64)
# The same warps and K slices on a 256 x 128 tile: A's slice is the larger one (159 KB, inside sm_80's 163).
mma_256x128x64_s3 = _mma(256, 128, 64, 64, stages=3, min_blocks=1, bk=64)

# The rung's build with its fragments software-pipelined (the next k16 step's ldmatrix issued
# before this step's mma.sync, the slice barrier inside the last step), alone, with blocks
# grouped 8 tile rows at a time for the L2, and on 128 x 128 tiles of 4 warps of 64 x 64 with
# 2 blocks per SM on sm_90 (107.5 KB each: one block's barrier hidden by the other's work;
# one block per SM on sm_80).
mma_256x128x64_s3_fp = _mma(256, 128, 64, 64, stages=3, min_blocks=1, bk=64, frag_pipe=1)
mma_256x128x64_s3_g8 = _mma(256, 128, 64, 64, stages=3, min_blocks=1, bk=64, group_m=8)
mma_128x256x64_s3_fp = _mma(128, 256, 64, 64, stages=3, min_blocks=1, bk=64, frag_pipe=1)
mma_128x128x64_s3_fp = _mma(128, 128, 64, 64, stages=3, min_blocks=2, bk=64, frag_pipe=1)
# Half of each slice's last k16 step issued before the slice barrier.
mma_256x128x64_s3_fp2 = _mma(256, 128, 64, 64, stages=3, min_blocks=1, bk=64, frag_pipe=2)
mma_128x128x64_s3_fp2 = _mma(128, 128, 64, 64, stages=3, min_blocks=2, bk=64, frag_pipe=2)
# Unpadded, XOR-swizzled shared rows: every 16-byte copy of a warp lands in whole 128-byte lines
# (NOTES.md: with padding the copies were split, 1.47x the L2 reads of the ideal).
mma_256x128x64_s3_fp_sw = _mma(256, 128, 64, 64, stages=3, min_blocks=1, bk=64, frag_pipe=1, swizzle=True)
mma_256x128x64_s3_sw = _mma(256, 128, 64, 64, stages=3, min_blocks=1, bk=64, swizzle=True)
mma_128x256x64_s3_fp_sw = _mma(128, 256, 64, 64, stages=3, min_blocks=1, bk=64, frag_pipe=1, swizzle=True)
mma_128x128x64_s3_fp_sw = _mma(128, 128, 64, 64, stages=3, min_blocks=2, bk=64, frag_pipe=1, swizzle=True)
mma_128x128x64_s4_fp_sw = _mma(128, 128, 64, 64, stages=4, min_blocks=1, bk=64, frag_pipe=1, swizzle=True)
# Issue 18: the steady-state loop with unchecked copies (MMA_SPREAD): all at the first k16 step
# (cs1) or spread over the first three (cs3); the SASS of the -fp-sw build had about 120
# instructions of checked copy issue between each slice barrier and the first mma.sync.
mma_256x128x64_s3_cs1 = _mma(256, 128, 64, 64, stages=3, min_blocks=1, bk=64, frag_pipe=1, swizzle=True, spread=1)
mma_256x128x64_s3_cs3 = _mma(256, 128, 64, 64, stages=3, min_blocks=1, bk=64, frag_pipe=1, swizzle=True, spread=3)
mma_128x256x64_s3_cs3 = _mma(128, 256, 64, 64, stages=3, min_blocks=1, bk=64, frag_pipe=1, swizzle=True, spread=3)
mma_128x128x64_s3_cs3 = _mma(128, 128, 64, 64, stages=3, min_blocks=2, bk=64, frag_pipe=1, swizzle=True, spread=3)
# The rung with a 4-slice ring (192 KB of shared memory: sm_90's 227 KB, over sm_80's 163).
mma_256x128x64_s4_cs3 = _mma(256, 128, 64, 64, stages=4, min_blocks=1, bk=64, frag_pipe=1, swizzle=True, spread=3)

# FP32 FFMA. 128 x 128 (8 x 8 per lane): 2 blocks per SM wanted; 128 x 256
# (8 x 16 per lane, cuBLAS's per-thread work): 1 block per SM.
sgemm_128x128x8_rp2 = _sgemm(128, 8, fill=0, stages=2, min_blocks=2)
sgemm_128x128x16_cp2 = _sgemm(128, 16, fill=1, stages=2, min_blocks=2)
sgemm_128x128x16_cp3 = _sgemm(128, 16, fill=1, stages=3, min_blocks=2)
sgemm_128x256x8_rp2 = _sgemm(256, 8, fill=0, stages=2, min_blocks=1)
sgemm_128x256x16_cp2 = _sgemm(256, 16, fill=1, stages=2, min_blocks=1)
sgemm_128x256x8_cp3 = _sgemm(256, 8, fill=1, stages=3, min_blocks=1)
# Issue 18: the register-prefetch fill with K slices of 16 (one barrier per 16 k, as warptile
# has two): warptile's own work per lane, 2 blocks per SM; and cuBLAS's per-lane work.
sgemm_128x128x16_rp2 = _sgemm(128, 16, fill=0, stages=2, min_blocks=2)
sgemm_128x256x16_rp2 = _sgemm(256, 16, fill=0, stages=2, min_blocks=1)

MMA_CANDIDATES: list[CudaKernel] = [mma_128x128_s3, mma_128x128_s4, mma_128x256_s3, mma_128x256_s4,
                                    mma_128x256x64_s3, mma_256x128x64_s3,
                                    mma_256x128x64_s3_fp, mma_256x128x64_s3_g8,
                                    mma_128x256x64_s3_fp, mma_128x128x64_s3_fp,
                                    mma_256x128x64_s3_fp2, mma_128x128x64_s3_fp2,
                                    mma_256x128x64_s3_fp_sw, mma_256x128x64_s3_sw, mma_128x256x64_s3_fp_sw,
                                    mma_128x128x64_s3_fp_sw, mma_128x128x64_s4_fp_sw,
                                    mma_256x128x64_s3_cs1, mma_256x128x64_s3_cs3, mma_128x256x64_s3_cs3,
                                    mma_128x128x64_s3_cs3, mma_256x128x64_s4_cs3]
SGEMM_CANDIDATES: list[CudaKernel] = [
    sgemm_128x128x8_rp2, sgemm_128x128x16_cp2, sgemm_128x128x16_cp3,
    sgemm_128x256x8_rp2, sgemm_128x256x16_cp2, sgemm_128x256x8_cp3,
    sgemm_128x128x16_rp2, sgemm_128x256x16_rp2,
]

#: Every candidate by name (tensor-core ones first).
CANDIDATES: dict[str, CudaKernel] = {str(k.name): k for k in [*MMA_CANDIDATES, *SGEMM_CANDIDATES]}

#: One line per candidate: what it is, for tables and NOTES.md.
DESIGNS: dict[str, str] = {
    "mma-fp16-128x128x32-s3": "mma.sync m16n8k16 + ldmatrix, 8 warps of 64x32, cp.async ring of 3 K slices of 32",
    "mma-fp16-128x128x32-s4": "the same, 4-slice ring",
    "mma-fp16-128x256x32-s3": "mma.sync m16n8k16 + ldmatrix, 8 warps of 64x64, 3-slice ring, 1 block/SM",
    "mma-fp16-128x256x32-s4": "the same, 4-slice ring (the rung mma-fp16 until the K-64 builds)",
    "mma-fp16-128x256x64-s3": "128x256, 8 warps of 64x64, K slices of 64 (one barrier per 4 k16 steps), 3-slice ring",
    "mma-fp16-256x128x64-s3": "256x128, 8 warps of 64x64, K slices of 64, 3-slice ring (the rung mma-fp16)",
    "mma-fp16-256x128x64-s3-fp": "the same, fragments software-pipelined (next k16 step's ldmatrix before this step's mma.sync)",
    "mma-fp16-256x128x64-s3-g8": "256x128x64 3-slice, blocks grouped 8 tile rows at a time, fragments not pipelined",
    "mma-fp16-128x256x64-s3-fp": "128x256x64 3-slice, fragments software-pipelined",
    "mma-fp16-128x128x64-s3-fp": "128x128, 4 warps of 64x64, K slices of 64, 3-slice ring, pipelined fragments, 2 blocks/SM on sm_90",
    "mma-fp16-256x128x64-s3-fp2": "256x128x64 3-slice, pipelined fragments, half of each slice's last step's mma.sync before its barrier",
    "mma-fp16-128x128x64-s3-fp2": "128x128x64 3-slice, 2 blocks/SM on sm_90, the same",
    "mma-fp16-256x128x64-s3-fp-sw": "256x128x64 3-slice, pipelined fragments, unpadded XOR-swizzled shared rows",
    "mma-fp16-256x128x64-s3-sw": "256x128x64 3-slice, swizzled shared rows, fragments not pipelined",
    "mma-fp16-128x256x64-s3-fp-sw": "128x256x64 3-slice, pipelined fragments, swizzled shared rows",
    "mma-fp16-128x128x64-s3-fp-sw": "128x128x64 3-slice, 2 blocks/SM on sm_90, pipelined fragments, swizzled",
    "mma-fp16-128x128x64-s4-fp-sw": "128x128x64 4-slice (128 KB), pipelined fragments, swizzled",
    "sgemm-128x128x8-rp2": "warptile layout (8x8/lane, A transposed), register prefetch, 2 shared buffers, 1 barrier per K=8 slice",
    "sgemm-128x128x16-cp2": "8x8/lane, cp.async 2-slice ring, A untransposed (rows 8 apart per lane, odd pitch)",
    "sgemm-128x128x16-cp3": "the same, 3-slice ring",
    "sgemm-128x256x8-rp2": "8x16/lane (cuBLAS's work per thread), register prefetch, A transposed, 2 buffers",
    "sgemm-128x256x16-cp2": "8x16/lane, cp.async 2-slice ring, A untransposed",
    "sgemm-128x128x16-rp2": "warptile's lanes (8x8, A transposed), register prefetch, 2 shared buffers, 1 barrier per K=16 slice, 2 blocks/SM",
    "sgemm-128x256x16-rp2": "8x16/lane, register prefetch, 2 shared buffers, 1 barrier per K=16 slice",
    "mma-fp16-256x128x64-s3-fp-sw-cs1": "the rung's build with a steady-state loop of unchecked copies, all issued in the first k16 step",
    "mma-fp16-256x128x64-s3-fp-sw-cs3": "the same, copies spread over the first three k16 steps",
    "mma-fp16-128x256x64-s3-fp-sw-cs3": "128x256, 8 warps of 64x64, the cs3 loop",
    "mma-fp16-128x128x64-s3-fp-sw-cs3": "128x128, 4 warps of 64x64, 2 blocks/SM on sm_90, the cs3 loop",
    "mma-fp16-256x128x64-s4-fp-sw-cs3": "the rung with a 4-slice ring (192 KB: sm_90 only)",
    "sgemm-128x256x8-cp3": "8x16/lane, cp.async 3-slice ring of K=8 slices (cuBLAS's own tiling on this card is 256x128x8, 3 stages)",
}


def by_name(name: str) -> CudaKernel:
    """The candidate called ``name``."""
    try:
        return CANDIDATES[name]
    except KeyError:
        raise KeyError(f"no candidate named {name!r}; valid names: {', '.join(CANDIDATES)}") from None


__all__ = [
    "CANDIDATES", "MMA_CANDIDATES", "SGEMM_CANDIDATES", "DESIGNS", "by_name",
    "mma_smem_bytes", "sgemm_smem_bytes", "MMA_BK",
    "mma_128x128_s3", "mma_128x128_s4", "mma_128x256_s3", "mma_128x256_s4", "mma_128x256x64_s3",
    "mma_256x128x64_s3", "mma_256x128x64_s3_fp", "mma_256x128x64_s3_g8",
    "mma_128x256x64_s3_fp", "mma_128x128x64_s3_fp",
    "mma_256x128x64_s3_fp2", "mma_128x128x64_s3_fp2", "mma_256x128x64_s3_fp_sw", "mma_256x128x64_s3_sw",
    "mma_128x256x64_s3_fp_sw", "mma_128x128x64_s3_fp_sw", "mma_128x128x64_s4_fp_sw",
    "sgemm_128x128x8_rp2", "sgemm_128x128x16_cp2", "sgemm_128x128x16_cp3",
    "sgemm_128x256x8_rp2", "sgemm_128x256x16_cp2", "sgemm_128x256x8_cp3",
    "sgemm_128x128x16_rp2", "sgemm_128x256x16_rp2", "mma_256x128x64_s3_cs1", "mma_256x128x64_s3_cs3",
    "mma_128x256x64_s3_cs3", "mma_128x128x64_s3_cs3", "mma_256x128x64_s4_cs3",
]
