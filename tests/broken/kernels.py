"""Kernels broken in exactly one way each, to test the checkers themselves.

Every checker of the conformance suite is run (by ``tests/test_broken_kernels.py``)
against a kernel broken in exactly the way it is meant to catch, and two correct
kernels with an unusual summation order must pass everything. Each ``.cu`` here is
a copy of ``tiled_base.cu`` (16x16 shared-memory tiles, any M, N, K) with one
change, marked ``BUG:``. Row-major ``C (MxN) = A (MxK) @ B (KxN)``, float32.

Every kernel is its own attribute, so one can be run by hand::

    pytest --gemm-kernel tests/broken/kernels.py:k_off_by_one -k "exact and 17x33x65"

``BROKEN`` maps each broken kernel's name to ``(kernel, category, check)``: the
failure category it must be reported with, by the named conformance check.

==================== ==================================================== ============= ====================
kernel               what is broken                                       check         category
==================== ==================================================== ============= ====================
missing_sync         no __syncthreads() after the inner loop (+ warp       exact         wrong_values
                     drift so the race fires every launch)
unguarded_edge       partial tiles not zero-filled: stale values in the    exact         wrong_values
                     K tail
k_off_by_one         the K loop stops one term early                       exact         wrong_values
transposed_store     stores C[col*M + row]                                 exact         wrong_values
partial_write        column 15 of every 16-wide tile never stored          coverage      unwritten_output
out_of_bounds_write  store guarded by col < N only: rows past M written    guards        out_of_bounds_write
writes_into_a        also writes A[0][0] = 0                               guards        input_modified
float_atomics        shared-memory float atomicAdd, arrival order varies   deterministic nondeterministic
fp16_inside_fp32     tiles stored as __half (inputs rounded to fp16)       accuracy      precision_too_low
tf32_inside_fp32     inputs rounded to TF32 before multiplying             accuracy      precision_too_low
short_grid           correct code, grid (N//16, M//16): floor, not ceil    coverage      unwritten_output
wild_store           store 4 TiB past C: illegal address                   exact         fault
panel_smem           whole K panels in shared memory: 8 MiB at K=65536     exact         launch_error
==================== ==================================================== ============= ====================

``CORRECT`` (reverse_k, split_k_registers) must pass every check.
"""
from __future__ import annotations

from pytest_gemm import CudaKernel

TILE = (16, 16)


def _tiled(name: str, **kwargs) -> CudaKernel:
    """A 16x16-tiled kernel from ``<name>.cu``, entry ``mm_<name>``."""
    kwargs.setdefault("tile", TILE)
    return CudaKernel(source=f"{name}.cu", entry=f"mm_{name}", block=(16, 16), name=name, **kwargs)


# -- broken: each must fail its check with its category ------------------------
missing_sync = _tiled("missing_sync")
unguarded_edge = _tiled("unguarded_edge")
k_off_by_one = _tiled("k_off_by_one")
transposed_store = _tiled("transposed_store")
partial_write = _tiled("partial_write")
out_of_bounds_write = _tiled("out_of_bounds_write")
writes_into_a = _tiled("writes_into_a")
float_atomics = _tiled("float_atomics")  # declared deterministic (the default)
fp16_inside_fp32 = _tiled("fp16_inside_fp32")  # declared fp32 (the default)
tf32_inside_fp32 = _tiled("tf32_inside_fp32")  # declared fp32 (the default)
# The code is right; the declared grid rounds down, so the ragged tail blocks never run.
short_grid = CudaKernel(source="tiled_base.cu", entry="mm_tiled_base", block=(16, 16),
                        grid=lambda m, n, k: (n // 16, m // 16), name="short_grid")
wild_store = _tiled("wild_store")
panel_smem = _tiled("panel_smem", shared_mem=lambda m, n, k: 2 * 16 * k * 4)

BROKEN: dict[str, tuple[CudaKernel, str, str]] = {
    "missing_sync": (missing_sync, "wrong_values", "exact"),
    "unguarded_edge": (unguarded_edge, "wrong_values", "exact"),
    "k_off_by_one": (k_off_by_one, "wrong_values", "exact"),
    "transposed_store": (transposed_store, "wrong_values", "exact"),
    "partial_write": (partial_write, "unwritten_output", "coverage"),
    "out_of_bounds_write": (out_of_bounds_write, "out_of_bounds_write", "guards"),
    "writes_into_a": (writes_into_a, "input_modified", "guards"),
    "float_atomics": (float_atomics, "nondeterministic", "deterministic"),
    "fp16_inside_fp32": (fp16_inside_fp32, "precision_too_low", "accuracy"),
    "tf32_inside_fp32": (tf32_inside_fp32, "precision_too_low", "accuracy"),
    "short_grid": (short_grid, "unwritten_output", "coverage"),
    "wild_store": (wild_store, "fault", "exact"),
    "panel_smem": (panel_smem, "launch_error", "exact"),
}

# -- correct: different summation orders, must pass every check ----------------
reverse_k = _tiled("reverse_k")
split_k_registers = _tiled("split_k_registers")

CORRECT: dict[str, CudaKernel] = {"reverse_k": reverse_k, "split_k_registers": split_k_registers}

# -- broken, but the suite cannot see it yet -----------------------------------
unguarded_loads = _tiled("unguarded_loads")  # reads past A's rows and B's end: NaN guards show it
BROKEN["unguarded_loads"] = (unguarded_loads, "wrong_values", "exact")

ALL: dict[str, CudaKernel] = {**{name: k for name, (k, _, _) in BROKEN.items()}, **CORRECT}

for _name, _kernel in ALL.items():
    assert _kernel.name == _name and globals()[_name] is _kernel, _name
