"""With no GPU a Python launcher is still exercised: called with stand-in arrays in a child
process, it runs up to its first use of their data or of a GPU library, and a failure of its
own before that (an exception its code raises, an exit, a hang) is reported. No GPU needed."""
from __future__ import annotations

import re
import textwrap

import pytest

from pytest_gemm.kernels import dry_run
from pytest_gemm.kernels.dry_run import NeedsGpu, StandIn, call, classify

LAUNCHERS = textwrap.dedent("""
    from pytest_gemm import kernel

    @kernel
    def boom(a, b, c):
        m, k = a.shape
        raise RuntimeError(f"not written yet ({m}x{k})")

    @kernel
    def typo(a, b, c):
        cupyy.matmul(a, b, out=c)

    @kernel
    def quits(a, b, c):
        import os
        os._exit(3)

    @kernel
    def uses_data(a, b, c):
        m, k = a.shape
        assert a.dtype == "float32" and c.flags.c_contiguous
        c[:] = a @ b

    @kernel(precision="fp16", multiple_of=(16, 16, 16))
    def cupy_matmul(a, b, c):
        import cupy
        cupy.matmul(a, b, out=c)

    @kernel
    def needs_triton(a, b, c):
        import triton

    @kernel
    def hangs(a, b, c):
        while True:
            pass
""")


def test_a_stand_in_has_the_metadata_and_no_data():
    a = StandIn("a", (64, 32), "float16")
    assert a.shape == (64, 32) and a.ndim == 2 and a.size == 2048 and a.itemsize == 2 and a.strides == (64, 2)
    assert a.flags.c_contiguous and a.flags["C_CONTIGUOUS"]
    for use in (lambda: a.data, lambda: a[0], lambda: a @ a, lambda: len(a), lambda: a.__cuda_array_interface__,
                lambda: __import__("numpy").asarray(a)):
        with pytest.raises(NeedsGpu):
            use()


def _frames(*files: str) -> list[tuple[str, int]]:
    return [(f, 7) for f in files]


@pytest.mark.parametrize("exc, frames, outcome", [
    (None, [], dry_run.RETURNED),
    (NeedsGpu("c.fill"), _frames("/home/me/k.py"), dry_run.REACHED_DATA),
    (RuntimeError("boom"), _frames("/home/me/k.py"), dry_run.RAISED),
    (NameError("name 'cupyy' is not defined"), _frames("/home/me/k.py"), dry_run.RAISED),
    (TypeError("`out` must be a cupy.ndarray"), _frames("/home/me/k.py", "/usr/lib/python3/site-packages/cupy/_core.py"),
     dry_run.REACHED_LIBRARY),
    (RuntimeError("compiled"), _frames("/home/me/k.py", "cupy/cuda/device.pyx"), dry_run.REACHED_LIBRARY),
    (ModuleNotFoundError("No module named 'triton'", name="triton"), _frames("/home/me/k.py"), dry_run.REACHED_LIBRARY),
    (ModuleNotFoundError("No module named 'mylib'", name="mylib"), _frames("/home/me/k.py"), dry_run.RAISED),
    (SystemExit(3), _frames("/home/me/k.py"), dry_run.EXITED),
])
def test_classify_blames_the_launcher_only_for_what_its_own_code_raised(exc, frames, outcome):
    result = classify(exc, frames, libraries=())
    assert result.outcome == outcome
    assert result.failed == (outcome in (dry_run.RAISED, dry_run.EXITED, dry_run.HUNG))
    if outcome == dry_run.RAISED:
        assert result.where == "/home/me/k.py:7" and type(exc).__name__ in result.describe()


def test_call_in_process_reports_the_launcher_s_own_exception():
    def boom(a, b, c):
        raise ValueError(f"{a.shape} {b.shape} {c.shape} {a.dtype} {c.dtype}")

    result = call(boom, "bf16", (16, 32, 8), takes_alpha_beta=False)
    assert result.outcome == dry_run.RAISED and "(16, 8) (8, 32) (16, 32) uint16 float32" in result.message


@pytest.fixture
def no_gpu(pytester: pytest.Pytester) -> pytest.Pytester:
    from pytest_gemm.kernels.device import probe

    if not isinstance(probe(), str):
        pytest.skip("a GPU is usable here: the GPU checks run the launchers for real")
    pytester.makepyfile(launchers=LAUNCHERS)
    return pytester


