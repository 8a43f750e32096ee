"""The plugin seen from pytest: loading, skipping without a GPU, markers, compile-only mode."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # makes "no usable GPU" real on a GPU machine too


def test_loading_the_plugin_never_imports_cupy():
    code = "import pytest_gemm.plugin, pytest_gemm, reference_kernels, sys; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_project_that_does_not_use_the_plugin_never_touches_cuda(pytester: pytest.Pytester):
    pytester.makepyfile(test_plain="""
        import sys
        def test_plain():
            assert 1 + 1 == 2
        def test_zz_no_cupy():
            assert 'cupy' not in sys.modules
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_without_a_gpu_gpu_tests_skip_with_the_reason_and_the_run_exits_0(pytester: pytest.Pytester, monkeypatch):
    pytest.importorskip("cupy", reason="CuPy not installed: the no-GPU reason comes from CuPy")
    for k, v in NO_GPU.items():
        monkeypatch.setenv(k, v)
    pytester.makepyfile(test_gpu="""
        import pytest

        @pytest.mark.gemm_gpu
        def test_needs_gpu():
            raise AssertionError("must not run")

        def test_device(gemm_device):
            raise AssertionError("must not run")

        @pytest.mark.gemm_requires_cc(8, 0)
        def test_needs_ampere():
            raise AssertionError("must not run")

        def test_cpu():
            pass
    """)
    result = pytester.runpytest_subprocess("-rs", "--strict-markers")
    assert result.ret == 0
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*SKIPPED*no usable GPU: *"])  # the cause: tests/test_driver_reason.py


def test_markers_are_registered_and_checked(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.gemm_gpu:*", "@pytest.mark.gemm_requires_cc(major, minor):*"])
    pytester.makepyfile(test_bad="""
        import pytest
        @pytest.mark.gemm_requires_cc("eight")
        def test_x():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "use @pytest.mark.gemm_requires_cc(major, minor)" in text and "'eight'" in text


def test_user_fixtures_work_without_a_gpu(pytester: pytest.Pytester, monkeypatch):
    for k, v in NO_GPU.items():
        monkeypatch.setenv(k, v)
    pytester.makepyfile(test_mine="""
        import numpy as np
        import pytest

        def test_exact_reference_and_comparison(gemm_exact_inputs, gemm_reference, gemm_assert_bit_identical):
            p = gemm_exact_inputs(33, 17, 65, precision="fp32", seed=3)
            want = gemm_reference(p.a64, p.b64)
            got = (p.a.astype(np.float32) @ p.b.astype(np.float32))
            gemm_assert_bit_identical(got, want)
            with pytest.raises(AssertionError, match="differ"):
                gemm_assert_bit_identical(got + np.float32(1), want)

        def test_accuracy_gauge(gemm_random_inputs, gemm_assert_accurate):
            p = gemm_random_inputs(64, 64, 256, precision="fp32", distribution="uniform", seed=1)
            got = (p.a @ p.b).astype(np.float32)
            gemm_assert_accurate(got, p)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_conformance_suite_runs_by_pyargs_and_skips_cleanly_without_gpu(pytester: pytest.Pytester, monkeypatch):
    for k, v in NO_GPU.items():
        monkeypatch.setenv(k, v)
    result = pytester.runpytest_subprocess("--pyargs", "conformance", "-q", "-k", "tiled16 and (exact or launch)", "-rs")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "no usable GPU" in out
    assert " failed" not in out


def test_compile_only_mode_runs_compile_checks_for_every_requested_arch(pytester: pytest.Pytester):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    pytester.makefile(".cu", mm=textwrap.dedent("""
        extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
            int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
            if (r < M && c < N) { float s = 0; for (int i = 0; i < K; ++i) s += A[r*K+i] * B[i*N+c]; C[r*N+c] = s; }
        }
    """))
    pytester.makepyfile(mine="""
        from pytest_gemm import CudaKernel
        k = CudaKernel(source="mm.cu", entry="mm", block=(16, 16), tile=(16, 16), name="mine")
        amp = CudaKernel(source="mm.cu", entry="mm", block=(16, 16), tile=(16, 16), name="amp", min_cc=(8, 0))
        both = [k, amp]
    """)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:both", "--gemm-arch", "sm_75,sm_80,sm_90",
                                           "-v", "-rs")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*test_compiles_offline?compile-mine-sm_75? PASSED*",
        "*test_compiles_offline?compile-mine-sm_90? PASSED*",
        "*test_compiles_offline?compile-amp-sm_80? PASSED*",
    ])
    # the resource report: one row per kernel and architecture
    result.stdout.fnmatch_lines(["*kernel*arch*registers*spill bytes*", "*mine*sm_80*passed*"])
    result.stdout.fnmatch_lines(["*amp* does not claim sm_75*"])
    assert "test_check" not in result.stdout.str()  # compile-only: the GPU checks were deselected


