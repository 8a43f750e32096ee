"""Measurements several processes of one run may share: the roofs of a GPU and cuBLAS's timing
at a shape. Off unless ``PYTEST_GEMM_MEASURE_CACHE`` names a folder.

A gradebook grading a class sets it to a folder of its own for the run
(``grading/classrun.py``): every student's speed check then times the student's kernel
and reads the roofs and cuBLAS measured once per GPU by the first student, instead of
measuring them again under the GPU-wide lock (seconds per student, the bound of a class's
wall time). A run's cache lives as long as the run; nothing is shared between runs.

Entries are JSON files keyed by the GPU (the lock's key, the device's index and name) and
what was measured; they are read and written inside the exclusive GPU lock, so one process
measures and the others read. A file that cannot be read is measured again. A process that may
not write the folder (a confined kernel's: it is bound read-only, ``measure/trusted_measures.py``
says why) keeps what it measured to itself.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable
from .gpu_lock import gpu_key

CACHE_ENV = "PYTEST_GEMM_MEASURE_CACHE"


def cache_dir(env: dict[str, str] | None = None) -> Path | None:
    """The run's folder, or None when measurements are not shared."""
    value = (os.environ if env is None else env).get(CACHE_ENV, "").strip()
    return Path(value) if value else None


def entry_name(device: Any, what: str, gpu: str) -> str:
    """A file name for ``what`` measured on ``device`` (``gpu``: the lock's key for it)."""
    raw = f"{gpu}-{getattr(device, 'index', 0)}-{getattr(device, 'name', '')}-{what}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw) + ".json"


def shared(device: Any, what: str, measure: Callable[[], dict[str, Any]],
           directory: Path | None = None, gpu: str | None = None) -> dict[str, Any]:
    """``measure()``'s result, from the run's cache when another process stored it (then it is
    also returned with ``"shared": True``), else measured here and stored. Without a cache
    folder, simply ``measure()``."""
    path = _entry_path(device, what, directory, gpu)
    if path is None:
        return measure()
    folder = path.parent
    try:
        return dict(json.loads(path.read_text()), shared=True)
    except (OSError, ValueError):
        pass
    value = measure()
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(value))
        os.replace(tmp, path)  # readers see the whole file or none
    except OSError:  # read-only to this process (a confined kernel's): measured for itself alone
        pass
    return value


def stored(device: Any, what: str, directory: Path | None = None, gpu: str | None = None) -> bool:
    """Whether the run's cache holds ``what`` for ``device`` (False without a cache folder)."""
    path = _entry_path(device, what, directory, gpu)
    return path is not None and path.is_file()


def _entry_path(device: Any, what: str, directory: Path | None, gpu: str | None) -> Path | None:
    """Where the run's cache keeps ``what`` for ``device``; None without a cache folder."""
    folder = directory if directory is not None else cache_dir()
    if folder is None:
        return None
    return folder / entry_name(device, what, gpu if gpu is not None else gpu_key())
