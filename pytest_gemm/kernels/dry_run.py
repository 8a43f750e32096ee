"""A Python launcher exercised with no GPU: called with stand-in arrays, in a child process.

A launcher (``@kernel``) needs a GPU to do its work, but the Python around that work does not:
its imports, argument checks and shape arithmetic run first. Called with stand-ins (objects
with the real ``shape``, ``dtype``, ``ndim``, ``size``, ``strides`` and ``flags`` of A, B and
C, and nothing else: any use of their data raises :class:`NeedsGpu`), a launcher runs up to
its first use of the arrays or of a GPU library, and an exception raised before that by its
own code (a ``NameError``, an explicit ``raise``, a ``ZeroDivisionError``) is its own bug,
reported without a GPU. The call runs in a child process (``python -m
pytest_gemm.kernels.dry_run SPEC INDEX M N K``) with a time limit, as a launcher may hang or
end its process. :func:`classify` is pure and unit-tested.
"""
from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import sysconfig
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn
from ..model.precision import get_precision
from . import confine
from .sandbox_env import environ_for
from .declared import absolute_spec, spec_folder
from .hang_stack import frames as dumped_frames
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from .loader import load_spec
import numpy as np

#: Launchers that reach this far are fine so far: what follows needs a GPU.
REACHED_DATA, REACHED_LIBRARY, RETURNED = "reached_data", "reached_library", "returned"
#: The launcher's own failures.
RAISED, EXITED, HUNG = "raised", "exited", "hung"
GPU_LIBRARIES = ("cupy", "cupy_backends", "cupyx", "numba", "triton", "torch", "cuda", "jax", "pycuda", "cutlass")
DEFAULT_TIMEOUT = 120.0  # like the sandbox's start-up limit: importing the launcher's module is included
NOT_INSTALLED = "(not installed here)"
#: Seconds of a dry run after which the run says what it is waiting for.
SAY_WAITING_AFTER = 3.0
#: The child's deadline (epoch seconds): just before it, it writes its Python stack to stderr, so a
#: hang is reported at the launcher's own line (``faulthandler``; no signal crosses a confinement).
DEADLINE_ENV = "PYTEST_GEMM_DRY_RUN_DEADLINE"


class NeedsGpu(BaseException):
    """A stand-in array's data was used (a BaseException, so a launcher's ``except Exception`` lets it by)."""


class _Flags:
    c_contiguous = contiguous = True
    f_contiguous = False
    writeable = aligned = owndata = True

    def __getitem__(self, key: str) -> bool:
        return bool(getattr(self, key.lower(), False))


class StandIn:
    """An array's metadata, and nothing else: any other attribute or operation raises NeedsGpu."""

    def __init__(self, name: str, shape: tuple[int, int], dtype: Any):
        d = np.dtype(dtype)
        self.__dict__.update(_name=name, shape=tuple(shape), dtype=d, ndim=2, size=shape[0] * shape[1],
                             itemsize=d.itemsize, nbytes=shape[0] * shape[1] * d.itemsize,
                             strides=(shape[1] * d.itemsize, d.itemsize), flags=_Flags())

    def __getattr__(self, attr: str) -> Any:  # only for what __init__ did not set
        raise NeedsGpu(f"{self._name}.{attr}")

    def __repr__(self) -> str:
        return f"<stand-in for {self._name}: {self.shape} {self.dtype}, no data without a GPU>"


def _needs_gpu(name: str):
    def use(self: StandIn, *args: Any, **kwargs: Any) -> Any:
        raise NeedsGpu(f"{self._name} ({name})")
    return use


for _op in ("__array__", "__getitem__", "__setitem__", "__len__", "__iter__", "__bool__", "__float__", "__int__",
            "__index__", "__matmul__", "__rmatmul__", "__imatmul__", "__add__", "__radd__", "__iadd__", "__sub__",
            "__rsub__", "__mul__", "__rmul__", "__imul__", "__truediv__", "__neg__", "__eq__", "__ne__", "__lt__",
            "__gt__", "__dlpack__", "__dlpack_device__", "__array_ufunc__", "__array_function__"):
    setattr(StandIn, _op, _needs_gpu(_op))
StandIn.__hash__ = object.__hash__  # type: ignore[assignment]  # __eq__ above would drop it


