"""Kernels for the verdict rules (docs/verdicts.md), run on the GPU by tests/test_verdicts_gpu.py.

``EXPECTED`` maps each kernel's name to what the whole suite must conclude: its verdict and,
when it fails, its one primary category. Several are written the way public tutorials and
users write them (the SGEMM tutorial epilogue and argument order, Python launchers with
their own streams, a Triton matmul with tl.dot's defaults), not the way this project would.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

from pytest_gemm import CudaKernel, kernel

HERE = Path(__file__).resolve().parent
BROKEN = HERE.parent / "broken"
_TUTORIAL = dict(source="tutorial_epilogue.cu", entry="sgemm_naive", block=(16, 16), tile=(16, 16),
                 signature="M,N,K,alpha,A,B,beta,C")

# alpha*acc + beta*C with no beta == 0 guard: fails beta_zero only, and is ranked.
tutorial_epilogue = CudaKernel(**_TUTORIAL, name="tutorial_epilogue")
# The same with both BLAS zero rules kept (no read of C at beta == 0, of A and B at alpha == 0): passes everything.
tutorial_guarded = CudaKernel(**_TUTORIAL, options=("-DGUARD_BETA", "-DGUARD_ALPHA"), name="tutorial_guarded")
# Guards beta only: still multiplies alpha * acc at alpha == 0, so NaN in A or B gives NaN: correct (BLAS
# documents no rule for A and B at alpha == 0), so it passes with the note alpha_zero_reads_ab.
beta_guard_only = CudaKernel(**_TUTORIAL, options=("-DGUARD_BETA",), name="beta_guard_only")
# Reads C at beta == 0 but replaces NaN by 0: the NaN fill misses it, +Inf and -Inf (0 * Inf = NaN) do not.
filters_nan = CudaKernel(**_TUTORIAL, options=("-DFILTER_NAN", "-DGUARD_ALPHA"), name="filters_nan")
# Reads C at beta == 0 but maps every non-finite value to 0: the BLAS result for every C, so it passes.
filters_nonfinite = CudaKernel(**_TUTORIAL, options=("-DFILTER_NONFINITE", "-DGUARD_ALPHA"), name="filters_nonfinite")
# The same, declared as reading C at beta == 0: passes, with a note.
tutorial_declared = CudaKernel(**_TUTORIAL, beta_zero="reads_c", name="tutorial_declared")
# Never adds beta * C: wrong_values, "beta is ignored".
ignores_beta = CudaKernel(**_TUTORIAL, options=("-DIGNORE_BETA",), name="ignores_beta")
# The BLAS-conformant epilogue declared with alpha and beta the wrong way round (a wrong parameter order):
# C = beta*A@B + alpha*C_old. At alpha 1, beta 0, where every check but alpha/beta's calls, C keeps what it
# held, which alone reads as unwritten; the swap is the root cause (docs/verdicts.md).
swapped_scalars = CudaKernel(**dict(_TUTORIAL, signature="M,N,K,beta,A,B,alpha,C"),
                             options=("-DGUARD_BETA", "-DGUARD_ALPHA"), name="swapped_scalars")
def _claimed_shapes_only(m: int, n: int, k: int) -> int:
    """A shared_mem written for the shapes its kernel claims: the contract skips the others."""
    if m % 128 or n % 128 or k % 8:
        raise ValueError(f"{m}x{n}x{k} is not a shape this kernel claims (multiple_of=(128, 128, 8))")
    return 0


# A correct kernel declaring a coarse multiple_of: every check still runs, on the nearest claimed
# shapes. Its shared_mem callable refuses the shapes it does not claim, as the contract lets it: no
# check may ask it about one (the launch check asked about 64^3 and called it a launch_error before
# issue 43's audit; one kernel for both keeps the verdicts run, the GPU suite's longest, its size).
coarse_multiple = CudaKernel(source=BROKEN / "tiled_base.cu", entry="mm_tiled_base", block=(16, 16), tile=(16, 16),
                             multiple_of=(128, 128, 8), shared_mem=_claimed_shapes_only,
                             name="coarse_multiple")  # source as a pathlib.Path


def _module():
    import cupy

    return cupy.RawModule(code=(HERE / "split_k.cu").read_text())


def _split_k_atomic(slices: int):
    def launch(a, b, c):
        import cupy

        m, k = a.shape
        n = b.shape[1]
        slice_len = math.ceil(k / slices)
        c.fill(0)
        fn = _module().get_function("gemm_split_k_atomic")
        fn(((n + 15) // 16, (m + 15) // 16, slices), (16, 16),
           (a, b, c, cupy.int32(m), cupy.int32(n), cupy.int32(k), cupy.int32(slice_len)))
    return launch


split_k_atomic8 = kernel(_split_k_atomic(8), name="split_k_atomic8")
split_k_atomic16 = kernel(_split_k_atomic(16), name="split_k_atomic16")


@kernel(name="split_k_ordered")
def split_k_ordered(a, b, c):
    import cupy

    m, k = a.shape
    n = b.shape[1]
    slices = 16
    slice_len = math.ceil(k / slices)
    work = cupy.empty((slices, m, n), dtype=cupy.float32)
    module = _module()
    module.get_function("gemm_split_k_partials")(
        ((n + 15) // 16, (m + 15) // 16, slices), (16, 16),
        (a, b, work, cupy.int32(m), cupy.int32(n), cupy.int32(k), cupy.int32(slice_len)))
    module.get_function("gemm_split_k_reduce")(
        ((m * n + 255) // 256,), (256,), (work, c, cupy.int32(m), cupy.int32(n), cupy.int32(slices)))


# fp16 / bf16 partial sums on a deep-K path (K >= 2048) of a kernel declared fp32: precision_too_low from K = 2048.
deep_k_fp16 = CudaKernel(source="deep_k_half_sums.cu", entry="mm_deep_k_half_sums", block=(16, 16), tile=(16, 16),
                         options=("-DSUMS_FP16",), name="deep_k_fp16")
deep_k_bf16 = CudaKernel(source="deep_k_half_sums.cu", entry="mm_deep_k_half_sums", block=(16, 16), tile=(16, 16),
                         options=("-DSUMS_BF16",), name="deep_k_bf16")
# Inputs rounded to TF32 with ties away from zero (cvt.rna.tf32.f32), declared fp32: precision_too_low.
tf32_rna_inside_fp32 = CudaKernel(source="rna_inputs.cu", entry="mm_rna_inputs", block=(16, 16), tile=(16, 16),
                                  name="tf32_rna_inside_fp32")
# fp32 computed as 3xTF32 on tensor cores (CUTLASS's fast fp32 split, small x small dropped), declared fp32:
# products accurate to about fp32, but the exact outputs at K = 1 are the 3xTF32 result, not IEEE products: precision_too_low.
three_tf32 = CudaKernel(source="three_tf32.cu", entry="mm_three_tf32", block=(32,), tile=(16, 16), min_cc=(8, 0),
                        name="three_tf32")

# -- call history, not a race ----------------------------------------------------------------------
# Every second launch leaves the last row unwritten (a launch counter in __device__ memory).
counter_skips_last_row = CudaKernel(source="call_history.cu", entry="mm_counter_skips_last_row", block=(16, 16),
                                    tile=(16, 16), name="counter_skips_last_row")
# Persistent kernels: twice as many blocks as SMs (the grid callable gets the device), tiles from a counter.
_PERSISTENT = dict(source="call_history.cu", entry="mm_persistent", block=(16, 16),
                   grid=lambda m, n, k, device: (2 * device.sm_count,))
persistent_tiles = CudaKernel(**_PERSISTENT, options=("-DRESET_COUNTER",), name="persistent_tiles")
persistent_no_reset = CudaKernel(**_PERSISTENT, name="persistent_no_reset")  # the counter is never reset

_SHAPES_SEEN: set = set()


def _cached(key_of):
    """A launcher that returns the result it computed before for the same key, whatever the inputs hold now."""
    cache: dict = {}

    def launch(a, b, c):
        import cupy

        key = key_of(a, b)
        if key in cache:
            c[...] = cache[key]
            return
        cupy.matmul(a, b, out=c)
        cache[key] = c.copy()
    return launch


# A cache keyed on the input addresses (and shapes), or on the shapes alone: stale for new inputs.
cached_by_address = kernel(_cached(lambda a, b: (a.data.ptr, b.data.ptr, a.shape, b.shape)), name="cached_by_address")
cached_by_shape = kernel(_cached(lambda a, b: (a.shape, b.shape)), name="cached_by_shape")


@kernel(name="first_call_per_shape")
def first_call_per_shape(a, b, c):
    """Computes on its first call for a shape only; later calls assume C already holds the answer."""
    import cupy

    key = (a.shape, b.shape)
    if key in _SHAPES_SEEN:
        return
    _SHAPES_SEEN.add(key)
    cupy.matmul(a, b, out=c)


@kernel(name="own_stream")
def own_stream(a, b, c):
    """cupy.matmul on a stream of its own, not the caller's: its work is not ordered."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        cupy.matmul(a, b, out=c)