def test_compile_only_mode_fails_a_kernel_that_does_not_compile_for_a_claimed_arch(pytester: pytest.Pytester):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    pytester.makefile(".cu", mm=textwrap.dedent("""
        extern "C" __global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
        #if __CUDA_ARCH__ >= 900
            this_does_not_compile_on_hopper;
        #endif
            C[0] = A[0] * B[0];
        }
    """))
    pytester.makepyfile(mine="""
        from pytest_gemm import CudaKernel
        k = CudaKernel(source="mm.cu", entry="mm", block=(32,), tile=(1, 32), name="mine")
    """)
    result = pytester.runpytest_subprocess("--gemm-kernel", "mine:k", "--gemm-arch", "sm_80,sm_90")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*[[]compile_error[]] kernel 'mine': CUDA compile error in*mm.cu for sm_90*",
                                 "*mm.cu(3): error*"])
    assert "Traceback" not in result.stdout.str()


# ---- ranked with the ladder ----------------------------------------------------------

RANKED = """
from pytest_gemm import kernel


@kernel(name="mine")
def mine(a, b, c):
    c[...] = a @ b


@kernel(name="half", precision="fp16")
def half(a, b, c):
    c[...] = a.astype("float32") @ b.astype("float32")
"""


def _speed_ids(pytester: pytest.Pytester, *args: str) -> list[str]:
    pytester.makepyfile(ranked=RANKED)
    result = pytester.runpytest_subprocess(*args, "--collect-only", "-q", "-k", "speed")
    assert result.ret == 0, result.stdout.str()
    return [line.split("[", 1)[1].rstrip("]") for line in result.stdout.lines if "test_check[speed-" in line]


def test_a_kernel_under_test_is_ranked_with_the_ladder_of_its_precision(pytester: pytest.Pytester):
    ids = _speed_ids(pytester, "--gemm-kernel", "ranked.py:mine", "--gemm-ladder")
    assert "speed-mine-4096x4096x4096" in ids
    import reference_kernels

    fp32 = [str(k.name) for k in reference_kernels.LADDER if k.precision == "fp32"]
    assert sorted(ids) == sorted(["speed-mine-4096x4096x4096"]
                                 + [f"speed-ladder-{name}-4096x4096x4096" for name in fp32])
    assert "speed-ladder-cublas-fp32-4096x4096x4096" in ids and not any("wmma" in i for i in ids)


def test_each_precision_under_test_brings_its_own_rungs(pytester: pytest.Pytester):
    ids = _speed_ids(pytester, "--gemm-kernel", "ranked.py:mine", "--gemm-kernel", "ranked.py:half",
                     "--gemm-bench-shape", "1024", "--gemm-ladder")
    assert "speed-ladder-wmma-fp16-1024x1024x1024" in ids and "speed-ladder-cublas-fp16-1024x1024x1024" in ids
    assert "speed-ladder-warptile-1024x1024x1024" in ids
    assert not any("bf16" in i or "tf32" in i for i in ids)


@pytest.mark.parametrize("args", [(), ("--gemm-ladder", "--gemm-gradescope", "results.json")],
                         ids=["not-asked", "grading"])
def test_no_ladder_is_timed_unless_asked_and_never_when_grading(pytester: pytest.Pytester, args: tuple[str, ...]):
    ids = _speed_ids(pytester, "--gemm-kernel", "ranked.py:mine", *args)
    assert ids == ["speed-mine-4096x4096x4096"]


def test_the_ladder_under_test_is_not_timed_twice(pytester: pytest.Pytester):
    ids = _speed_ids(pytester, "--gemm-kernel", "reference_kernels:warptile", "--gemm-ladder")
    assert ids == ["speed-warptile-4096x4096x4096"]