@dataclass(frozen=True)
class DryResult:
    outcome: str              # one of the names above
    where: str = ""           # file:line of what stopped it
    message: str = ""         # the exception, or what was used

    @property
    def failed(self) -> bool:
        return self.outcome in (RAISED, EXITED, HUNG)

    def describe(self) -> str:
        if self.outcome == REACHED_DATA:
            return f"called with stand-in arrays it ran up to its first use of their data ({self.message}, {self.where})"
        if self.outcome == REACHED_LIBRARY and self.message.endswith(NOT_INSTALLED):
            return f"called with stand-in arrays it ran up to a GPU library call ({self.message}, {self.where})"
        if self.outcome == REACHED_LIBRARY:  # what the library said of stand-ins is not the launcher's error
            return (f"called with stand-in arrays it ran up to a GPU library call ({self.message}, at {self.where}): "
                    "as far as a launcher can run without a GPU")
        if self.outcome == RETURNED:
            return "called with stand-in arrays it returned without using their data"
        if self.outcome == RAISED:
            return f"the launcher raised {self.message} at {self.where}, before it used its arrays or a GPU library"
        if self.outcome == EXITED:
            return f"the launcher ended its process ({self.message}) before it used its arrays or a GPU library"
        at = f" (it was at {self.where})" if self.where else ""
        return f"the launcher {self.message}{at}, before it used its arrays or a GPU library"


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    here = str(Path(__file__).resolve().parent.parent)  # pytest_gemm itself
    return tuple(str(Path(p).resolve()) for p in {paths.get("stdlib", ""), paths.get("purelib", ""),
                                                  paths.get("platlib", "")} if p) + (here,)


def is_library_file(filename: str, libraries: tuple[str, ...] | None = None) -> bool:
    """A frame of a library (the standard library, an installed package, pytest-gemm, a compiled
    module's relative .pyx path), not of the launcher's own code."""
    if not os.path.isabs(filename) or filename.startswith("<"):
        return True
    resolved = str(Path(filename).resolve())
    if "site-packages" in resolved or "dist-packages" in resolved:
        return True
    return any(resolved.startswith(d + os.sep) for d in (libraries if libraries is not None else _library_dirs()))


def classify(exc: BaseException | None, frames: list[tuple[str, int]], libraries: tuple[str, ...] | None = None) -> DryResult:
    """What the launcher's call shows: ``exc`` is what it raised (None: it returned), ``frames``
    the traceback's (filename, line), innermost last, without this module's own frames."""
    if exc is None:
        return DryResult(RETURNED)
    own = [f for f in frames if not is_library_file(f[0], libraries)]
    if not own:  # a launcher of a library (the ladder's cuBLAS): its line that called into the GPU library
        gpu = [i for i, f in enumerate(frames) if _package(f[0]) in GPU_LIBRARIES]
        own = frames[:gpu[0]] if gpu and gpu[0] > 0 else frames
    where = f"{own[-1][0]}:{own[-1][1]}" if own else "?"
    if isinstance(exc, NeedsGpu):
        return DryResult(REACHED_DATA, where, str(exc))
    module = type(exc).__module__.split(".")[0]
    text = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
    missing = isinstance(exc, ImportError) and (getattr(exc, "name", None) or "").split(".")[0] in GPU_LIBRARIES
    if missing:  # a GPU library this machine lacks: the launcher cannot go further here, through no fault of its own
        return DryResult(REACHED_LIBRARY, where, f"{text} {NOT_INSTALLED}")
    if module in GPU_LIBRARIES or "StandIn" in text or "stand-in" in text or not frames \
            or is_library_file(frames[-1][0], libraries):
        return DryResult(REACHED_LIBRARY, where, _library_called(exc, frames, libraries))
    if isinstance(exc, SystemExit):
        return DryResult(EXITED, where, f"sys.exit({exc.code!r})")
    return DryResult(RAISED, where, text)


def _package(filename: str) -> str:
    """The top-level package a frame's file belongs to ('' when not an installed package's)."""
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            return parts[parts.index(marker) + 1].split(".")[0]
    if not os.path.isabs(filename) and not filename.startswith("<") and len(parts) > 1:
        return parts[0]  # a compiled module's relative source path, cupy/_core/core.pyx
    return ""


def _library_called(exc: BaseException, frames: list[tuple[str, int]], libraries: tuple[str, ...] | None) -> str:
    """The library the launcher's last own line called into: the first package frame after it."""
    module = type(exc).__module__.split(".")[0]
    if module in GPU_LIBRARIES:
        return module
    own = [i for i, f in enumerate(frames) if not is_library_file(f[0], libraries)]
    for filename, _ in frames[(own[-1] + 1 if own else 0):]:
        if _package(filename):
            return _package(filename)
    return "a library"


def call(fn: Any, precision: str, shape: tuple[int, int, int], takes_alpha_beta: bool) -> DryResult:
    """Call ``fn`` with stand-ins for A (M x K), B (K x N) and C (M x N); classify the outcome."""

    m, n, k = shape
    storage = get_precision(precision).storage_dtype
    args: list[Any] = [StandIn("a", (m, k), storage), StandIn("b", (k, n), storage), StandIn("c", (m, n), "float32")]
    if takes_alpha_beta:
        args += [1.0, 0.0]
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - the launcher's, whatever it is
        here = os.path.abspath(__file__)
        frames = [(f.filename, f.lineno or 0) for f in traceback.extract_tb(exc.__traceback__)
                  if os.path.abspath(f.filename) != here]
        return classify(exc, frames)
    return classify(None, [])


