"""Kernels that tune themselves per shape: Triton's ``@triton.autotune``.

An autotuned Triton kernel benchmarks every config of its list the first time it meets a
new value of its ``key`` (``key=['M', 'N', 'K']``: every new shape), in every process. The
suite's 40-odd distinct shapes, met again in each kernel process (one per xdist worker, one
more after a fault), then cost minutes of tuning. So, found by looking (no Triton import:
duck typing on the objects the launcher refers to):

- such a kernel runs the quick shape set unless ``--gemm-shapes`` says otherwise
  (``runner/collection.py``), and the run says so;
- its processes share Triton's own autotuning result cache on disk
  (``TRITON_CACHE_AUTOTUNING=1``, set in the kernel's process before its module is
  imported; a Triton without that cache ignores it), so a shape is tuned once per machine;
- a check's default timeout allows for tuning a new shape (``tuning_allowance``);
- the speed check times after its warm-up calls (tuning is never timed) and records the
  config the tuner chose (``describe_best``).
"""
from __future__ import annotations

import types
from typing import Any, Callable, Iterator

#: Triton's switch for its on-disk autotuning cache (Triton >= 3.3; older ones ignore it).
CACHE_ENV = "TRITON_CACHE_AUTOTUNING"
_DEPTH = 4  # how many calls deep a launcher's helpers are followed
#: Packages whose classes are not searched (a user's class is: its methods may launch a tuner).
_LIBRARIES = frozenset({"builtins", "torch", "triton", "numpy", "cupy", "numba", "pytest_gemm", "typing"})


def is_autotuner(obj: Any) -> bool:
    """``obj`` is a ``triton.runtime.autotuner.Autotuner`` (or a subclass), by its type's name."""
    for cls in type(obj).__mro__:
        if cls.__name__ == "Autotuner" and str(getattr(cls, "__module__", "")).startswith("triton"):
            return True
    return False


def _code_names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # nested functions, comprehensions, lambdas
            yield from _code_names(const)


def _referenced(fn: Any) -> Iterator[Any]:
    """What a Python function refers to: the globals its code names, its closure's cells,
    its defaults, and what it wraps (``functools.wraps``)."""
    if isinstance(fn, type):  # a class of the user's (a KernelBench ModelNew): its own methods
        if str(fn.__module__).split(".")[0] not in _LIBRARIES:
            yield from (v for v in vars(fn).values() if isinstance(v, types.FunctionType))
        return
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None:
        yield wrapped
    if isinstance(fn, types.MethodType):
        yield fn.__func__
        return
    if not isinstance(fn, types.FunctionType):  # a callable object (an nn.Module): its methods, its attributes
        for name in ("forward", "__call__"):
            method = getattr(type(fn), name, None)
            if isinstance(method, types.FunctionType):
                yield method
        yield from getattr(fn, "__dict__", {}).values()
        return
    namespace = fn.__globals__
    for name in _code_names(fn.__code__):
        if name in namespace:
            yield namespace[name]
    for cell in fn.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            pass
    yield from fn.__defaults__ or ()


def autotuners(fn: Callable[..., Any]) -> list[Any]:
    """The Triton autotuners a launcher reaches: referred to directly, or through the functions,
    callable objects and classes it calls (a few calls deep). Pure Python: imports nothing."""
    found: list[Any] = []
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(fn, 0)]
    while todo:
        obj, depth = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if is_autotuner(obj):
            found.append(obj)
            continue
        if depth >= _DEPTH or isinstance(obj, types.ModuleType) or not callable(obj):
            continue
        todo += [(x, depth + 1) for x in _referenced(obj)]
    return found


def autotunes(kernel: Any) -> bool:
    """A Python launcher (``PyKernel``) that reaches a Triton autotuner."""
    declared = getattr(kernel, "declared_tuning", None)  # read in the kernel's own process (kernels/declared.py)
    if declared is not None:
        return bool(declared[0])
    fn = getattr(kernel, "fn", None)
    return fn is not None and bool(autotuners(fn))


def describe_best(kernel: Any) -> str | None:
    """The config each autotuner reached from ``kernel`` chose last (``Autotuner.best_config``),
    e.g. ``"BLOCK_SIZE_M: 128, BLOCK_SIZE_N: 256, ..., num_warps: 8, num_stages: 3"``; None when
    it has none."""
    fn = getattr(kernel, "fn", None)
    if fn is None:
        return None
    chosen = []
    for tuner in autotuners(fn):
        best = getattr(tuner, "best_config", None)
        if best is not None:
            name = getattr(getattr(tuner, "fn", None), "__name__", None) or "autotuner"
            chosen.append(f"{name}: {best}")
    return "; ".join(chosen) or None


#: What a check's timeout allows per config of an autotuner on top of its own: compiling the
#: config (the first process to meet a new specialization compiles every config) and timing it.
SECONDS_PER_CONFIG = 5.0


def tuning_allowance(kernel: Any) -> float:
    """Seconds a check of ``kernel`` may spend tuning a new shape: ``SECONDS_PER_CONFIG`` per config
    of each autotuner it reaches (0 for a kernel that does not autotune), so a first meeting with a
    shape is not mistaken for a hang."""
    declared = getattr(kernel, "declared_tuning", None)
    if declared is not None:
        return float(declared[1])
    fn = getattr(kernel, "fn", None)
    if fn is None:
        return 0.0
    return sum(SECONDS_PER_CONFIG * max(1, len(getattr(t, "configs", None) or ())) for t in autotuners(fn))


def enable_result_cache(environ: Any) -> None:
    """Turn Triton's autotuning result cache on in ``environ`` (a process's ``os.environ``)
    unless the user set it: Triton reads it when ``@triton.autotune`` runs, at import."""
    environ.setdefault(CACHE_ENV, "1")


__all__ = ["CACHE_ENV", "is_autotuner", "autotuners", "autotunes", "describe_best", "tuning_allowance",
           "enable_result_cache"]
