"""The -DGEMM_NO_EDGE builds of the float4 rungs, and bench/edge_cost.py, with no GPU.

bench/edge_cost.py times ``vectorized`` and ``warptile`` against the bench's
copies of their sources (bench/candidates/) built with ``-DGEMM_NO_EDGE`` (no
bounds checks, no scalar fallback). Here: those copies build the rungs' own code
without the option, the no-edge builds compile for sm_80 and sm_90 with no spills,
really have no scalar global loads or stores left (the default builds do), and the tool's
pure parts (variants, shape checks, slowdown) and its command line work.
Compile tests are skipped, with the reason, only where NVRTC is not installed.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

import reference_kernels
from pytest_gemm.model.contract import CudaKernel

from suite_helpers import compile_fresh, compile_spill_free, load_declarations, nvrtc_missing

pytestmark = pytest.mark.gemm_nvrtc  # NVRTC compiles: CI's second step (-m gemm_nvrtc)

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "bench" / "edge_cost.py"
ARCHES = ("sm_80", "sm_90")
REGISTERS_PER_SM = 65536
SCALAR_GLOBAL = re.compile(r"\b(?:ld\.global(?:\.nc)?|st\.global)\.f32\b")  # .v4.f32 does not match


ec = load_declarations(TOOL, "edge_cost")
PAIRS = ec.variants()


needs_nvrtc = pytest.mark.skipif(nvrtc_missing() is not None, reason=str(nvrtc_missing()))


def _ptx(kernel: CudaKernel, arch: str) -> str:
    code = compile_fresh(kernel, arch, output="ptx").code
    return code.decode(errors="replace") if isinstance(code, bytes) else str(code)


NO_EDGE_CASES = [pytest.param(no_edge, arch, id=f"{no_edge.name}-{arch}") for _, no_edge in PAIRS for arch in ARCHES]


@needs_nvrtc
@pytest.mark.parametrize(("kernel", "arch"), NO_EDGE_CASES)
def test_no_edge_build_compiles_without_spills(kernel: CudaKernel, arch: str) -> None:
    result, tried = compile_spill_free(kernel, arch)
    res = result.resources
    assert res.registers > 0, f"{kernel.name} on {arch}: no register count in the ptxas log"
    assert res.spills == 0, (f"{kernel.name} on {arch} spills {res.spill_stores} bytes stored / "
                             f"{res.spill_loads} bytes loaded with {res.registers} registers per thread "
                             f"in each of {len(tried)} compiles")
    threads = math.prod(kernel.block)
    assert -(-res.registers // 8) * 8 * threads <= REGISTERS_PER_SM, f"{kernel.name} on {arch} cannot launch"


@needs_nvrtc
@pytest.mark.parametrize(("edge", "no_edge"), PAIRS, ids=[edge.name for edge, _ in PAIRS])
def test_no_edge_build_has_no_scalar_fallback(edge: CudaKernel, no_edge: CudaKernel) -> None:
    arch = "sm_80"
    default_ptx, no_edge_ptx = _ptx(edge, arch), _ptx(no_edge, arch)
    assert SCALAR_GLOBAL.search(default_ptx), f"{edge.name}: the default build should keep its scalar fallback"
    found = sorted(set(SCALAR_GLOBAL.findall(no_edge_ptx)))
    assert not found, f"{no_edge.name}: scalar global accesses {found} left in a build with no edge handling"
    assert "ld.global.nc.v4.f32" in no_edge_ptx and "st.global.v4.f32" in no_edge_ptx
    branches = [len(re.findall(r"\bbra(?:\.uni)?\b", p)) for p in (default_ptx, no_edge_ptx)]
    assert branches[1] < branches[0] / 4, f"{no_edge.name}: {branches[1]} branches vs {branches[0]} by default"


def _default_build_tokens(source: str) -> list[str]:
    """The tokens of ``source`` as compiled without -DGEMM_NO_EDGE: comments dropped, the
    ``#ifdef GEMM_NO_EDGE`` branches and the EDGE() wrapper left out, parentheses ignored (the
    rung writes ``a && b`` where the copy has ``a && EDGE(b)``)."""
    source = re.sub(r"//[^\n]*", "", source)
    source = re.sub(r"#ifdef GEMM_NO_EDGE\n.*?#else\n(.*?)#endif\n", r"\1", source, flags=re.S)
    source = source.replace("#define EDGE(test) (test)\n", "").replace("EDGE(", "(")
    return [t for t in re.findall(r"\w+|[^\w\s]", source) if t not in "()"]


@pytest.mark.parametrize(("edge", "no_edge"), PAIRS, ids=[edge.name for edge, _ in PAIRS])
def test_bench_copy_is_the_rung_without_the_option(edge: CudaKernel, no_edge: CudaKernel) -> None:
    """The bench's copy, read without -DGEMM_NO_EDGE, is the rung's source token for token: the
    no-edge build measures the rung's edge handling, not a copy that drifted. (When the copies were
    made, issue 49, the two compiled to byte-identical cubins for vectorized, and for warptile to
    cubins whose SASS is the same, scale_tile's internal name carrying each file's name.)"""
    assert _default_build_tokens(no_edge.source_path().read_text()) == \
        _default_build_tokens(edge.source_path().read_text())


# -- the tool's pure parts ----------------------------------------------------------

def test_variants() -> None:
    assert [edge.name for edge, _ in PAIRS] == ["vectorized", "warptile"]
    for edge, no_edge in PAIRS:
        assert edge is reference_kernels.by_name(edge.name), "the default build is the ladder rung itself"
        assert no_edge.name == f"{edge.name}-no-edge" and no_edge is not edge
        assert tuple(no_edge.options) == (*edge.options, "-DGEMM_NO_EDGE")
        assert no_edge.source_path() == ROOT / "bench" / "candidates" / f"{edge.name}.cu"
        assert no_edge.entry == edge.entry
        assert tuple(no_edge.block) == tuple(edge.block) and tuple(no_edge.tile) == tuple(edge.tile)
        assert no_edge.signature == edge.signature
        assert "#ifdef GEMM_NO_EDGE" in no_edge.source_path().read_text()
        assert "#ifdef GEMM_NO_EDGE" not in edge.source_path().read_text(), "the rung ships its edge handling only"
    assert all(k.name not in {no_edge.name for _, no_edge in PAIRS} for k in reference_kernels.LADDER)
    with pytest.raises(ValueError, match="no -DGEMM_NO_EDGE build"):
        ec.variants(["tiled16"])


def test_shape_problem() -> None:
    assert ec.shape_problem("warptile", (4096, 4096, 4096)) is None
    assert ec.shape_problem("vectorized", (128, 256, 8)) is None
    assert "K=8 is not a multiple of 16" in ec.shape_problem("warptile", (128, 128, 8))
    assert "M=1000 is not a multiple of 128" in ec.shape_problem("vectorized", (1000, 1024, 1024))


def test_slowdown_and_summary() -> None:
    assert ec.slowdown_pct(1.03, 1.0) == pytest.approx(3.0)
    assert ec.slowdown_pct(0.99, 1.0) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        ec.slowdown_pct(1.0, 0.0)
    assert ec.median_of_medians([3.0, 1.0, 2.0]) == 2.0
    s = ec.summarize_rung("warptile", [1.02, 1.10, 1.01], [1.00, 1.00, 0.99], flops=2.0e12)
    assert s["edge_ms"] == 1.02 and s["no_edge_ms"] == 1.00
    assert s["slowdown_pct"] == pytest.approx(2.0) and s["within_limit"]
    assert s["paired_slowdown_pct"] == pytest.approx([2.0, 10.0, 100 * (1.01 / 0.99 - 1)])
    assert s["edge_tflops"] == pytest.approx(2.0e12 / 1.02e-3 / 1e12)
    assert not ec.summarize_rung("vectorized", [1.05], [1.0], flops=1.0)["within_limit"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, cwd=ROOT)


def test_cli_help_and_errors() -> None:
    out = _run("--help")
    assert out.returncode == 0 and "GEMM_NO_EDGE" in out.stdout and "--rounds" in out.stdout
    out = _run("--shape", "1000")
    assert out.returncode == 2 and "assumes aligned shapes" in out.stderr
    out = _run("--rungs", "tiled16")
    assert out.returncode == 2 and "valid: vectorized, warptile" in out.stderr


def test_cli_without_gpu_prints_the_reason() -> None:
    from pytest_gemm.kernels.device import probe

    if not isinstance(probe(), str):
        pytest.skip("a GPU is usable here; this checks the no-GPU answer")
    out = _run("--rounds", "1")
    assert out.returncode == 2, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] is False and report["error"].startswith("no usable GPU")