@kernel(name="current_stream")
def current_stream(a, b, c):
    """cupy.matmul on the current stream, as a launcher should."""
    import cupy

    cupy.matmul(a, b, out=c)


@kernel(name="torch_current_stream")
def torch_current_stream(a, b, c):
    """torch.matmul on the caller's CuPy stream (torch.cuda.ExternalStream), as the README says."""
    import cupy
    import torch

    with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
        torch.matmul(torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda"),
                     out=torch.as_tensor(c, device="cuda"))


@kernel(name="torch_default_stream")
def torch_default_stream(a, b, c):
    """torch.matmul on torch's own current stream (the default): not the caller's."""
    import torch

    torch.matmul(torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda"),
                 out=torch.as_tensor(c, device="cuda"))


@kernel(name="scales_a_in_place")
def scales_a_in_place(a, b, c, alpha, beta):
    """Folds alpha into A in place (BLAS: A is unchanged on exit), then multiplies: every result is
    right, and A changes only where alpha != 1, so only the alpha/beta check's launches show it."""
    import cupy

    a *= alpha
    if beta == 0:
        cupy.matmul(a, b, out=c)
    else:
        c *= beta
        c += a @ b


@kernel(name="allocates_only")
def allocates_only(a, b, c):
    """Computes nothing: copies whatever memory the allocator hands back, hoping it held a
    reference result (the harness scrubs every right answer before its memory is freed)."""
    import cupy

    c[...] = cupy.empty_like(c)


