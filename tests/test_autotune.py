"""Kernels that autotune per shape (Triton's ``@triton.autotune``), with no GPU and no Triton:
a fake ``Autotuner`` whose type says it comes from ``triton.runtime.autotuner``, found through
what a launcher refers to; such a kernel runs the quick shape set unless --gemm-shapes says
otherwise, and the run says so."""
from __future__ import annotations

import pytest

import fakegpu
from pytest_gemm.checks import registry
from pytest_gemm.kernels import autotune
from pytest_gemm import kernel


class Autotuner:  # what @triton.autotune returns, as far as the detection looks
    def __init__(self, name: str = "matmul_kernel") -> None:
        self.fn = type("JITFunction", (), {"__name__": name})()
        self.best_config = None

    def __getitem__(self, grid):  # kernel[grid](...)
        return lambda *args: None


Autotuner.__module__ = "triton.runtime.autotuner"


class NotTriton:
    pass


NotTriton.__name__ = "Autotuner"  # same name, another package: not Triton's

matmul_kernel = Autotuner()


def _direct(a, b, c):
    matmul_kernel[(1,)](a, b, c)


def _helper(a, b, c):
    _direct(a, b, c)


def _plain(a, b, c):
    c[...] = a @ b


def test_an_autotuner_is_known_by_its_type_and_package():
    assert autotune.is_autotuner(matmul_kernel)
    assert autotune.is_autotuner(type("Sub", (Autotuner,), {})())  # a subclass too
    assert not autotune.is_autotuner(NotTriton())
    assert not autotune.is_autotuner(_direct)


def test_an_autotuner_is_found_through_globals_helpers_closures_and_objects():
    assert autotune.autotuners(_direct) == [matmul_kernel]
    assert autotune.autotuners(_helper) == [matmul_kernel]  # a call deeper
    tuner = Autotuner("closed_over")

    def closure(a, b, c):
        tuner[(1,)](a, b, c)

    assert autotune.autotuners(closure) == [tuner]

    class Module:  # a KernelBench-style module keeping its kernel as an attribute
        def __init__(self) -> None:
            self.k = tuner

        def forward(self, a, b):
            return a @ b

        def __call__(self, a, b):
            return self.forward(a, b)

    assert autotune.autotuners(Module()) == [tuner]

    class ModelNew:  # a KernelBench solution whose forward launches a global autotuner
        def forward(self, a, b):
            matmul_kernel[(1,)](a, b, None)

    from pytest_gemm import module_kernel

    assert autotune.autotuners(module_kernel(ModelNew).fn) == [matmul_kernel]  # the class, never built
    assert autotune.autotuners(_plain) == []
    assert autotune.autotunes(kernel(_direct)) and not autotune.autotunes(kernel(_plain))


def test_describe_best_names_the_config_each_autotuner_chose():
    k = kernel(_direct)
    assert autotune.describe_best(k) is None  # not run yet
    matmul_kernel.best_config = "BLOCK_SIZE_M: 128, BLOCK_SIZE_N: 256, num_warps: 8"
    try:
        assert autotune.describe_best(k) == "matmul_kernel: BLOCK_SIZE_M: 128, BLOCK_SIZE_N: 256, num_warps: 8"
    finally:
        matmul_kernel.best_config = None


def test_the_result_cache_is_switched_on_unless_the_user_chose():
    env: dict[str, str] = {}
    autotune.enable_result_cache(env)
    assert env == {autotune.CACHE_ENV: "1"}
    env = {autotune.CACHE_ENV: "0"}
    autotune.enable_result_cache(env)
    assert env == {autotune.CACHE_ENV: "0"}


TUNED_KERNELS = '''
from pytest_gemm import kernel


class Autotuner:
    best_config = None

    def __getitem__(self, grid):
        return lambda *args: None


Autotuner.__module__ = "triton.runtime.autotuner"
matmul_kernel = Autotuner()


@kernel(name="ok_tuned")
def ok_tuned(a, b, c):
    matmul_kernel[(1,)](a, b, c)


@kernel(name="ok")
def ok(a, b, c):
    pass
'''


