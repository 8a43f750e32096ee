"""Without a GPU nothing passes untested: a Python launcher's declared CUDA is compiled in
compile-only mode, a launcher with nothing to compile is in the summary with its reason, a
compile-only run that compiled nothing fails, and a compile error is one message (the NVRTC
log, no traceback of ours), visible even with ``-q --tb=no``. Runs with NVRTC, no GPU."""
from __future__ import annotations

import json
import re
import textwrap

import pytest

MM_CU = textwrap.dedent("""
    extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
        int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
        if (r < M && c < N) { float s = 0; for (int i = 0; i < K; ++i) s += A[r * K + i] * B[i * N + c]; C[r * N + c] = s; }
    }
""")
SYNTAX_CU = MM_CU.replace("float s = 0;", "float s = 0")

LAUNCHERS = textwrap.dedent("""
    from pytest_gemm import CudaKernel, kernel

    @kernel(builds=[CudaKernel(source="mm.cu", entry="mm", block=(16, 16), tile=(16, 16), arches=("sm_80",))])
    def built(a, b, c):
        raise RuntimeError("only called on a GPU")

    @kernel
    def plain(a, b, c):
        import cupy
        cupy.matmul(a, b, out=c)

    broken = CudaKernel(source="syntax.cu", entry="mm", block=(16, 16), tile=(16, 16))
""")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytest.importorskip("cuda.bindings")
    from pytest_gemm.kernels.compiler import toolchain_problem

    problem = toolchain_problem()
    if problem:
        pytest.skip(problem)
    pytester.makefile(".cu", mm=MM_CU, syntax=SYNTAX_CU)
    pytester.makepyfile(launchers=LAUNCHERS)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, str]:
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    return result, result.stdout.str() + result.stderr.str()


def test_a_launcher_s_declared_build_is_compiled_and_reported_in_its_name(project):
    result, text = _run(project, "--gemm-kernel", "launchers:built", "--gemm-arch", "sm_80,sm_90",
                        "--gemm-report", "r.json", "-rs")
    assert result.ret == 0, text
    result.assert_outcomes(passed=1, skipped=1)
    assert "compile-built-mm-sm_80" in text or "built (mm)" in text, text
    assert "built (mm)  sm_80" in text, text  # the compile table names the launcher and its build
    report = json.loads((project.path / "r.json").read_text())
    (entry,) = report["kernels"]
    passed = [c for c in entry["checks"] if c["outcome"] == "passed"]
    assert entry["name"] == "built" and passed[0]["params"] == {"arch": "sm_80", "build": "mm"}


def test_a_launcher_with_nothing_to_compile_is_in_the_summary_and_a_run_that_compiled_nothing_fails(project):
    result, text = _run(project, "--gemm-kernel", "launchers:plain", "--gemm-arch", "sm_80", "--gemm-report", "r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "compile-only mode (--gemm-arch) compiled nothing" in text, text
    assert "'plain' is a Python launcher that declares no CUDA it builds" in text, text
    report = json.loads((project.path / "r.json").read_text())
    assert [k["name"] for k in report["kernels"]] == ["plain"]


def test_a_launcher_beside_a_kernel_that_compiles_does_not_fail_the_run(project):
    result, text = _run(project, "--gemm-kernel", "launchers:plain", "--gemm-kernel", "launchers:built",
                        "--gemm-arch", "sm_80")
    assert result.ret == 0, text
    result.assert_outcomes(passed=1, skipped=1)


@pytest.mark.parametrize("flags", [(), ("-q", "--tb=no")])
def test_a_compile_error_is_one_message_with_the_nvrtc_log_and_no_traceback(project, flags):
    result, text = _run(project, "--gemm-kernel", "launchers:broken", "--gemm-arch", "sm_80", *flags)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert 'syntax.cu(3): error: expected a ";"' in text, text
    assert "Traceback" not in text and "checks/compile.py" not in text and "raise GemmCheckFailure" not in text, text


def test_the_hopper_rungs_declare_what_they_build():
    import reference_kernels

    for rung in reference_kernels.HOPPER_RUNGS:
        assert [b.entry for b in rung.builds] == ["gemm_wgmma", "gemm_wgmma_tail", "gemm_wgmma"]
        assert len({b.name for b in rung.builds}) == 3  # the compile checks' ids tell the builds apart
        assert all(b.claimed_arches() == ("sm_90a",) and b.precision == rung.precision for b in rung.builds)
        assert any(f"-DWG_BF16={int(rung.precision == 'bf16')}" in b.options for b in rung.builds)


def test_compile_only_mode_compiles_both_hopper_rungs_for_sm_90a(project):
    result, text = _run(project, "--gemm-kernel", "reference_kernels:HOPPER_RUNGS", "--gemm-arch", "sm_90a")
    assert result.ret == 0, text
    result.assert_outcomes(passed=6)
    for rung in ("wgmma-fp16", "wgmma-bf16"):
        for build in ("main", "tail", "main-pingpong-s5"):
            assert re.search(rf"{rung} \({rung}-{build}\) +sm_90a +\d+ +0 +0 .* passed", text), text


def test_builds_must_be_cuda_kernel_declarations_and_each_is_validated():
    from pytest_gemm import CudaKernel, kernel
    from pytest_gemm.model.declaration import GemmSpecError

    with pytest.raises(GemmSpecError, match="builds= lists pytest_gemm.CudaKernel"):
        kernel(builds=["mm.cu"])(lambda a, b, c: None).validate()
    bad = CudaKernel(source="no_such.cu", entry="mm", block=(16, 16), tile=(16, 16))
    with pytest.raises(GemmSpecError, match="builds: kernel 'mm': source file .*no_such.cu.* not found"):
        kernel(builds=bad)(lambda a, b, c: None).validate()
