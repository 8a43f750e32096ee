"""The parts of a kernel declaration checked on their own (``model/contract.py`` uses them):
keyword arguments (an unknown one, ``tiles=`` for ``tile=``, is an error naming the nearest
valid one, not Python's bare ``TypeError``), declared ``arches``, and whether a ``grid``
callable takes the device. Pure Python."""
from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable, Sequence

from . import arches as _arches


def check_keywords(what: str, given: dict[str, Any], valid: Sequence[str], error: type[Exception]) -> None:
    """Raise ``error`` for the first of ``given`` (unknown keywords), naming the nearest of ``valid``."""
    for key in given:
        near = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        hint = f"did you mean {near[0]}=?" if near else f"valid keywords: {', '.join(valid)}"
        failure = error(f"{what}: unknown keyword argument {key}=; {hint}")
        failure.keyword = key  # type: ignore[attr-defined]  # its line, for the loader: loader._where
        raise failure


def strict_init(cls: type, error: type[Exception]) -> None:
    """Wrap a dataclass's generated ``__init__`` so that an unknown keyword raises ``error``
    through :func:`check_keywords`. The wrapper is one more frame between the declaring module
    and the dataclass's field factories (``CudaKernel.origin`` counts it)."""
    generated = cls.__init__  # type: ignore[misc]
    valid = tuple(name for name in inspect.signature(generated).parameters if name != "self")

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        check_keywords(cls.__name__, {k: v for k, v in kwargs.items() if k not in valid}, valid, error)
        generated(self, *args, **kwargs)

    __init__.__doc__, __init__.__wrapped__ = generated.__doc__, generated  # type: ignore[attr-defined]
    cls.__init__ = __init__  # type: ignore[misc]


class EmptyGridError(ValueError):
    """A declared grid has a zero dimension at some shape: nothing would be launched."""


class GemmSpecError(ValueError):
    """A kernel declaration or a ``--gemm-kernel`` spec is wrong; the message says how to fix it."""


def grid_takes_device(fn: Callable[..., Any]) -> bool:
    """Whether a ``grid`` callable wants the device as a fourth argument: it has a parameter
    named ``device``, or four positional parameters without defaults. Three (``m, n, k``), the
    original form, and anything whose signature cannot be read, get (m, n, k) only."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.name == "device" and p.kind is not p.VAR_KEYWORD for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len([p for p in positional if p.default is p.empty]) >= 4


def check_arches(label: str, declared: Any) -> tuple[str, ...]:
    """Declared ``arches`` in canonical spelling; a malformed or impossible one is a GemmSpecError."""
    if isinstance(declared, str):
        declared = (declared,)
    out = []
    for item in declared:
        try:
            major, minor, specific = _arches.parse_arch(item)
        except ValueError:
            major = minor = -1
            specific = False
        number = major * 10 + minor
        if major < 0 or number < _arches.MIN_ARCH or (specific and number < _arches.MIN_ARCH_SPECIFIC):
            raise GemmSpecError(
                f"{label}: arches: {item!r} is not a target a kernel can claim; write sm_<major><minor> from "
                f"sm_{_arches.MIN_ARCH} up (e.g. sm_80, sm_120), or an arch-specific target from "
                f"sm_{_arches.MIN_ARCH_SPECIFIC}a up (e.g. sm_90a); targets this machine's NVRTC supports: "
                f"{', '.join(_arches.installed_arches())}")
        out.append(_arches.arch_name(major, minor, specific))
    if not out:
        raise GemmSpecError(f"{label}: arches=() claims nothing; leave arches out to claim every target "
                            f"at or above min_cc, or list them, e.g. arches=(\"sm_80\", \"sm_90\")")
    return tuple(out)
