"""The four precisions a kernel may declare, and how their inputs are stored.

fp32: float32 in, float32 arithmetic, float32 out.
tf32: float32 in and out; the kernel may round A and B to TF32 (10 explicit
      mantissa bits) before multiplying, and accumulates in float32.
fp16, bf16: half-precision inputs, float32 accumulate and output. bf16 has no
      numpy dtype, so it is stored as uint16 bit patterns (the top half of a
      float32).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where it is used: loading the plugin stays light
    import numpy as np


@dataclass(frozen=True)
class Precision:
    name: str
    storage_dtype: str       # numpy dtype of A and B as handed to the kernel
    input_bits: int          # significand bits (with the implicit one) the products see
    inputs_rounded_inside: bool  # tf32: the kernel itself rounds float32 inputs
    max_exact_int: int       # largest integer every input value may take and stay exact
    accumulator_bits: int = 24   # float32 accumulate for all four

    @property
    def input_unit_roundoff(self) -> float:
        return 2.0 ** -self.input_bits

    @property
    def unit_roundoff(self) -> float:
        """Unit roundoff of the float32 accumulator, 2**-24."""
        return 2.0 ** -self.accumulator_bits


# An accuracy failure just over the fp32 bound (up to NEAR_BOUND times it, judges/bounds.py) may be a
# truncating float32 accumulator's errors instead of a lower precision's: tensor cores computing an
# fp32 emulation (3xTF32, numpy model: 25.6 against 24 at K = 16, Student-t, seed 5); TF32 inputs
# give 150x the bound at K = 16 but only 1.5x at K = 4096. Here, with no numpy, because the
# verdict's rule 11b (outputs/verdicts.py) reads it too, in the process that writes the report.
NEAR_BOUND = 2.0


PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", "float32", 24, False, 2 ** 24),
    "tf32": Precision("tf32", "float32", 11, True, 2 ** 11),
    "fp16": Precision("fp16", "float16", 11, False, 2 ** 11),
    "bf16": Precision("bf16", "uint16", 8, False, 2 ** 8),
}


def get_precision(name: str | Precision) -> Precision:
    if isinstance(name, Precision):
        return name
    try:
        return PRECISIONS[name]
    except KeyError:
        raise ValueError(f"unknown precision {name!r}; valid precisions are {', '.join(PRECISIONS)}") from None


def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even); return the uint16 bit patterns."""
    import numpy as np  # lazy: numpy stays out of the plugin's load

    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_float32(bits: Any, xp: Any = None) -> Any:
    """bf16 bit patterns (uint16) as the float32 values they stand for (numpy, or ``xp``)."""
    import numpy as np  # lazy: numpy stays out of the plugin's load

    xp = np if xp is None else xp
    return (xp.asarray(bits, dtype=xp.uint16).astype(xp.uint32) << 16).view(xp.float32)


def to_storage(values: np.ndarray, precision: str | Precision) -> np.ndarray:
    """Values (float64, or integers the precision holds exactly) -> the array a kernel of this
    precision receives (C-contiguous)."""
    import numpy as np  # lazy: numpy stays out of the plugin's load

    p = get_precision(precision)
    if p.name == "bf16":
        return float32_to_bf16_bits(values.astype(np.float32))
    return np.ascontiguousarray(values, dtype=p.storage_dtype)


def from_storage(stored: Any, precision: str | Precision, xp: Any = None) -> Any:
    """The exact float64 values a stored input array represents (numpy, or ``xp``: CuPy keeps
    them on the GPU)."""
    import numpy as np  # lazy: numpy stays out of the plugin's load

    xp = np if xp is None else xp
    p = get_precision(precision)
    if p.name == "bf16":
        return bf16_bits_to_float32(stored, xp).astype(xp.float64)
    return xp.asarray(stored).astype(xp.float64)


def negate_storage(stored: Any) -> Any:
    """The stored inputs negated, as the kernel receives them (numpy or CuPy): the sign bit flipped,
    since bf16 is stored as uint16 bit patterns, where unary minus is an integer's two's complement
    (cuBLAS's bf16 was failed "stale" on the H100 at 23a8dd2 by ``-a``). Exact for every precision."""
    import numpy as np  # lazy: numpy stays out of the plugin's load

    bits = np.dtype({2: np.uint16, 4: np.uint32, 8: np.uint64}[stored.dtype.itemsize])
    sign = bits.type(1 << (8 * bits.itemsize - 1))  # a scalar of the same width: the result keeps it
    return (stored.view(bits) ^ sign).view(stored.dtype)


def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """Round float32 values to TF32 (nearest): used to model a TF32 kernel on the CPU."""
    import numpy as np  # lazy: numpy stays out of the plugin's load

    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) >> 13) << 13
    return rounded.astype(np.uint32).view(np.float32)
