"""The kernel's child process confined (``kernels/confine.py``): its command and Popen arguments."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..kernels import confine
from ..kernels.declared import spec_folder
from ..measure.shared_files import shared_files, shared_readable


def confines(spec: str) -> bool:
    """Whether the kernel ``spec``'s process runs confined: under the run's confinement, unless it
    is the shipped ladder (``gemm:``), which is ours."""
    return confine.active() != "none" and not spec.startswith("gemm:")


def confined_command(cmd: list[str], spec: str, rootdir: str, env: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """The child's command and Popen arguments under the run's confinement (``kernels/confine.py``)."""
    if not confines(spec):
        return cmd, {}
    folder = spec_folder(spec, Path(rootdir))
    return (confine.command(cmd, readable=[folder, *shared_readable(env)], chdir=folder, files=shared_files(env),
                            caches=confine.compile_caches(spec)), confine.popen_kwargs())
