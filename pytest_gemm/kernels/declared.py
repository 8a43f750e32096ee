"""Declarations as data: what the judging process knows of a kernel without running its code.

A submission's module is Python: importing it runs whatever it holds. Under confinement
(``--gemm-confine``, the gradebook, the Gradescope path) the pytest process that judges and
writes results never imports it. A child process, confined (``kernels/confine.py``), imports
the module, and sends back, per kernel, either its declaration as JSON (``describe``) or the
one-line message saying what is wrong with it. The parent rebuilds each declaration
(``rebuild``) with stand-ins for the code it cannot carry (a ``@kernel`` function, a ``grid``
or ``shared_mem`` callable): those run only in the kernel's own (confined) process.

A kernel whose declaration is wrong is a :class:`BadDeclaration`: its tests fail with its
message and every other kernel of the run is tested (``load_spec(..., each=True)``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Sequence

from ..model.contract import CudaKernel, GemmKernel, PyKernel
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from ..model.declaration import GemmSpecError
from ..model.declaration import grid_takes_device
from ..model.precision import PRECISIONS
from .autotune import autotunes, tuning_allowance
from .submitted_source import include_problem, option_problem
from . import confine
from .sandbox_env import environ_for

DECLARE_TIMEOUT = 120.0  # seconds to start the child and import the submission's modules


@dataclass(eq=False)
class BadDeclaration:
    """A kernel whose declaration is wrong: never run, its tests fail with ``message``."""

    name: str
    message: str
    origin_spec: tuple[str, int] = ("", 0)
    precision: str | None = None  # the declared one where it is a known precision (``declared_precision``)
    min_cc: tuple[int, int] = (7, 0)
    multiple_of: tuple[int, int, int] = (1, 1, 1)
    deterministic: bool = True
    takes_alpha_beta: bool = False
    beta_zero: str = "blas"
    arches: Any = None
    builds: tuple[Any, ...] = field(default_factory=tuple)
    category: str = cat.LAUNCH_ERROR
    why_not_run: str = "its declaration is wrong"


def is_bad(kernel: Any) -> bool:
    return isinstance(kernel, BadDeclaration)


def declared_precision(value: Any) -> str | None:
    """What a wrong declaration's report says of its precision: the declared one where it is one of
    ours (``precision="bf16"`` on ``__half*`` pointers is a bf16 kernel wrongly declared), else None
    (unknown), never a default that the kernel did not declare."""
    return value if isinstance(value, str) and value in PRECISIONS else None


def uncompilable(kernel: GemmKernel, message: str) -> BadDeclaration:
    """A CUDA kernel that compiles for none of the architectures it claims (a wrong ``entry=``,
    a syntax error): never run, its tests fail with the compiler's message, the others run."""
    return BadDeclaration(str(kernel.name), message, getattr(kernel, "origin_spec", ("", 0)),
                          precision=declared_precision(getattr(kernel, "precision", None)), category=cat.COMPILE_ERROR,
                          why_not_run="it compiles for none of the architectures it claims")


def refuse(kernel: BadDeclaration) -> NoReturn:
    """Fail the test of a kernel whose declaration is wrong, with its one-line message."""
    raise GemmCheckFailure(kernel.category, kernel.message,
                           [f"the kernel was not run: {kernel.why_not_run} (the other kernels are tested)"])


# ---- the child's side: a kernel as data -------------------------------------------------------

def _cuda(k: CudaKernel) -> dict[str, Any]:
    text, file = k.source_text()
    return {"source": text, "source_file": file, "entry": k.entry, "block": list(k.block), "tile": None if k.tile is None else list(k.tile),
            "grid": None if k.grid is None else {"device": _takes_device(k.grid)},
            "shared_mem": None if callable(k.shared_mem) else int(k.shared_mem), "signature": k.signature,
            "precision": k.precision, "min_cc": list(k.min_cc), "multiple_of": list(k.multiple_of),
            "options": list(k.options), "name": str(k.name), "deterministic": bool(k.deterministic),
            "arches": None if k.arches is None else list(k.arches), "beta_zero": k.beta_zero, "origin": str(k.origin)}


def _takes_device(grid: Any) -> bool:

    try:
        return bool(grid_takes_device(grid))
    except Exception:  # noqa: BLE001 - an odd callable: the kernel's own process finds out
        return False