def hung_at(stderr: str, libraries: tuple[str, ...] | None = None) -> str:
    """file:line of the launcher's own innermost frame in the stack the child dumped before its
    deadline (faulthandler's, innermost first); "" when there is none."""
    for filename, line, _ in dumped_frames(stderr):
        if not is_library_file(filename, libraries):
            return f"{filename}:{line}"
    return ""


def _kill_group(child: subprocess.Popen) -> None:
    """End a hung dry run and whatever it started (its own session; a confined one ends with it)."""
    try:
        os.killpg(child.pid, 9)
    except OSError:
        child.kill()


def in_child(spec: str, index: int, shape: tuple[int, int, int], rootdir: str,
             timeout: float | None = None, say: Callable[[str], None] | None = None) -> DryResult:
    """:func:`call` on the kernel ``spec`` names (its ``index``-th), in a child process, for at
    most ``timeout`` seconds (``--gemm-timeout``; None: :data:`DEFAULT_TIMEOUT`). ``say`` is told,
    once, what the run is waiting for when the child has not answered after a few seconds."""
    limit = DEFAULT_TIMEOUT if timeout is None else timeout
    why = "--gemm-timeout" if timeout is not None else "the default; see --gemm-timeout"
    cmd = [sys.executable, "-m", "pytest_gemm.kernels.dry_run", spec, str(index), *map(str, shape)]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no GPU work in a dry run, even on a GPU machine
    env[DEADLINE_ENV] = repr(time.time() + limit - min(1.0, limit / 5))

    folder = spec_folder(spec, Path(rootdir))
    if confine.active() != "none":  # it starts in the spec's folder
        cmd[3] = absolute_spec(spec, Path(rootdir))
    cmd = confine.command(cmd, readable=[folder], chdir=folder)  # unchanged unless the run is confined
    env = environ_for(env, confine.active())  # confined: no grader's token or credential (sandbox_env.py)
    with subprocess.Popen(cmd, cwd=rootdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True, **confine.popen_kwargs()) as child:
        try:
            try:
                out, err = child.communicate(timeout=min(SAY_WAITING_AFTER, limit))
            except subprocess.TimeoutExpired:
                if limit <= SAY_WAITING_AFTER:
                    raise
                if say is not None:
                    say(f"pytest-gemm: {spec}: waiting for the launcher called with stand-in arrays (no GPU) "
                        f"to return, at most {limit:g} s ({why})")
                out, err = child.communicate(timeout=limit - SAY_WAITING_AFTER)
        except subprocess.TimeoutExpired:
            _kill_group(child)
            _, err = child.communicate()
            return DryResult(HUNG, hung_at(err or ""), f"did not return within {limit:g} s ({why}) with stand-in arrays")
    for line in reversed(out.splitlines()):
        if line.startswith("{") and '"outcome"' in line:
            return DryResult(**json.loads(line))
    tail = " ".join((err.strip().splitlines() or ["no output"])[-1:])
    return DryResult(EXITED, "", f"exit status {child.returncode}; {tail}"[:300])


def check_offline(kernel: Any, rootdir: str, why: str, timeout: float | None = None,
                  say: Callable[[str], None] | None = None) -> NoReturn:
    """The launcher ``kernel`` exercised with no GPU: a failure of its own (it raised, ended its
    process or hung before using its arrays) fails the check as ``launch_error`` (``timeout``
    for a hang); otherwise the check is skipped with ``why`` and how far it ran."""
    import pytest  # lazy: pytest stays out of the sandbox child


    spec, index = getattr(kernel, "origin_spec", (None, 0))
    if spec is None:
        pytest.skip(why)
    m, n, k = (-(-64 // q) * q for q in kernel.multiple_of)
    result = in_child(spec, index, (m, n, k), rootdir, timeout, say)
    if result.failed:
        category = cat.TIMEOUT if result.outcome == HUNG else cat.LAUNCH_ERROR
        raise GemmCheckFailure(category, f"{kernel.name!r} at {m}x{n}x{k} with no GPU: {result.describe()}",
                               [f"{why}; so the launcher was called with stand-in arrays (shape, dtype, no data): "
                                f"its own code {'hangs' if result.outcome == HUNG else 'fails'} before any GPU work"])
    pytest.skip(f"{why}; {result.describe()}")


def main(argv: list[str]) -> int:
    spec, index, m, n, k = argv[0], int(argv[1]), *map(int, argv[2:5])

    rootdir = Path.cwd()
    deadline = float(os.environ.get(DEADLINE_ENV) or 0)
    if deadline:  # where a hang is, for hung_at: the parent kills this process at its limit
        faulthandler.dump_traceback_later(max(deadline - time.time(), 0.05), file=sys.stderr)
    kernel = load_spec(spec, rootdir, each=True)[index]
    result = call(kernel.fn, kernel.precision, (m, n, k), kernel.takes_alpha_beta)  # type: ignore[union-attr]
    if deadline:
        faulthandler.cancel_dump_traceback_later()
    sys.stdout.write("\n" + json.dumps(asdict(result)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
