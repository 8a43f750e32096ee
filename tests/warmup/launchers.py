"""Triton's tutorial matmul (tests/warmup/tutorial.py, with @triton.autotune) reached in each of
the ways a user's launcher reaches it, none of which pytest-gemm can see by reading the code
before it runs: the tuning must be found while it happens, in the kernel's process
(checks/warmup.py). Nothing here imports Triton or torch until a launcher is called.

- ``imported_inside``: ``import`` inside the launcher function (the common way to keep torch and
  Triton out of a module's import), fp16, fp32 as published (TF32 products: precision_too_low)
  and fp32 with ``input_precision="ieee"`` (passes);
- ``attribute_at_first_call``: the launcher stores the implementation on itself at first call;
- ``method_of_class``: a bound method of an object that loads the kernel lazily;
- ``wrapper_from_another_package``: ``otherpkg.ops.matmul``, a decorated op of another package;
- ``never_returns``: a launcher whose kernel spins forever (it compiles with CuPy first: a
  warm-up, then a real hang): ``timeout`` within the check's normal budget.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from pytest_gemm import kernel

HERE = Path(__file__).resolve().parent
_FP16 = dict(precision="fp16", min_cc=(8, 0))
_FP32 = dict(precision="fp32", min_cc=(8, 0))


def _load(name: str, path: Path) -> Any:
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


def _inside(a: Any, b: Any, c: Any, input_precision: str | None = None) -> None:
    tutorial = _load("gemm_warmup_tutorial", HERE / "tutorial.py")  # the import, inside the call
    tutorial.launch(a, b, c, input_precision)


imported_inside_fp16 = kernel(_inside, **_FP16, name="imported_inside_fp16")
imported_inside_fp32 = kernel(_inside, **_FP32, name="imported_inside_fp32")


@kernel(**_FP32, name="imported_inside_fp32_ieee")
def imported_inside_fp32_ieee(a: Any, b: Any, c: Any) -> None:
    _inside(a, b, c, "ieee")


@kernel(**_FP16, name="attribute_at_first_call")
def attribute_at_first_call(a: Any, b: Any, c: Any) -> None:
    impl = getattr(attribute_at_first_call, "impl", None)
    if impl is None:
        impl = _load("gemm_warmup_tutorial", HERE / "tutorial.py").launch
        attribute_at_first_call.impl = impl  # type: ignore[attr-defined]
    impl(a, b, c)


class _Matmul:
    """An object whose method launches: the kernel is loaded on the first call."""

    def __init__(self) -> None:
        self.tutorial: Any = None

    def run(self, a: Any, b: Any, c: Any) -> None:
        if self.tutorial is None:
            self.tutorial = _load("gemm_warmup_tutorial", HERE / "tutorial.py")
        self.tutorial.launch(a, b, c)


method_of_class = kernel(_Matmul().run, **_FP16, name="method_of_class")


def _other(a: Any, b: Any, c: Any) -> None:
    sys.path.insert(0, str(HERE)) if str(HERE) not in sys.path else None
    from otherpkg.ops import matmul

    matmul(a, b, c)


wrapper_from_another_package = kernel(_other, **_FP16, name="wrapper_from_another_package")


@kernel(**_FP32, name="never_returns")
def never_returns(a: Any, b: Any, c: Any) -> None:
    import cupy

    spin = cupy.RawModule(code=(HERE / "spin.cu").read_text()).get_function("spin_forever")
    flag = cupy.zeros(1, dtype=cupy.int32)
    spin((1,), (32,), (flag,))
    cupy.cuda.get_current_stream().synchronize()  # never returns: the kernel spins


WAYS = [imported_inside_fp16, attribute_at_first_call, method_of_class, wrapper_from_another_package]
FP32 = [imported_inside_fp32, imported_inside_fp32_ieee]