def describe(kernel: Any) -> dict[str, Any]:
    """One kernel as JSON-able data (run where the submission was imported)."""
    origin = list(getattr(kernel, "origin_spec", ("", 0)))
    if is_bad(kernel):
        return {"kind": "bad", "name": kernel.name, "message": kernel.message, "origin_spec": origin,
                "precision": kernel.precision}
    if isinstance(kernel, CudaKernel):
        return dict(_cuda(kernel), kind="cuda", origin_spec=origin)

    return {"kind": "python", "name": str(kernel.name), "precision": kernel.precision, "min_cc": list(kernel.min_cc),
            "multiple_of": list(kernel.multiple_of), "deterministic": bool(kernel.deterministic),
            "beta_zero": kernel.beta_zero, "arches": None if kernel.arches is None else list(kernel.arches),
            "takes_alpha_beta": bool(kernel.takes_alpha_beta), "builds": [_cuda(b) for b in kernel.builds],
            "autotunes": bool(autotunes(kernel)), "tuning_allowance": float(tuning_allowance(kernel)),
            "origin_spec": origin}


# ---- the parent's side: data back into a kernel -----------------------------------------------

def _elsewhere(*_: Any, **__: Any) -> Any:
    raise RuntimeError("this part of a submitted kernel runs only in the kernel's own (confined) process")


def _grid_stub(takes_device: bool) -> Any:
    if takes_device:
        return lambda m, n, k, device: _elsewhere()
    return lambda m, n, k: _elsewhere()


def _rebuild_cuda(d: dict[str, Any]) -> CudaKernel:
    grid = d.get("grid")
    return CudaKernel(source=str(d["source"]), entry=str(d["entry"]), block=tuple(d["block"]),
                      tile=None if d.get("tile") is None else tuple(d["tile"]),
                      grid=None if grid is None else _grid_stub(bool(grid.get("device"))),
                      shared_mem=_elsewhere if d.get("shared_mem") is None else int(d["shared_mem"]),
                      signature=str(d["signature"]), precision=str(d["precision"]), min_cc=tuple(d["min_cc"]),
                      multiple_of=tuple(d["multiple_of"]), options=tuple(d.get("options") or ()), name=str(d["name"]),
                      deterministic=bool(d.get("deterministic", True)),
                      arches=None if d.get("arches") is None else tuple(d["arches"]),
                      beta_zero=str(d.get("beta_zero", "blas")), origin=Path(str(d.get("origin") or ".")),
                      source_file=None if d.get("source_file") is None else str(d["source_file"]))


def _launcher_stub(takes_alpha_beta: bool) -> Any:
    if takes_alpha_beta:
        def launcher(a: Any, b: Any, c: Any, alpha: Any, beta: Any) -> Any:
            return _elsewhere()
    else:
        def launcher(a: Any, b: Any, c: Any) -> Any:  # type: ignore[misc]
            return _elsewhere()
    return launcher


def _compiled_here(kernel: CudaKernel, folder: Path) -> CudaKernel:
    """``kernel`` as the judging process may give it to NVRTC (kernels/submitted_source.py): CUDA C
    that arrived as text, options that touch no file, includes resolved in ``folder`` only."""
    if kernel.source_path() is not None:
        raise GemmSpecError("its source arrived as a file path, not as CUDA C text")
    problem = option_problem(kernel.options) or include_problem(kernel.source, folder)
    if problem:
        raise GemmSpecError(problem)
    return dataclasses.replace(kernel, options=(*kernel.options, "--no-source-include", f"-I{folder}"),
                               origin=folder)


