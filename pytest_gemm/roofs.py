"""Peak arithmetic rates a timing is checked against (a result above the roof is impossible).

These are the hardware's theoretical peaks from the SM count and clock; a
measured time faster than them means work escaped the timed region.
"""
from __future__ import annotations

from typing import Any

# FP32 FMA lanes per SM by major compute capability (sm_75: 64; sm_80: 64; sm_86/89: 128; sm_90: 128).
_FP32_LANES = {(7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128}
# Dense fp16/bf16 tensor FLOP per SM per clock (fp32 accumulate).
_TENSOR_FLOP = {(7, 5): 512, (8, 0): 1024, (8, 6): 512, (8, 9): 512, (9, 0): 4096}


def fp32_peak_tflops(device: Any) -> float:
    lanes = _FP32_LANES.get(tuple(device.compute_capability), 128)
    return device.sm_count * lanes * 2 * device.clock_mhz * 1e6 / 1e12


def tensor_peak_tflops(device: Any) -> float:
    per_sm = _TENSOR_FLOP.get(tuple(device.compute_capability), 4096)
    return device.sm_count * per_sm * device.clock_mhz * 1e6 / 1e12


def roof_tflops(device: Any, precision: str) -> float:
    """The roof a kernel of this precision is measured against (0 when the clock is unknown)."""
    if not getattr(device, "clock_mhz", 0):
        return 0.0
    if precision == "fp32":
        return fp32_peak_tflops(device)
    if precision == "tf32":
        return tensor_peak_tflops(device) / 2
    return tensor_peak_tflops(device)
