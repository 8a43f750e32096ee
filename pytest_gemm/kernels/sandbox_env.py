"""What of the grader's environment a confined submission sees (docs/security.md).

A grader's environment may hold what no student should read: a Gradescope or CI token, cloud
credentials, a course's paths. A confined process (``kernels/confine.py``) therefore gets only
the variables that running Python and CUDA code needs: the paths that find programs and
libraries, locale and time zone, the user's name (``getpass.getuser()``: torch and Triton name
cache folders by it, and the sandbox has no ``/etc/passwd``), the settings of the GPU libraries
a launcher may use (CUDA, NVIDIA, CuPy, Numba, Triton, torch, PyCUDA, JAX, CUTLASS) and
pytest's and pytest-gemm's own.
A course adds names (or ``fnmatch`` patterns) of its own in ``PYTEST_GEMM_SANDBOX_ENV``,
separated by spaces or commas. Unconfined processes keep the whole environment, as before.
"""
from __future__ import annotations

import fnmatch
import os
import re
from typing import Mapping

EXTRA_ENV = "PYTEST_GEMM_SANDBOX_ENV"
PASSED_NAMES = frozenset({
    "PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME",
    "USERNAME", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
    "PYTHONIOENCODING", "PYTHONWARNINGS", "PYTHONNOUSERSITE", "PYTHONUTF8", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
})
PASSED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "NV_", "CUPY_", "NUMBA_", "TRITON_", "TORCH_", "PYTORCH_", "PYCUDA_",
                   "JAX_", "XLA_", "CUTLASS_", "CUBLAS_", "CUBLASLT_", "NVRTC_", "PYTEST_")
# A name of a passed family that still reads like a credential (NVIDIA_API_KEY, TORCH_HUB_TOKEN)
# is withheld too, unless a course names it in PYTEST_GEMM_SANDBOX_ENV.
SECRET_WORDS = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE|AUTH")


def extra_patterns(env: Mapping[str, str]) -> list[str]:
    """The names and patterns a course passes as well (``PYTEST_GEMM_SANDBOX_ENV``)."""
    return [p for p in re.split(r"[\s,]+", env.get(EXTRA_ENV, "")) if p]


def passed(name: str, extra: list[str]) -> bool:
    """Whether a confined process sees the variable ``name``."""
    if any(fnmatch.fnmatchcase(name, p) for p in extra):
        return True
    return (name in PASSED_NAMES or name.startswith(PASSED_PREFIXES)) and not SECRET_WORDS.search(name)


def sandbox_environ(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (this process's environment when None) with only what a confined process sees."""
    env = os.environ if env is None else env
    extra = extra_patterns(env)
    return {k: v for k, v in env.items() if passed(k, extra)}


def environ_for(env: Mapping[str, str], level: str) -> dict[str, str]:
    """The environment of a process that runs submitted code under the confinement ``level``
    (``confine.active()``): ``env`` whole when ``none``, else only what it may see."""
    return dict(env) if level == "none" else sandbox_environ(env)