def rebuild(d: dict[str, Any], folder: Path | None = None) -> GemmKernel | BadDeclaration:
    """A kernel from :func:`describe`'s data, validated again here; what does not make a valid
    declaration (the child is untrusted: its data may be anything) is a BadDeclaration. ``folder``:
    the submission's own folder, where its CUDA C's includes may resolve (the judging process
    compiles it: ``_compiled_here``)."""
    origin = tuple(d.get("origin_spec") or ("", 0))
    origin = (str(origin[0]), int(origin[1]))
    name = str(d.get("name") or "kernel")
    if d.get("kind") == "bad":
        return BadDeclaration(name, str(d.get("message") or "a wrong declaration"), origin,
                              declared_precision(d.get("precision")))
    try:
        here = (lambda k: k) if folder is None else (lambda k: _compiled_here(k, folder))
        if d.get("kind") == "cuda":
            kernel: Any = here(_rebuild_cuda(d))
        elif d.get("kind") == "python":
            kernel = PyKernel(_launcher_stub(bool(d.get("takes_alpha_beta"))), precision=str(d["precision"]),
                              min_cc=tuple(d["min_cc"]), multiple_of=tuple(d["multiple_of"]), name=name,
                              deterministic=bool(d.get("deterministic", True)), beta_zero=str(d.get("beta_zero", "blas")),
                              arches=None if d.get("arches") is None else tuple(d["arches"]),
                              builds=tuple(here(_rebuild_cuda(b)) for b in d.get("builds") or ()))
            kernel.declared_tuning = (bool(d.get("autotunes")), float(d.get("tuning_allowance") or 0.0))
        else:
            raise GemmSpecError(f"unknown kind of kernel {d.get('kind')!r}")
        kernel.validate()
    except (GemmSpecError, KeyError, TypeError, ValueError) as exc:
        return BadDeclaration(name, f"--gemm-kernel {origin[0]!r}: {exc}", origin,
                              declared_precision(d.get("precision")))
    kernel.origin_spec = origin
    return kernel


# ---- reading a spec in a confined child ---------------------------------------------------------

def spec_folder(spec: str, rootdir: Path) -> Path:
    """The folder a spec's code lives in: the file's folder for ``path/to/file.py:attr``, else
    ``rootdir`` (where a module is imported from)."""
    target = spec.rpartition(":")[0]
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target)
        return (path if path.is_absolute() else rootdir / path).resolve().parent
    return rootdir.resolve()


def absolute_spec(spec: str, rootdir: Path) -> str:
    """``spec`` with a relative file path made absolute (a confined child starts in the file's folder)."""
    target, _, attr = spec.rpartition(":")
    if (target.endswith(".py") or "/" in target or "\\" in target) and not Path(target).is_absolute():
        return f"{(rootdir / target).resolve()}:{attr}"
    return spec


def read_in_child(spec: str, rootdir: Path, timeout: float = DECLARE_TIMEOUT) -> list[GemmKernel | BadDeclaration]:
    """The kernels of ``spec``, read by a confined child and rebuilt here; a spec that cannot be
    read at all (no module, an import that fails) raises GemmSpecError with the child's message."""

    read_fd, write_fd = os.pipe()
    cmd = [sys.executable, "-m", "pytest_gemm.kernels.declare_child", str(write_fd), str(rootdir), absolute_spec(spec, rootdir)]
    folder = spec_folder(spec, rootdir)
    closed = confine.unreadable(folder)
    if closed is not None:
        os.close(read_fd)
        os.close(write_fd)
        raise GemmSpecError(f"--gemm-kernel {spec!r}: {closed}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([p for p in sys.path if p] + [os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryFile() as log:
        try:
            proc = subprocess.Popen(confine.command(cmd, readable=[folder], chdir=folder), pass_fds=(write_fd,),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=environ_for(env, confine.active()), cwd=str(folder), start_new_session=True,
                                    **confine.popen_kwargs())
        finally:
            os.close(write_fd)
        with os.fdopen(read_fd, "rb") as reader:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                confine.kill(proc)
                raise GemmSpecError(f"--gemm-kernel {spec!r}: importing it did not finish within {timeout:g} s") from None
            data = reader.read()
        log.seek(0)
        output = log.read().decode(errors="replace").strip()
    try:
        answer = json.loads(data)
    except ValueError:
        tail = " | ".join(output.splitlines()[-3:])[-400:]
        raise GemmSpecError(f"--gemm-kernel {spec!r}: reading its declarations failed: its process exited with "
                            f"status {proc.returncode} before answering" + (f"; its last output: {tail}" if tail else ""))
    if not isinstance(answer, dict):
        raise GemmSpecError(f"--gemm-kernel {spec!r}: its process answered something that is not a declaration")
    if answer.get("error"):
        raise GemmSpecError(str(answer["error"]))
    kernels = [rebuild(d, folder) if isinstance(d, dict) else
               BadDeclaration("kernel", f"--gemm-kernel {spec!r}: not a declaration")
               for d in answer.get("kernels") or []]
    for index, k in enumerate(kernels):
        k.origin_spec = (spec, index)  # the spec as given: how its sandbox process finds it again
    return kernels