@kernel(name="patches_timer")
def patches_timer(a, b, c):
    """Computes the right answer, and makes every CUDA event time read ten times shorter."""
    import cupy

    real = getattr(cupy.cuda, "_gemm_real_elapsed", None)
    if real is None:
        cupy.cuda._gemm_real_elapsed = real = cupy.cuda.get_elapsed_time
        cupy.cuda.get_elapsed_time = lambda start, end: real(start, end) / 10
    cupy.matmul(a, b, out=c)


#: torch launchers, checked where torch imports (tests/test_verdicts_gpu.py adds them then)
@functools.cache
def _triton_matmul():
    """A Triton matmul written as a Triton user writes one: masked block loads, tl.dot, fp32
    accumulator, launched on torch's stream (here the caller's). Built on first use: Triton is
    imported only where the test runs with torch."""
    import triton
    import triton.language as tl

    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, m, n, k, sa, sb, sc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.program_id(1) * BN + tl.arange(0, BN)
        ks = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, k, BK):
            a = tl.load(a_ptr + rows[:, None] * sa + (k0 + ks)[None, :],
                        mask=(rows[:, None] < m) & ((k0 + ks)[None, :] < k), other=0.0)
            b = tl.load(b_ptr + (k0 + ks)[:, None] * sb + cols[None, :],
                        mask=((k0 + ks)[:, None] < k) & (cols[None, :] < n), other=0.0)
            acc += tl.dot(a, b)  # Triton's default for fp32 operands: TF32 tensor cores
        tl.store(c_ptr + rows[:, None] * sc + cols[None, :], acc, mask=(rows[:, None] < m) & (cols[None, :] < n))

    def launch(a, b, c, bf16=False):
        import cupy
        import torch

        m, k = a.shape
        n = b.shape[1]
        with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
            ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
            if bf16:  # the suite hands bf16 over as uint16 bit patterns
                ta, tb = ta.view(torch.bfloat16), tb.view(torch.bfloat16)
            assert all(t.stride(1) == 1 for t in (ta, tb, tc)), "rows must be contiguous"
            mm[(triton.cdiv(m, 64), triton.cdiv(n, 64))](ta, tb, tc, m, n, k, ta.stride(0), tb.stride(0), tc.stride(0),
                                                          BM=64, BN=64, BK=32)

    return launch