@pytest.mark.parametrize("name, needles", [
    ("boom", ["the launcher raised RuntimeError: not written yet (64x64)", "launchers.py:6"]),
    ("typo", ["NameError: name 'cupyy' is not defined"]),
    ("quits", ["the launcher ended its process (exit status 3"]),
])
def test_with_no_gpu_a_launcher_that_fails_by_itself_is_reported(no_gpu, name, needles):
    result = no_gpu.runpytest_subprocess("--gemm-kernel", f"launchers:{name}", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert result.parseoutcomes().get("failed") == 1, text
    assert f"{name}: launch_error (launch 64x64x64)" in text, text
    for needle in needles:
        assert needle in text, text
    assert "Traceback" not in text, text


@pytest.mark.parametrize("name, needle", [
    ("uses_data", "ran up to its first use of their data (a (__matmul__)"),
    ("cupy_matmul", "ran up to a GPU library call"),
    ("needs_triton", "No module named 'triton' (not installed here)"),
])
def test_with_no_gpu_a_launcher_that_reaches_gpu_work_is_skipped_saying_how_far_it_ran(no_gpu, name, needle):
    import importlib.util

    if name == "needs_triton" and importlib.util.find_spec("triton") is not None:
        pytest.skip("triton is installed here")
    result = no_gpu.runpytest_subprocess("--gemm-kernel", f"launchers:{name}", "-k", "launch", "-rs",
                                         "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    # nothing of the kernel was tested: the run fails, one line naming the kernel and how far it ran
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(skipped=1)
    assert "no usable GPU" in text and needle in text, text
    assert len(re.findall(rf"^{name}: not tested: no usable GPU.*{re.escape(needle)}", text, re.M)) == 1, text
    assert "`out` must be" not in text, text  # what CuPy said of a stand-in is not the launcher's error


def test_with_no_gpu_a_hanging_launcher_is_bounded_by_gemm_timeout_and_says_it_waits(no_gpu):
    import time

    start = time.monotonic()
    result = no_gpu.runpytest_subprocess("--gemm-kernel", "launchers:hangs", "-k", "launch", "--gemm-timeout", "5",
                                         "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert time.monotonic() - start < 60, text
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "hangs: timeout (launch 64x64x64)" in text and "did not return within 5 s (--gemm-timeout)" in text, text
    assert "launchers:hangs: waiting for the launcher called with stand-in arrays (no GPU)" in text, text
    assert "its own code hangs before any GPU work" in text and "fails before" not in text, text
    # where it hung: the launcher's own line (its loop), not the harness's
    lines = [i + 1 for i, line in enumerate(LAUNCHERS.lstrip("\n").splitlines())
             if line.strip() in ("while True:", "pass")]
    assert re.search(rf"\(it was at \S*launchers\.py:({'|'.join(map(str, lines))})\)", text), text


def test_a_hang_is_placed_at_the_launcher_s_innermost_own_frame():
    dumped = ("Timeout (0:00:04)!\nThread 0x00007f (most recent call first):\n"
              '  File "/usr/lib/python3.12/threading.py", line 355 in wait\n'
              '  File "/home/me/k.py", line 9 in helper\n  File "/home/me/k.py", line 4 in launch\n'
              '  File "/v/pytest_gemm/kernels/dry_run.py", line 200 in call\n')
    assert dry_run.hung_at(dumped, libraries=("/usr/lib/python3.12", "/v/pytest_gemm")) == "/home/me/k.py:9"
    assert dry_run.hung_at("", libraries=()) == ""


def test_a_library_s_complaint_about_stand_ins_names_the_library_and_the_user_s_line():
    exc = TypeError("`out` must be a tuple or `cupy.ndarray`")
    result = classify(exc, [("/home/me/k.py", 22), ("/v/lib/python3.12/site-packages/cupy/_core/_gufuncs.py", 707)],
                      libraries=())
    assert result.outcome == dry_run.REACHED_LIBRARY and result.message == "cupy" and result.where == "/home/me/k.py:22"
    assert "`out`" not in result.describe() and "as far as a launcher can run without a GPU" in result.describe()


def test_a_library_launcher_s_stop_is_placed_at_its_call_into_the_gpu_library_not_inside_it():
    # the ladder's cuBLAS rungs: no frame of the user's own, the launcher lives in pytest-gemm
    runtime_error = type("CUDARuntimeError", (RuntimeError,), {"__module__": "cupy_backends.cuda.api.runtime"})
    exc = runtime_error("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    frames = [("/site/pytest_gemm/measure/cublas.py", 112), ("/site/pytest_gemm/measure/cublas.py", 77),
              ("cupy/cuda/device.pyx", 62), ("cupy_backends/cuda/api/runtime.pyx", 146)]
    result = classify(exc, frames, libraries=("/site/pytest_gemm",))
    assert result.outcome == dry_run.REACHED_LIBRARY and result.message == "cupy_backends", result
    assert result.where == "/site/pytest_gemm/measure/cublas.py:77", result


def test_compile_only_mode_reports_a_launcher_that_raises(no_gpu):
    result = no_gpu.runpytest_subprocess("--gemm-kernel", "launchers:boom", "--gemm-arch", "sm_80", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(failed=1)
    assert "boom: launch_error (compile)" in text and "RuntimeError: not written yet" in text, text


def test_compile_only_mode_names_a_launcher_it_could_not_compile_check(no_gpu):
    # a module of a CUDA C kernel and a Python launcher that builds nothing: the run is judged by
    # what it compiled (exit 0), and the launcher is named, not left to the skip counts
    no_gpu.makepyfile(mixed=textwrap.dedent("""
        from pytest_gemm import CudaKernel, kernel

        naive = CudaKernel(source='''
        extern "C" __global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K) {
            int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
            if (r < M && c < N) { float s = 0.f; for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c]; C[r * N + c] = s; }
        }''', entry="gemm", block=(16, 16), tile=(16, 16), name="naive")

        @kernel(name="library call")
        def library_call(a, b, c):
            import cupy
            cupy.matmul(a, b, out=c)
    """))
    result = no_gpu.runpytest_subprocess("--gemm-kernel", "mixed.py:naive", "--gemm-kernel", "mixed.py:library_call",
                                         "--gemm-arch", "sm_80", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, text
    assert len(re.findall(r"^library call: not compile-checked: kernel 'library call' is a Python launcher that "
                          r"declares no CUDA it builds", text, re.M)) == 1, text
    assert "naive: not compile-checked" not in text and "naive: compiled only" in text, text
