"""A module as a kernel: KernelBench-style solutions (``class ModelNew(torch.nn.Module)`` whose
``forward(A, B)`` returns the product), given as ``--gemm-kernel solution.py:ModelNew``.

The loader wraps a module class or instance (duck typing: anything with a ``forward`` taking
``(A, B)``, or ``(A, B, C)`` to write into C) in a ``ModuleLauncher``, a Python launcher of the
contract: the class is instantiated on first use, in the kernel's process (never in pytest's:
its ``__init__`` may build a CUDA extension), with the arguments of the file's
``get_init_inputs()`` when it has one (KernelBench's convention), and moved to the GPU.

Each call runs ``forward`` on the current CuPy stream (for torch modules, through
``torch.cuda.ExternalStream``). A result that is not C itself (forward(A, B) always returns
a new tensor) is copied into C on that stream: the copy is part of the launcher's call, so
it is inside the timed region, and the speed check reports it (``copy_note``).

No torch import here until a torch module is called; a module that is not a torch module is
called with the arrays themselves (what the CPU tests use).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from ..model.contract import PyKernel, kernel
from ..model.declaration import GemmSpecError


def _forward(obj: Any) -> Any:
    cls = obj if isinstance(obj, type) else type(obj)
    return getattr(cls, "forward", None)


def looks_like_module(obj: Any) -> bool:
    """A class or instance with a ``forward`` method (an ``nn.Module``, or anything shaped like one)."""
    return inspect.isfunction(_forward(obj))


def _is_torch(obj: Any) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    return any(str(getattr(base, "__module__", "")).startswith("torch.") for base in cls.__mro__)


def forward_arity(obj: Any) -> int:
    """How many of A, B, C ``forward`` takes (self aside): 2 (returns the product) or 3 (writes C)."""
    params = [p for p in inspect.signature(_forward(obj)).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    return len(params) - 1


class ModuleLauncher:
    """``launcher(a, b, c)``: ``c = module(a, b)`` (copied when the module returns a new array)."""

    def __init__(self, module: Any, init_inputs: Callable[[], Any] | None = None):
        self.module = module
        self.init_inputs = init_inputs
        self._instance: Any = None
        self.copies = 0          # calls whose result had to be copied into C
        self.copied_bytes = 0    # bytes of the last such copy
        self.__name__ = module.__name__ if isinstance(module, type) else type(module).__name__

    def instance(self) -> Any:
        """The module, instantiated and moved to the GPU on first use."""
        if self._instance is None:
            obj = self.module
            if isinstance(obj, type):
                args = list(self.init_inputs()) if self.init_inputs is not None else []
                obj = obj(*args)
            if _is_torch(obj) and hasattr(obj, "to"):
                obj = obj.to("cuda")
            self._instance = obj
        return self._instance

    def __call__(self, a: Any, b: Any, c: Any) -> None:
        module = self.instance()
        if _is_torch(module):
            self._call_torch(module, a, b, c)
            return
        call = module if callable(module) else module.forward
        out = call(a, b, c) if forward_arity(module) == 3 else call(a, b)
        self._store(out, c, lambda: out is c, lambda: c.__setitem__(Ellipsis, out))

    def _call_torch(self, module: Any, a: Any, b: Any, c: Any) -> None:
        import cupy  # lazy: CuPy (the plugin loads with no GPU)
        import torch  # lazy: optional (torch)

        with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)), torch.no_grad():
            ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
            if a.dtype == cupy.uint16:  # bf16 arrives as its bit patterns
                ta, tb = ta.view(torch.bfloat16), tb.view(torch.bfloat16)
            out = module(ta, tb, tc) if forward_arity(module) == 3 else module(ta, tb)
            self._store(out, c, lambda: out.data_ptr() == tc.data_ptr(), lambda: tc.copy_(out))

    def _store(self, out: Any, c: Any, is_c: Callable[[], bool], copy: Callable[[], Any]) -> None:
        if out is None:
            if forward_arity(self.instance()) == 3:
                return  # it wrote C and returned nothing
            raise TypeError(f"{self.__name__}.forward(A, B) returned None; it must return the product A @ B")
        if tuple(out.shape) != tuple(c.shape):
            raise ValueError(f"{self.__name__}.forward returned shape {tuple(out.shape)}; C is {tuple(c.shape)} "
                             "(M x N): return A @ B")
        if is_c():
            return
        copy()
        self.copies += 1
        self.copied_bytes = int(c.nbytes)

    def copy_note(self) -> str | None:
        """What the timed calls included besides the module's own work, or None."""
        if not self.copies:
            return None
        return (f"{self.__name__}.forward returns a new tensor: each timed call includes copying it into C "
                f"({self.copied_bytes / 2**20:.1f} MiB), as a caller of the module would")


def module_kernel(module: Any, *, precision: str = "fp32", name: str | None = None,
                  init_inputs: Callable[[], Any] | None = None, **declared: Any) -> PyKernel:
    """A module class or instance as a kernel: ``module_kernel(ModelNew, precision="fp16")``.
    ``declared`` takes the rest of ``@kernel``'s options (min_cc, multiple_of, deterministic, ...)."""
    if not looks_like_module(module):
        raise GemmSpecError(f"{module!r} is not a module: it needs a forward(A, B) method returning A @ B")
    arity = forward_arity(module)
    launcher = ModuleLauncher(module, init_inputs)
    if arity not in (2, 3):
        raise GemmSpecError(f"{launcher.__name__}.forward takes {arity} inputs; a GEMM module's forward takes "
                            "(A, B) and returns A @ B, or (A, B, C) and writes C")
    return kernel(launcher, precision=precision, name=name or launcher.__name__, **declared)


def copy_note(k: Any) -> str | None:
    """The result copy a module kernel's timed calls included, or None (any other kernel)."""
    fn = getattr(k, "fn", None)
    return fn.copy_note() if isinstance(fn, ModuleLauncher) else None


__all__ = ["ModuleLauncher", "looks_like_module", "module_kernel", "copy_note", "forward_arity"]
