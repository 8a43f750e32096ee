"""Device discovery: what GPU (if any) this process can use.

CuPy is imported here lazily, on the first probe, never when the plugin loads.
With no usable GPU, probe() returns the reason instead of a device; GPU tests
are skipped with that reason.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class GemmDevice:
    index: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    shared_mem_per_block: int
    shared_mem_per_block_optin: int
    shared_mem_per_sm: int
    registers_per_sm: int
    registers_per_block: int
    max_threads_per_sm: int
    l2_bytes: int
    clock_mhz: float
    memory_clock_mhz: float
    memory_bus_width: int
    total_memory: int
    warnings: tuple[str, ...] = ()  # what could not be read, and what that costs

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def supports(self, min_cc: tuple[int, int]) -> bool:
        return tuple(self.compute_capability) >= tuple(min_cc)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["arch"] = self.arch
        return d


# cudaDeviceAttr ids: CUDA 13's cudaDeviceProp dropped the clock fields.
_ATTR_CLOCK_RATE = 13
_ATTR_MEMORY_CLOCK_RATE = 36
_ATTR_MEMORY_BUS_WIDTH = 37


_ATTR_NAMES = {_ATTR_CLOCK_RATE: "SM clock rate", _ATTR_MEMORY_CLOCK_RATE: "memory clock rate",
               _ATTR_MEMORY_BUS_WIDTH: "memory bus width"}


def _attribute(runtime: Any, attr: int, index: int, unread: list[str]) -> int:
    """The attribute, or 0 with the reason added to ``unread`` (reported, never silent: without
    the clocks the theoretical peaks are unknown and only the measured roofs judge a timing)."""
    try:
        value = int(runtime.deviceGetAttribute(attr, index))
    except Exception as exc:  # noqa: BLE001
        unread.append(f"the {_ATTR_NAMES[attr]} could not be read ({type(exc).__name__}: {exc})")
        return 0
    if value <= 0:
        unread.append(f"the driver reports a {_ATTR_NAMES[attr]} of {value}")
    return value


def describe(index: int = 0) -> GemmDevice:
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    runtime = cupy.cuda.runtime
    props = runtime.getDeviceProperties(index)
    name = props.get("name", b"")
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    unread: list[str] = []
    clock = props.get("clockRate") or _attribute(runtime, _ATTR_CLOCK_RATE, index, unread)
    mem_clock = props.get("memoryClockRate") or _attribute(runtime, _ATTR_MEMORY_CLOCK_RATE, index, unread)
    bus = props.get("memoryBusWidth") or _attribute(runtime, _ATTR_MEMORY_BUS_WIDTH, index, unread)
    return GemmDevice(
        index=index,
        name=name,
        compute_capability=(int(props["major"]), int(props["minor"])),
        sm_count=int(props["multiProcessorCount"]),
        shared_mem_per_block=int(props["sharedMemPerBlock"]),
        shared_mem_per_block_optin=int(props.get("sharedMemPerBlockOptin", props["sharedMemPerBlock"])),
        shared_mem_per_sm=int(props.get("sharedMemPerMultiprocessor", 0)),
        registers_per_sm=int(props.get("regsPerMultiprocessor", 0)),
        registers_per_block=int(props.get("regsPerBlock", 0)),
        max_threads_per_sm=int(props.get("maxThreadsPerMultiProcessor", 0)),
        l2_bytes=int(props.get("l2CacheSize", 0)),
        clock_mhz=clock / 1000.0,
        memory_clock_mhz=mem_clock / 1000.0,
        memory_bus_width=int(bus),
        total_memory=int(props.get("totalGlobalMem", 0)),
        warnings=tuple(w + ": the theoretical peaks that need it are unknown, so only the roofs measured in "
                       "this process judge whether a timing is possible" for w in unread),
    )


@lru_cache(maxsize=1)
def probe() -> GemmDevice | str:
    """The device to use, or a string saying why there is none ("no usable GPU: ...")."""
    try:
        import cupy  # lazy: CuPy (the plugin loads with no GPU)
    except ImportError:
        return ("no usable GPU: CuPy is not installed; install pytest-gemm[cuda12] or "
                "pytest-gemm[cuda13] to match your driver")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, wrong driver, no device
        from .driver import no_gpu_reason  # lazy: keeps kernels.driver out of the plugin's load

        return f"no usable GPU: {no_gpu_reason(exc, cupy)}"
    if count < 1:
        return "no usable GPU: CUDA reports no device"
    try:
        index = cupy.cuda.runtime.getDevice()
        return describe(index)
    except Exception as exc:
        return f"no usable GPU: {type(exc).__name__}: {exc}"


def require_device() -> GemmDevice:
    """The device, or pytest.skip with the reason (for GPU fixtures and tests)."""
    import pytest  # lazy: pytest stays out of the sandbox child

    found = probe()
    if isinstance(found, str):
        pytest.skip(found)
    return found
