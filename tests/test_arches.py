"""Architectures: what can be claimed (from the installed NVRTC), what is claimed by default,
which devices a claim covers, and skip reasons that name the true cause. Pure: no GPU."""
from __future__ import annotations

import pytest

from pytest_gemm import CudaKernel, GemmSpecError
from pytest_gemm.model import arches

CU = 'extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {}'
NVRTC_12_9 = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121)


def _kernel(**kw) -> CudaKernel:
    k = CudaKernel(source=CU, entry="mm", block=(16, 16), tile=(16, 16), name="k", **kw)
    k.validate()
    return k


def test_claimable_targets_run_from_sm_70_to_the_newest_nvrtc_knows_with_arch_specific_twins():
    got = arches.claimable_arches(NVRTC_12_9)
    assert got[0] == "sm_70" and "sm_60" not in got and "sm_62" not in got
    for arch in ("sm_70", "sm_75", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_120", "sm_121a"):
        assert arch in got
    assert "sm_89a" not in got and "sm_80a" not in got  # arch-specific targets start at Hopper


def test_the_default_claims_every_generic_target_at_or_above_min_cc_and_no_arch_specific_one():
    claimable = arches.claimable_arches(NVRTC_12_9)
    default = _kernel().claimed_arches(claimable)
    assert default[0] == "sm_70" and "sm_86" in default and "sm_89" in default and "sm_120" in default
    assert not any(a.endswith("a") for a in default)
    ampere = _kernel(min_cc=(8, 0)).claimed_arches(claimable)
    assert "sm_75" not in ampere and ampere[0] == "sm_80" and "sm_86" in ampere and "sm_89" in ampere


def test_an_arch_specific_target_is_claimed_only_on_exactly_its_compute_capability():
    assert arches.arch_claimed_on("sm_90a", (9, 0))
    assert not arches.arch_claimed_on("sm_90a", (10, 0)) and not arches.arch_claimed_on("sm_90a", (8, 9))
    assert arches.arch_claimed_on("sm_80", (8, 6)) and arches.arch_claimed_on("sm_80", (9, 0))
    assert not arches.arch_claimed_on("sm_86", (8, 0))
    hopper = _kernel(arches=("sm_90a",), min_cc=(9, 0))
    assert hopper.claimed_arches(arches.claimable_arches(NVRTC_12_9)) == ("sm_90a",)
    assert hopper.claimed_on((9, 0)) and not hopper.claimed_on((10, 0)) and not hopper.claimed_on((8, 0))
    assert _kernel().claimed_on((12, 0)) and not _kernel(min_cc=(8, 0)).claimed_on((7, 5))


def test_declared_arches_are_normalised_and_a_bad_one_says_what_is_valid():
    assert _kernel(arches=("90a", "sm_80", "8.6")).arches == ("sm_90a", "sm_80", "sm_86")
    for bad in ("sm_60", "sm_80a", "hopper", "sm_9"):
        with pytest.raises(GemmSpecError, match=r"is not a target a kernel can claim.*sm_70.*sm_90a"):
            _kernel(arches=(bad,))
    with pytest.raises(GemmSpecError, match="claims nothing"):
        _kernel(arches=())


def test_skip_reasons_name_the_true_cause():
    claimable = arches.claimable_arches(NVRTC_12_9)
    assert "below the kernel's min_cc=(9, 0)" in _kernel(min_cc=(9, 0)).not_claimed_reason("sm_86", claimable)
    declared = _kernel(arches=("sm_80",)).not_claimed_reason("sm_89", claimable)
    assert "declares arches=(sm_80)" in declared and "min_cc" not in declared
    specific = _kernel().not_claimed_reason("sm_90a", claimable)
    assert "arch-specific" in specific and "arches=('sm_90a',)" in specific and "min_cc" not in specific


def test_the_claimable_list_comes_from_the_installed_nvrtc_or_a_documented_fallback():
    numbers, source = arches.nvrtc_supported()
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        assert numbers == arches.FALLBACK_ARCHES and "no NVRTC" in source
        return
    assert numbers == tuple(nvrtc.nvrtcGetSupportedArchs()[1]) and source.startswith("NVRTC ")
    assert arches.installed_arches() == arches.claimable_arches(numbers)


def test_gemm_arch_accepts_every_claimable_target_and_all_and_names_the_option_on_error():
    from pytest_gemm.kernels.compiler import parse_arch_list

    assert parse_arch_list("75,sm_90a,8.6") == ["sm_75", "sm_90a", "sm_86"]
    assert parse_arch_list("all") == list(arches.installed_arches())
    with pytest.raises(ValueError, match=r"--gemm-arch: unknown architecture 'sm_99'; accepted .*sm_70.*sm_90a"):
        parse_arch_list("sm_99")


def test_a_wrong_template_entry_names_the_entry_and_the_source_file(tmp_path):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    from pytest_gemm.kernels.compiler import GemmCompileError, compile_for_arch

    cu = tmp_path / "mm.cu"
    cu.write_text("template <int T> __global__ void __launch_bounds__(256) mm(float* C) { C[0] = T; }\n")
    k = CudaKernel(source=str(cu), entry="mmx<16>", block=(256,), tile=(16, 16), name="templ")
    with pytest.raises(GemmCompileError) as info:
        compile_for_arch(k, "sm_80")
    message = str(info.value)
    assert "entry 'mmx<16>' is not a kernel in" in message and str(cu) in message
    assert "mm<...>" in message and "__nv_name_map" not in message