@pytest.fixture
def fake(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    (pytester.path / "tuned.py").write_text(TUNED_KERNELS)
    for key, value in fakegpu.env(pytester.path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv(autotune.CACHE_ENV, raising=False)
    return pytester


def _count(result: pytest.RunResult, check: str, name: str) -> int:
    return sum(1 for line in result.outlines if f"::test_check[{check}-{name}-" in line)


def test_an_autotuned_kernel_runs_the_quick_shapes_and_the_others_every_shape(fake):
    result = fake.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel", "tuned.py:ok_tuned",
                                       "--gemm-kernel", "tuned.py:ok", "--collect-only", "-q")
    assert _count(result, "exact", "ok_tuned") == len(registry.QUICK_EXACT)
    assert _count(result, "accuracy", "ok_tuned") == 2 * len(registry.QUICK_ACCURACY)
    assert _count(result, "exact", "ok") == len(registry.BY_NAME["exact"].shapes)
    full = fake.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel", "tuned.py:ok_tuned",
                                     "--gemm-shapes", "full", "--collect-only", "-q")
    assert _count(full, "exact", "ok_tuned") == len(registry.BY_NAME["exact"].shapes)


def test_the_run_says_why_an_autotuned_kernel_ran_the_quick_shapes(fake):
    result = fake.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel", "tuned.py:ok_tuned",
                                       "-k", "launch")
    result.stdout.fnmatch_lines(["*'ok_tuned' autotune(s) per shape (a Triton autotuner): checked on the quick shape "
                                 "set*--gemm-shapes full checks every shape*"])
    plain = fake.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel", "tuned.py:ok",
                                      "-k", "launch")
    assert "a Triton autotuner" not in plain.stdout.str()


def test_quick_accuracy_spans_two_k_so_precision_too_low_can_be_the_root_cause():
    assert len({shape[2] for shape in registry.QUICK_ACCURACY}) >= 2


def test_every_quick_set_is_part_of_its_full_set():
    # A kernel seen autotuning at run time keeps the full-set cases that are quick ones
    # (runner/execution.py): a quick shape outside the full set would never run there, and its
    # checks would end with fewer cases than a kernel found autotuning in its code gets (the Triton
    # tutorial's fp32 kept accuracy at one K and read wrong_values, not precision_too_low).
    for check in registry.CHECKS:
        if check.quick is not None and isinstance(check.shapes, (list, tuple)):
            outside = [q for q in check.quick if tuple(q) not in map(tuple, check.shapes)]
            assert not outside, (check.name, outside)


ENV_SPY = '''
import os
from pathlib import Path

from pytest_gemm import kernel

Path(__file__).with_name(f"env-{os.getpid()}.txt").write_text(os.environ.get("TRITON_CACHE_AUTOTUNING", "unset"))


@kernel(name="ok")
def ok(a, b, c):
    pass
'''


def test_the_kernel_process_has_the_autotuning_cache_on_when_it_imports_the_kernel(fake):
    (fake.path / "spy.py").write_text(ENV_SPY)
    result = fake.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--gemm-kernel", "spy.py:ok",
                                       "-k", "launch")
    result.assert_outcomes(passed=1)
    seen = {p.read_text() for p in fake.path.glob("env-*.txt")}
    assert seen == {"unset", "1"}, seen  # pytest's own process imports it untouched; the kernel's process with it on


def test_a_check_may_take_longer_by_five_seconds_per_config_of_an_autotuner():
    tuner = Autotuner()
    tuner.configs = [object()] * 16

    def launch(a, b, c):
        tuner[(1,)](a, b, c)

    assert autotune.tuning_allowance(kernel(launch)) == 16 * autotune.SECONDS_PER_CONFIG
    assert autotune.tuning_allowance(kernel(_plain)) == 0.0
