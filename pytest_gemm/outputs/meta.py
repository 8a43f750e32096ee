"""What a run was: the report's ``meta`` block and its one-line short form.

Versions (pytest-gemm, CuPy, the CUDA runtime, the driver and the CUDA version it supports,
NVRTC), the GPU's name, its SM and memory clocks at the start and end of the timed checks (the
speed checks read them: ``measure/clocks.py``), the command line and the git commit of each
folder the kernels came from. With no GPU, no CuPy or no git, the facts that need them are null,
never an error. ``--gemm-compare`` (``compare.py``) reads two such blocks to say whether two runs'
setups differ; the terminal header and JUnit show the short form.
"""
from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from .records import CheckRecord
from importlib.metadata import PackageNotFoundError, version
from ..kernels.compiler import nvrtc_version
from ..measure.clocks import driver_version
import inspect

VERSION_KEYS = ("pytest_gemm", "cupy", "cuda_runtime", "driver", "driver_cuda", "nvrtc")
GIT_TIMEOUT_S = 10


def _cuda_version(number: int) -> str | None:
    """12080 -> "12.8"; 0 (no driver) -> None."""
    return f"{number // 1000}.{number % 1000 // 10}" if number > 0 else None


@lru_cache(maxsize=2)
def versions(probe: bool = True) -> dict[str, str | None]:
    """The versions this process sees; each None when it cannot be read. Without ``probe`` only
    what the installed packages' metadata says (no CuPy import, no NVRTC, no driver): the
    report a run hands its hook when it writes no file (a grader's run of each student)."""
    found: dict[str, str | None] = dict.fromkeys(VERSION_KEYS)
    for key, dists in (("pytest_gemm", ("pytest-gemm",)), ("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy"))):
        for dist in dists:
            try:
                found[key] = version(dist)
                break
            except PackageNotFoundError:
                pass
    if not probe:
        return found
    try:
        import cupy  # lazy: CuPy (the plugin loads with no GPU)

        found["cupy"] = str(cupy.__version__)
        found["cuda_runtime"] = _cuda_version(int(cupy.cuda.runtime.runtimeGetVersion()))
        found["driver_cuda"] = _cuda_version(int(cupy.cuda.runtime.driverGetVersion()))
    except Exception:  # noqa: BLE001 - no CuPy, or no driver: null
        pass
    try:
        found["nvrtc"] = "%d.%d" % nvrtc_version()
    except Exception:  # noqa: BLE001 - no NVRTC here
        pass

    found["driver"] = driver_version()
    return found


def gpu_name() -> str | None:
    """This process's GPU, or None (the device probe's reason is the skip reasons' business)."""
    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    found = probe()
    return None if isinstance(found, str) else found.name


@lru_cache(maxsize=32)
def git_state(folder: str) -> dict[str, Any]:
    """``{"dir", "commit", "dirty"}`` of the git checkout holding ``folder`` (commit and dirty
    null when it is not one, or git is missing)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    commit = git("rev-parse", "HEAD") if top else None
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"dir": top or folder, "commit": commit, "dirty": None if status is None else bool(status)}


def kernel_folders(kernels: Iterable[Any]) -> list[str]:
    """The folders the kernels were declared in, in order, each once."""
    folders: list[str] = []
    for k in kernels:
        origin = getattr(k, "origin", None)
        if origin is None and callable(getattr(k, "fn", None)):
            try:
                origin = Path(inspect.getsourcefile(k.fn) or "").parent
            except (TypeError, OSError):
                origin = None
        if origin is not None and str(origin) not in folders:
            folders.append(str(origin))
    return folders


def clock_span(records: Iterable[CheckRecord]) -> dict[str, Any]:
    """The clocks at the start of the first timed check and at the end of the last."""
    spans = [r.facts["clocks"] for r in records if isinstance(r.facts.get("clocks"), dict)]
    return {"start": spans[0].get("start") if spans else None, "end": spans[-1].get("end") if spans else None}


def build_meta(command: str | None, cwd: str | None, folders: Iterable[str], gpu: str | None,
               records: Iterable[CheckRecord] = (), probe: bool = True) -> dict[str, Any]:
    """The report's ``meta`` block (docs/report-schema.md); ``probe``: see ``versions``."""
    commits: list[dict[str, Any]] = []
    for folder in folders:
        state = git_state(folder)
        if state not in commits:
            commits.append(state)
    return dict(versions(probe), gpu=gpu, clocks=clock_span(records), command=command, cwd=cwd, kernels=commits)


def short_form(meta: dict[str, Any] | None) -> str:
    """One line: ``pytest-gemm 0.1.0, CuPy 14.0.1, CUDA runtime 13.0, NVRTC 13.0, driver 580.65
    (CUDA 13.0), GPU NVIDIA H200, kernels at 1a2b3c4 (modified)``."""
    if not meta:
        return "pytest-gemm: no meta block"
    def v(key: str) -> str:
        return str(meta.get(key) or "?")

    driver = f"driver {v('driver')}" + (f" (CUDA {meta['driver_cuda']})" if meta.get("driver_cuda") else "")
    if not meta.get("driver") and not meta.get("gpu"):
        driver = "no driver"  # not "driver ?": nothing unknown about a machine with no GPU
    parts = [f"pytest-gemm {v('pytest_gemm')}", f"CuPy {v('cupy')}", f"CUDA runtime {v('cuda_runtime')}",
             f"NVRTC {v('nvrtc')}", driver, f"GPU {meta.get('gpu') or 'none'}"]
    commits = [c["commit"][:7] + (" (modified)" if c.get("dirty") else "")
               for c in meta.get("kernels") or () if c.get("commit")]
    if commits:
        parts.append("kernels at " + ", ".join(commits))
    clocks = meta.get("clocks") or {}
    if clocks.get("start") and clocks.get("end"):
        s, e = clocks["start"], clocks["end"]
        parts.append(f"clocks SM {s['sm_mhz']}->{e['sm_mhz']} MHz, memory {s['memory_mhz']}->{e['memory_mhz']} MHz")
    return ", ".join(parts)
