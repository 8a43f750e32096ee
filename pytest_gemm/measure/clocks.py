"""The GPU's clocks now, and its driver's version, for the report's ``meta`` block.

Read through NVML with NVIDIA's own binding (``nvidia-ml-py``, imported as ``pynvml``; in the
``cuda12``/``cuda13`` extras), else ``nvidia-smi``; ``None`` when neither answers (no GPU, no
driver), never an error: a run is not failed for a fact it could not read. The device is found
by its PCI bus id, so a worker pinned with ``CUDA_VISIBLE_DEVICES`` reads its own GPU's clocks.
The speed check reads the clocks just before and just after its timed calls.
"""
from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from typing import Any

NVIDIA_SMI_TIMEOUT_S = 10


@lru_cache(maxsize=1)
def _nvml() -> Any:
    """The initialised ``pynvml`` module, or None."""
    try:
        import pynvml  # lazy: optional (pynvml)

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - not installed, no driver, no library: the fact is null
        return None


def open_clock_reader() -> None:
    """Start NVML now (its first call took 64 ms on the H100 at 2567d34), so that the clocks read
    while a timed check holds the GPU alone cost only the reads."""
    _nvml()


def pci_bus_id(index: int) -> str | None:
    """The PCI bus id of CUDA device ``index`` in this process, or None."""
    try:
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        return str(cupy.cuda.runtime.deviceGetPCIBusId(index))
    except Exception:  # noqa: BLE001
        return None


def _smi(query: str, bus_id: str | None) -> list[str] | None:
    if not shutil.which("nvidia-smi"):
        return None
    args = ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"]
    if bus_id:
        args += ["-i", bus_id]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return None
    return [v.strip() for v in lines[0].split(",")]


def read_clocks(device: Any) -> dict[str, int] | None:
    """``{"sm_mhz": .., "memory_mhz": ..}`` of ``device`` (a ``GemmDevice``) now, or None."""
    index = getattr(device, "index", None)
    if not isinstance(index, int):
        return None
    bus = pci_bus_id(index)
    nvml = _nvml()
    if nvml is not None and bus:
        try:
            handle = nvml.nvmlDeviceGetHandleByPciBusId(bus)
            return {"sm_mhz": int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                    "memory_mhz": int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM))}
        except Exception:  # noqa: BLE001 - try nvidia-smi
            pass
    values = _smi("clocks.sm,clocks.mem", bus)
    try:
        return {"sm_mhz": int(float(values[0])), "memory_mhz": int(float(values[1]))} if values else None
    except (ValueError, IndexError):
        return None


@lru_cache(maxsize=1)
def driver_version() -> str | None:
    """The NVIDIA driver's version (e.g. ``570.124.06``), or None."""
    nvml = _nvml()
    if nvml is not None:
        try:
            version = nvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        except Exception:  # noqa: BLE001
            pass
    values = _smi("driver_version", None)
    return values[0] if values else None
