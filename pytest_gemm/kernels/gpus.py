"""How many GPUs this machine has, found without touching CUDA (for xdist).

pytest-xdist workers must be pinned to a GPU (CUDA_VISIBLE_DEVICES) before
anything in them initialises CUDA, so the count comes from the driver's /proc
entries or ``nvidia-smi -L``, never from the CUDA runtime.

Only a run that uses pytest-gemm calls these (``runner/configure.is_active``, or a
collected test with a gemm fixture or marker): an unrelated suite run under xdist keeps its
``CUDA_VISIBLE_DEVICES``, its ``-n auto`` and never runs ``nvidia-smi``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def visible_gpu_ids() -> list[str]:
    """The GPU ids workers may be pinned to: CUDA_VISIBLE_DEVICES if set, else all."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip()]
    proc = Path("/proc/driver/nvidia/gpus")
    if proc.is_dir():
        return [str(i) for i in range(len(list(proc.iterdir())))]
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]
    return []


def worker_index(worker_id: str) -> int:
    """``"gw3"`` -> 3."""
    digits = "".join(ch for ch in worker_id if ch.isdigit())
    return int(digits) if digits else 0


def pin_worker(worker_id: str) -> str | None:
    """Give this xdist worker its own GPU (round robin); returns the id chosen."""
    ids = visible_gpu_ids()
    if len(ids) < 2:
        return None
    chosen = ids[worker_index(worker_id) % len(ids)]
    os.environ["CUDA_VISIBLE_DEVICES"] = chosen
    return chosen
