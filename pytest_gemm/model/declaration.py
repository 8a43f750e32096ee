"""Keyword arguments of a declaration: an unknown one (``tiles=`` for ``tile=``) is an error
naming the nearest valid one, not Python's bare ``TypeError``. Pure Python."""
from __future__ import annotations

import difflib
import inspect
from typing import Any, Sequence


def check_keywords(what: str, given: dict[str, Any], valid: Sequence[str], error: type[Exception]) -> None:
    """Raise ``error`` for the first of ``given`` (unknown keywords), naming the nearest of ``valid``."""
    for key in given:
        near = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        hint = f"did you mean {near[0]}=?" if near else f"valid keywords: {', '.join(valid)}"
        raise error(f"{what}: unknown keyword argument {key}=; {hint}")


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
