"""Load a compiled cubin as a CuPy kernel and leave no file behind.

CuPy's ``RawModule`` takes a cubin as a file (``RawModule(path=...)``). ``get_function`` loads the
module on the current device at once and CuPy keeps it, keyed by the path, so the file is removed
as soon as the function is got: a folder per load, left in ``TMPDIR``, piled up in a grader's (the
launch guard's and the FMA roof's were there after a class). The name is new for every load: a
path seen before would hand back CuPy's cached module, and ``LoadedKernel.fresh`` needs a new one
(its ``__device__`` variables reset).
"""
from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any


def load_cubin_function(code: bytes, lowered_name: str) -> Any:
    """The CuPy ``RawKernel`` ``lowered_name`` of the cubin ``code``, loaded on the current device.

    It is called on the device current here: CuPy would read the (removed) file again to load
    the module on another device."""
    import cupy  # lazy: CuPy (the plugin loads with no GPU)

    folder = tempfile.mkdtemp(prefix="gemm-")
    try:
        path = Path(folder) / f"{uuid.uuid4().hex}.cubin"
        path.write_bytes(code)
        return cupy.RawModule(path=str(path)).get_function(lowered_name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