def _triton(a, b, c, bf16=False):
    _triton_matmul()(a, b, c, bf16)


@kernel(name="triton_fp16", precision="fp16")
def triton_fp16(a, b, c):
    """Triton, fp16 in, fp32 accumulate and out: right."""
    _triton(a, b, c)


@kernel(name="triton_bf16", precision="bf16")
def triton_bf16(a, b, c):
    """The same kernel on bf16 inputs: right."""
    _triton(a, b, c, bf16=True)


@kernel(name="triton_fp32_tf32", precision="fp32")
def triton_fp32_tf32(a, b, c):
    """The same kernel on fp32 inputs, declared fp32: tl.dot's default rounds them to TF32."""
    _triton(a, b, c)


@kernel(name="torch_tf32", precision="fp32")
def torch_tf32(a, b, c):
    """torch.matmul with TF32 allowed (a common speed setting), declared fp32: cuBLAS's TF32 path."""
    import cupy
    import torch

    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
            torch.matmul(torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda"),
                         out=torch.as_tensor(c, device="cuda"))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed


# torch and Triton (which comes with torch): run only where PYTEST_GEMM_TORCH is set.
THIRD_PARTY: dict[str, tuple[str, str | None]] = {
    "torch_current_stream": ("passed", None),
    "torch_default_stream": ("failed", "wrong_stream"),
    "torch_tf32": ("failed", "precision_too_low"),
    "triton_fp16": ("passed", None),
    "triton_bf16": ("passed", None),
    "triton_fp32_tf32": ("failed", "precision_too_low"),
}

# name -> (verdict, primary category or None; a tuple where either is right)
EXPECTED: dict[str, tuple[str, str | tuple[str, ...] | None]] = {
    "tutorial_epilogue": ("failed", "beta_zero_reads_c"),
    "tutorial_guarded": ("passed", None),
    "beta_guard_only": ("passed", None),  # with the note alpha_zero_reads_ab (docs/verdicts.md)
    "filters_nan": ("failed", "beta_zero_reads_c"),
    "filters_nonfinite": ("passed", None),
    "deep_k_fp16": ("failed", "precision_too_low"),
    "deep_k_bf16": ("failed", "precision_too_low"),
    "tf32_rna_inside_fp32": ("failed", "precision_too_low"),
    "three_tf32": ("failed", "precision_too_low"),
    "counter_skips_last_row": ("failed", "unwritten_output"),
    "persistent_tiles": ("passed", None),
    "persistent_no_reset": ("failed", "unwritten_output"),
    "cached_by_address": ("failed", "stale_output"),
    "cached_by_shape": ("failed", "stale_output"),
    "first_call_per_shape": ("failed", "unwritten_output"),
    "tutorial_declared": ("passed", None),
    "ignores_beta": ("failed", "wrong_values"),
    "swapped_scalars": ("failed", "wrong_values"),
    "scales_a_in_place": ("failed", "input_modified"),
    "coarse_multiple": ("passed", None),
    "split_k_atomic8": ("failed", "nondeterministic"),
    "split_k_atomic16": ("failed", "nondeterministic"),
    "split_k_ordered": ("passed", None),
    "own_stream": ("failed", "wrong_stream"),
    "current_stream": ("passed", None),
    # whatever the allocator hands back, it holds no right answer: never-written fill or garbage
    "allocates_only": ("failed", ("wrong_values", "unwritten_output")),
    "patches_timer": ("failed", "timing_escape"),
}
