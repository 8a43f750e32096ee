"""KernelBench-style solutions as kernels (``--gemm-kernel solution.py:ModelNew``), with no GPU
and no torch: fake modules (a ``forward`` method, called on numpy arrays) loaded by the loader
and wrapped as the contract's Python launchers (``pytest_gemm/kernels/modules.py``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_gemm import PyKernel, module_kernel
from pytest_gemm.kernels.loader import load_spec
from pytest_gemm.kernels.modules import copy_note, looks_like_module
from pytest_gemm.model.declaration import GemmSpecError

SOLUTION = '''
BUILT = []


class ModelNew:
    """KernelBench's shape: __init__ from get_init_inputs(), forward(A, B) returns the product."""

    def __init__(self, scale=1.0):
        BUILT.append(scale)
        self.scale = scale

    def __call__(self, *args):
        return self.forward(*args)

    def forward(self, A, B):
        return self.scale * (A @ B)


def get_init_inputs():
    return [1.0]


def get_inputs():
    return []
'''

OTHERS = '''
class WritesC:
    def forward(self, A, B, C):
        C[...] = A @ B
        return C


class WrongShape:
    def forward(self, A, B):
        return (A @ B)[:-1]


class ReturnsNothing:
    def forward(self, A, B):
        pass


class OneInput:
    def forward(self, A):
        return A
'''


def _problem(m: int = 5, n: int = 7, k: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 4, (m, k)).astype(np.float32)
    b = rng.integers(-4, 4, (k, n)).astype(np.float32)
    return a, b, np.full((m, n), np.nan, dtype=np.float32)


@pytest.fixture
def solution(tmp_path: Path) -> Path:
    path = tmp_path / "solution.py"
    path.write_text(SOLUTION)
    return path


@pytest.fixture
def others(tmp_path: Path) -> Path:
    path = tmp_path / "others.py"  # no get_init_inputs(): built with no arguments
    path.write_text(OTHERS)
    return path


def test_a_module_class_is_a_kernel_named_after_it_built_in_the_kernels_process_only(solution: Path):
    [k] = load_spec(f"{solution}:ModelNew")
    assert isinstance(k, PyKernel) and k.name == "ModelNew" and k.precision == "fp32" and not k.takes_alpha_beta
    built = k.fn.module.__init__.__globals__["BUILT"]
    assert built == []  # loading (pytest's process) does not instantiate it: its __init__ may touch CUDA
    a, b, c = _problem()
    k.fn(a, b, c)
    np.testing.assert_array_equal(c, a @ b)
    assert built == [1.0]  # once, with get_init_inputs()'s arguments
    k.fn(a, b, c)
    assert built == [1.0]


def test_a_new_result_is_copied_into_c_and_the_copy_is_reported(solution: Path):
    [k] = load_spec(f"{solution}:ModelNew")
    assert copy_note(k) is None  # nothing copied yet
    a, b, c = _problem(64, 32, 8)
    k.fn(a, b, c)
    assert k.fn.copies == 1 and k.fn.copied_bytes == c.nbytes
    note = copy_note(k)
    assert note is not None and "ModelNew.forward returns a new tensor" in note and "timed call" in note


def test_a_module_that_writes_c_is_not_copied(others: Path):
    [k] = load_spec(f"{others}:WritesC")
    a, b, c = _problem()
    k.fn(a, b, c)
    np.testing.assert_array_equal(c, a @ b)
    assert k.fn.copies == 0 and copy_note(k) is None


def test_an_instance_is_used_as_it_is():
    class Double:
        def forward(self, A, B):
            return 2 * (A @ B)

    instance = Double()
    k = module_kernel(instance, precision="fp16", min_cc=(8, 0))
    k.validate()
    assert k.name == "Double" and k.precision == "fp16" and k.min_cc == (8, 0)
    a, b, c = _problem()
    k.fn(a, b, c)
    np.testing.assert_array_equal(c, 2 * (a @ b))
    assert k.fn.instance() is instance


def test_a_wrong_result_says_what_forward_must_return(others: Path):
    [wrong] = load_spec(f"{others}:WrongShape")
    with pytest.raises(ValueError, match=r"WrongShape.forward returned shape \(4, 7\); C is \(5, 7\)"):
        wrong.fn(*_problem())
    [nothing] = load_spec(f"{others}:ReturnsNothing")
    with pytest.raises(TypeError, match=r"ReturnsNothing.forward\(A, B\) returned None"):
        nothing.fn(*_problem())


def test_a_forward_of_the_wrong_arity_is_a_spec_error(others: Path):
    with pytest.raises(GemmSpecError, match=r"others.py:OneInput.*OneInput.forward takes 1 inputs"):
        load_spec(f"{others}:OneInput")


def test_only_things_with_a_forward_method_look_like_modules():
    assert not looks_like_module(lambda a, b, c: None)
    assert not looks_like_module(PyKernel(lambda a, b, c: None))
    assert not looks_like_module(np)
    with pytest.raises(GemmSpecError, match="not a module"):
        module_kernel(object())


def test_a_launcher_with_its_own_defaulted_parameters_is_called_with_three():
    """The contract is that the suite calls f(a, b, c) (or f(a, b, c, alpha, beta)): a launcher with
    parameters of its own that have defaults (stream=None, input_precision=None) keeps it, and one
    that needs a fourth argument does not."""
    import pytest

    from pytest_gemm.model.contract import kernel
    from pytest_gemm.model.declaration import GemmSpecError

    def with_stream(a, b, c, stream=None): ...
    def scaled(a, b, c, alpha, beta, stream=None): ...
    def named(a, b, c, alpha=1.0, beta=0.0): ...
    def needs_four(a, b, c, d): ...

    k = kernel()(with_stream)
    k.validate()
    assert not k.takes_alpha_beta
    for fn in (scaled, named):
        k = kernel()(fn)
        k.validate()
        assert k.takes_alpha_beta
    with pytest.raises(GemmSpecError, match="takes 4 positional parameters$"):
        kernel()(needs_four).validate()

    def with_sizes(a, b, c, m, n, k): ...  # as a CUDA kernel takes them

    with pytest.raises(GemmSpecError, match=r"takes 6 positional parameters; the sizes come from the arrays: "
                                            r"m, k = a\.shape; n = b\.shape\[1\]"):
        kernel()(with_sizes).validate()
