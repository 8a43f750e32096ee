"""The Hopper rung (wgmma-fp16, wgmma-bf16) with no GPU.

The rung is a Python launcher (its TMA tensor maps are built on the host), so the
conformance suite's compile check, which compiles CudaKernels, does not see its CUDA C.
Here: both entries of reference_kernels/12_wgmma.cu compile with NVRTC for sm_90a at every
build the launcher uses, with no spills and no stack frame, hold the instructions the rung is
about (wgmma, TMA, mbarriers, setmaxnreg), and fit one block per SM; the declarations claim
sm_90a only, and are skipped with the reason on every other compute capability.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from suite_helpers import compile_spill_free, nvrtc_missing

import reference_kernels
from pytest_gemm.model.contract import PyKernel, unsupported_reason
from reference_kernels import wgmma

pytestmark = pytest.mark.gemm_nvrtc  # NVRTC compiles: CI's second step (-m gemm_nvrtc)

#: The bench's copy of 12_wgmma.cu, which also builds clusters of two blocks (the rung does not).
BENCH_SOURCE = str(Path(__file__).resolve().parent.parent / "bench" / "candidates" / "wgmma_clusters.cu")


def _source(cluster: int) -> str | None:
    return BENCH_SOURCE if cluster != 1 else None

SMEM_PER_BLOCK_OPTIN = 227 * 1024  # sm_90
BUILDS = [(precision, stages, cluster) for precision in ("fp16", "bf16") for stages in (3, wgmma.STAGES)
          for cluster in (1, 2)]
# The ping-pong build variant (-DWG_PINGPONG=1, not the rung until a GPU has measured it):
# 40 KB stages, so 4 or 5 of them; with and without clusters.
PINGPONG_BUILDS = [(precision, stages, cluster) for precision in ("fp16", "bf16") for stages in (4, 5)
                   for cluster in (1, 2)]




needs_nvrtc = pytest.mark.skipif(nvrtc_missing() is not None, reason=str(nvrtc_missing()))


@needs_nvrtc
@pytest.mark.parametrize("precision,stages,cluster", BUILDS, ids=[f"{p}-s{s}-c{c}" for p, s, c in BUILDS])
@pytest.mark.parametrize("which", ["main", "tail"])
def test_compiles_for_sm90a_without_spills(precision: str, stages: int, cluster: int, which: str) -> None:
    make = wgmma.main_kernel if which == "main" else wgmma.tail_kernel
    result, _ = compile_spill_free(make(precision, stages, wgmma.GROUP_M, cluster, source=_source(cluster)), "sm_90a")
    res = result.resources
    assert res.spills == 0 and res.stack_frame == 0, f"{result.kernel_name}: {res}"
    if which == "main":
        # 384 threads, one block per SM: the launch cap is 65536 / 384 = 170, rounded to 168.
        assert 0 < res.registers <= 168, res
    assert "warning" not in result.log.lower() or "wgmma" not in result.log.lower(), result.log
    # ptxas reports wgmma serialisation as "info", not as a warning: once it happens, every wgmma
    # of the kernel waits for the one before (bench/NOTES.md, "Issue 29, sixth").
    assert "serialized" not in result.log, result.log


def _main_entry_ptx(kernel) -> str:
    """The PTX of gemm_wgmma alone (the module also holds gemm_wgmma_tail)."""
    from pytest_gemm.kernels.compiler import compile_for_arch

    ptx = compile_for_arch(kernel, "sm_90a", output="ptx").code.decode()
    body = ptx[ptx.index(".entry gemm_wgmma("):]
    return body.split(".entry gemm_wgmma_tail")[0]


@needs_nvrtc
@pytest.mark.parametrize("precision,stages,cluster", PINGPONG_BUILDS,
                         ids=[f"{p}-s{s}-c{c}" for p, s, c in PINGPONG_BUILDS])
def test_pingpong_builds_compile_for_sm90a_without_spills(precision: str, stages: int, cluster: int) -> None:
    from pytest_gemm.kernels.compiler import compile_for_arch

    kernel = wgmma.main_kernel(precision, stages, wgmma.GROUP_M, cluster, pingpong=True, store_buffers=0,
                                source=_source(cluster))
    assert "-DWG_PINGPONG=1" in kernel.options
    assert kernel.shared_mem == wgmma.smem_bytes(stages, pingpong=True, store_buffers=0) <= SMEM_PER_BLOCK_OPTIN
    result = compile_for_arch(kernel, "sm_90a")
    res = result.resources
    assert res.spills == 0 and res.stack_frame == 0, f"{result.kernel_name}: {res}"
    assert 0 < res.registers <= 168, res
    # No ptxas warning at all: neither wgmma serialisation ("Potential Performance Loss: wgmma.mma_async
    # instructions are serialized ...") nor an ignored setmaxnreg (C7508).
    assert "warning" not in result.log.lower() and "serialized" not in result.log, result.log
    body = _main_entry_ptx(kernel)
    assert body.count("wgmma.mma_async.sync.aligned.m64n256k16") == 4
    assert "setmaxnreg.inc.sync.aligned.u32 232" in body and "wgmma.wait_group.sync.aligned 1" in body
    # Two more barriers than the rung (the consumers' turns), and a third wait (for the turn).
    assert body.count("mbarrier.init") == 2 * stages + 2
    assert body.count("mbarrier.try_wait") == 3
    assert ("multicast::cluster" in body) == (cluster == 2)


# The TMA-store epilogue variant (-DWG_STORE_BUFFERS=N): N boxes of 8 KB a consumer after the
# stages: 4 cooperative stages and 2 boxes, 3 and 4 or 5, or 4 ping-pong stages and 2.
TMA_STORE_BUILDS = [(precision, stages, pingpong, buffers) for precision in ("fp16", "bf16")
                    for stages, pingpong, buffers in ((4, False, 2), (3, False, 4), (3, False, 5), (4, True, 2))]


@needs_nvrtc
@pytest.mark.parametrize("precision,stages,pingpong,buffers", TMA_STORE_BUILDS,
                         ids=[f"{p}-s{s}-{'pingpong' if pp else 'cooperative'}-b{b}" for p, s, pp, b in TMA_STORE_BUILDS])
def test_tma_store_builds_compile_for_sm90a_without_spills(precision: str, stages: int, pingpong: bool,
                                                           buffers: int) -> None:
    from pytest_gemm.kernels.compiler import compile_for_arch

    kernel = wgmma.main_kernel(precision, stages, wgmma.GROUP_M, 1, pingpong=pingpong, store_buffers=buffers)
    assert f"-DWG_STORE_BUFFERS={buffers}" in kernel.options
    assert kernel.shared_mem == wgmma.smem_bytes(stages, pingpong, 0) + 2 * buffers * 8192 <= SMEM_PER_BLOCK_OPTIN
    result = compile_for_arch(kernel, "sm_90a")
    res = result.resources
    assert res.spills == 0 and res.stack_frame == 0 and 0 < res.registers <= 168, f"{result.kernel_name}: {res}"
    assert "warning" not in result.log.lower() and "serialized" not in result.log, result.log
    body = _main_entry_ptx(kernel)
    # A consumer's 64 x 256 block leaves in 8 boxes of 64 x 32 through shared memory: 64 float2
    # stores a thread, each box fenced for the copy engine and stored by it; no store of C from
    # registers; every store waited for before the block ends.
    assert "st.global" not in body and body.count("st.shared.v2.f32") == 64
    assert body.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == 8
    assert body.count("fence.proxy.async.shared::cta") == 8
    assert body.count(f"cp.async.bulk.wait_group.read {buffers - 1}") == 8
    assert "cp.async.bulk.wait_group 0" in body
    assert ".param .align 64 .b8 gemm_wgmma_param_2[128]" in body  # C's tensor map, by value


def test_tma_store_build_needs_an_aligned_c() -> None:
    class Fake:  # the attributes tma_ok reads of a CuPy array
        def __init__(self, shape, ptr):
            self.shape, self.data = shape, type("Memory", (), {"ptr": ptr})()

    a, b = Fake((64, 64), 256), Fake((64, 64), 512)
    assert wgmma.tma_ok(a, b, Fake((64, 64), 1024)) and not wgmma.tma_ok(a, b, Fake((64, 64), 1028))
    assert wgmma.smem_bytes(4, store_buffers=2) == 4 * 48 * 1024 + 32 * 1024 + 64 + 1024 <= SMEM_PER_BLOCK_OPTIN
    assert wgmma.smem_bytes(4, store_buffers=3) > SMEM_PER_BLOCK_OPTIN >= wgmma.smem_bytes(3, store_buffers=5)
    assert wgmma.smem_bytes(5, store_buffers=2) > SMEM_PER_BLOCK_OPTIN
    assert wgmma.smem_bytes(4, store_buffers=0) == 4 * 48 * 1024 + 64 + 1024


@needs_nvrtc
def test_the_rung_is_not_the_pingpong_variant() -> None:
    body = _main_entry_ptx(wgmma.main_kernel("fp16"))
    assert body.count("mbarrier.init") == 2 * wgmma.STAGES and body.count("mbarrier.try_wait") == 2
    # ... and stores C with TMA, the ping-pong build from registers
    assert body.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == 8 and "st.global" not in body
    pingpong = _main_entry_ptx(wgmma.main_kernel("fp16", **wgmma.ONE_WAVE_BUILD))
    assert "cp.async.bulk.tensor.2d.global" not in pingpong and "st.global.v2.f32" in pingpong


def test_the_rung_builds_are_the_measured_ones() -> None:
    """The shipped rung compiles with the options it was measured with: the cooperative build
    (-DWG_PINGPONG absent, the TMA-store epilogue through 2 boxes) and its tail, and the one-wave
    ping-pong build with 5 stages, C stored from registers."""
    for rung, precision in zip(reference_kernels.HOPPER_RUNGS, ("fp16", "bf16")):
        common = (f"-DWG_BF16={int(precision == 'bf16')}",)
        cooperative = common + ("-DWG_STAGES=4", "-DWG_GROUP_M=16", "-DWG_STORE_BUFFERS=2")
        pingpong = common + ("-DWG_STAGES=5", "-DWG_GROUP_M=16", "-DWG_PINGPONG=1",
                             "-DWG_STORE_BUFFERS=0")
        assert [b.options for b in rung.builds] == [cooperative, cooperative, pingpong]
    assert wgmma.PINGPONG is False and wgmma.smem_bytes() == 4 * 48 * 1024 + 32 * 1024 + 64 + 1024


def test_one_wave_problems_go_to_the_pingpong_build() -> None:
    """The cooperative build's 128 x 256 tiles at most one per SM: 2048^3 is 128 tiles, one wave
    on the H200's 132 SMs, not on an H100 PCIe's 114; 4096^3 (512 tiles) never is."""
    assert wgmma.one_wave(2048, 2048, 132) and not wgmma.one_wave(2048, 2048, 114)
    assert not wgmma.one_wave(4096, 4096, 132) and not wgmma.one_wave(2049, 2048, 132)  # 17 x 8 tiles
    assert wgmma.one_wave(1, 1, 1) and wgmma.one_wave(128 * 11, 256 * 12, 132)


def test_tma_ok_wants_16_byte_rows_and_bases() -> None:
    class Fake:  # the attributes tma_ok reads of a CuPy array
        def __init__(self, shape, ptr):
            self.shape, self.data = shape, type("Memory", (), {"ptr": ptr})()

    a = Fake((64, 64), 256)
    assert wgmma.tma_ok(a, Fake((64, 64), 512))
    assert not wgmma.tma_ok(a, Fake((64, 60), 512)) and not wgmma.tma_ok(a, Fake((60, 64), 512))
    assert not wgmma.tma_ok(Fake((64, 64), 258), Fake((64, 64), 512)) and not wgmma.tma_ok(a, Fake((64, 64), 520))


def test_pingpong_shapes() -> None:
    assert wgmma.tile_rows() == 128 and wgmma.tile_rows(True) == 64
    for stages in (4, 5):
        assert wgmma.smem_bytes(stages, True, 0) == stages * 40 * 1024 + 16 * stages + 16 + 1024
    assert wgmma.smem_bytes(5, True, 0) <= SMEM_PER_BLOCK_OPTIN < wgmma.smem_bytes(6, True, 0)
    # Work items: 64-row tiles (two of them in a cluster of two) by 256 columns.
    kernel = wgmma.main_kernel("fp16", 5, 16, 1, pingpong=True, store_buffers=0)
    assert kernel.grid(4096, 4096, 4096) == (64 * 16, 1, 1)
    assert kernel.grid(130, 264, 72) == (3 * 2, 1, 1)
    assert wgmma.main_kernel("fp16", 5, 16, 2, pingpong=True, source=BENCH_SOURCE).grid(130, 264, 72) == (2 * 2 * 2, 1, 1)
    with pytest.raises(ValueError, match="builds no clusters"):
        wgmma.main_kernel("fp16", 5, 16, 2)


def test_wgmma_try_variant_names() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "wgmma_try.py"
    spec = importlib.util.spec_from_file_location("wgmma_try", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.parse_variant("s4g16") == (4, 16, 1, False, 0)
    assert module.parse_variant("s4g16c2") == (4, 16, 2, False, 0)
    assert module.parse_variant("s5g32p") == (5, 32, 1, True, 0)
    assert module.parse_variant("s5g16c2p") == (5, 16, 2, True, 0)
    assert module.parse_variant("s4g16t") == (4, 16, 1, False, 2)
    assert module.parse_variant("s3g16t4") == (3, 16, 1, False, 4)
    assert module.parse_variant("s4g16pt2") == (4, 16, 1, True, 2)
    with pytest.raises(ValueError, match="not a build name"):
        module.parse_variant("s4g16x")
    assert module.fp16_s5g16c2p.name == "wgmma-fp16-s5g16c2p"
    assert module.bf16_s5g32p.precision == "bf16" and module.bf16_s5g32p.arches == ("sm_90a",)
    with pytest.raises(AttributeError):
        module.fp16_nonsense  # noqa: B018


@needs_nvrtc
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_ptx_has_the_hopper_instructions(precision: str) -> None:
    from pytest_gemm.kernels.compiler import compile_for_arch

    ptx = compile_for_arch(wgmma.main_kernel(precision), "sm_90a", output="ptx").code.decode()
    kind = "f16" if precision == "fp16" else "bf16"
    assert f"wgmma.mma_async.sync.aligned.m64n256k16.f32.{kind}.{kind}" in ptx
    for instruction in ("cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "mbarrier.arrive.expect_tx",
                        "setmaxnreg.inc.sync.aligned.u32 232", "setmaxnreg.dec.sync.aligned.u32 40",
                        "wgmma.wait_group.sync.aligned 1"):
        assert instruction in ptx, instruction
    assert ".target sm_90a" in ptx
    assert "multicast" not in ptx and "reqnctapercluster" not in ptx, "the default build uses no clusters"


@needs_nvrtc
def test_cluster_build_multicasts_b() -> None:
    from pytest_gemm.kernels.compiler import compile_for_arch

    kernel = wgmma.main_kernel("fp16", wgmma.STAGES, wgmma.GROUP_M, 2, source=BENCH_SOURCE)
    ptx = compile_for_arch(kernel, "sm_90a", output="ptx").code.decode()
    assert ".reqnctapercluster 2, 1, 1" in ptx
    assert ptx.count("complete_tx::bytes.multicast::cluster") >= 1
    assert "mapa.shared::cluster" in ptx and "barrier.cluster.wait" in ptx


@needs_nvrtc
def test_a_9_0_device_build_becomes_sm90a() -> None:
    """The launch path compiles for the device's arch (sm_90); a kernel that claims sm_90a
    is then built for sm_90a, since wgmma does not assemble for plain sm_90."""
    from pytest_gemm.kernels.compiler import compile_for_arch

    assert compile_for_arch(wgmma.tail_kernel(), "sm_90").arch == "sm_90a"


@pytest.mark.parametrize("stages", [3, 4])
def test_one_block_fits_an_sm(stages: int) -> None:
    assert wgmma.smem_bytes(stages) <= SMEM_PER_BLOCK_OPTIN
    assert wgmma.smem_bytes(stages) == stages * 48 * 1024 + wgmma.STORE_BUFFERS * 2 * 8192 + 16 * stages + 1024


def test_declarations() -> None:
    assert reference_kernels.HOPPER_RUNGS == [reference_kernels.wgmma_fp16, reference_kernels.wgmma_bf16]
    for rung, precision in zip(reference_kernels.HOPPER_RUNGS, ("fp16", "bf16")):
        assert isinstance(rung, PyKernel)
        rung.validate()
        assert rung.precision == precision
        assert tuple(rung.min_cc) == (9, 0) and tuple(rung.arches) == ("sm_90a",)
        assert tuple(rung.multiple_of) == (1, 1, 1), "every rung handles any M, N, K >= 1"
        assert rung in reference_kernels.LADDER
    for make in (wgmma.main_kernel, wgmma.tail_kernel):
        kernel = make()
        kernel.validate()
        assert kernel.claimed_arches() == ("sm_90a",)
        assert all(opt.startswith("-D") for opt in kernel.options), "parameters reach the source as -D options"


@pytest.mark.parametrize("cc", [(7, 5), (8, 0), (8, 6), (8, 9), (10, 0), (12, 0)])
def test_skipped_off_9_0_with_the_reason(cc: tuple[int, int]) -> None:
    for rung in reference_kernels.HOPPER_RUNGS:
        reason = unsupported_reason(rung, cc)
        assert reason is not None and rung.name in reason and f"{cc[0]}.{cc[1]}" in reason
        assert ("sm_90a" in reason) == (cc >= (9, 0)), reason  # below 9.0 min_cc speaks first


def test_claimed_on_9_0() -> None:
    for rung in reference_kernels.HOPPER_RUNGS:
        assert unsupported_reason(rung, (9, 0)) is None
    # Kernels that claim no arch-specific target keep the min_cc rule alone.
    assert unsupported_reason(reference_kernels.mma_fp16, (10, 0)) is None
    assert unsupported_reason(reference_kernels.cublas_fp16, (9, 0)) is None


def test_importing_the_launcher_touches_no_cuda() -> None:
    code = ("import sys, reference_kernels, reference_kernels.wgmma; "
            "assert 'cupy' not in sys.modules, 'cupy imported'")
    import subprocess

    subprocess.run([sys.executable, "-c", code], check=True)
