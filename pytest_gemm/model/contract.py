"""The kernel contract: how a user declares a GEMM kernel.

Pure Python: nothing here imports CuPy or touches CUDA, so declaring kernels
(and loading the module that declares them) works on a machine with no GPU.

The declaration's errors (``GemmSpecError``, ``EmptyGridError``) and its keyword checks live in
``model/declaration.py``: import them from there (``GemmSpecError`` also from ``pytest_gemm``).
"""
from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, Union

from . import arches as _arches
from .declaration import EmptyGridError, GemmSpecError, check_arches, check_keywords, grid_takes_device, strict_init
from .prototype import LAUNCHER_HINT, SQUARE_HINT, problems
from .precision import PRECISIONS

SIGNATURE_TOKENS = ("A", "B", "C", "M", "N", "K", "alpha", "beta")
REQUIRED_TOKENS = ("A", "B", "C", "M", "N", "K")
#: The targets claimable without NVRTC installed (see ``model/arches.py``); on a machine with
#: NVRTC, ``arches.installed_arches()`` is the list that counts.
SUPPORTED_ARCHES = _arches.claimable_arches(_arches.FALLBACK_ARCHES)
MAX_THREADS_PER_BLOCK = 1024

GridFn = Union[Callable[[int, int, int], Sequence[int]], Callable[[int, int, int, Any], Sequence[int]]]


SharedMem = Union[int, Callable[[int, int, int], int]]


def parse_signature(signature: str) -> tuple[str, ...]:
    """Split ``"A,B,C,M,N,K"`` into tokens and check them.

    Every token must be known, none repeated, A B C M N K all present, and
    alpha/beta come as a pair.
    """
    tokens = tuple(t.strip() for t in signature.split(",") if t.strip())
    unknown = [t for t in tokens if t not in SIGNATURE_TOKENS]
    if unknown:
        raise GemmSpecError(
            f"signature {signature!r}: unknown token(s) {', '.join(map(repr, unknown))}; "
            f"valid tokens are {', '.join(SIGNATURE_TOKENS)} (case matters: alpha and beta are lower case)"
        )
    repeated = sorted({t for t in tokens if tokens.count(t) > 1})
    if repeated:
        raise GemmSpecError(f"signature {signature!r}: token(s) {', '.join(repeated)} appear more than once")
    missing = [t for t in REQUIRED_TOKENS if t not in tokens]
    if missing:
        square = ("N" in tokens and "M" in missing and "K" in missing)  # a tutorial's kernel(A, B, C, N)
        raise GemmSpecError(
            f"signature {signature!r} is missing {', '.join(missing)}; "
            "a GEMM kernel takes at least A, B, C, M, N, K in the order its C++ parameters are declared"
            + (f"; {SQUARE_HINT}" if square else f"; {LAUNCHER_HINT}")
        )
    if ("alpha" in tokens) != ("beta" in tokens):
        raise GemmSpecError(f"signature {signature!r}: alpha and beta come together; give both or neither")
    return tokens


def _int_tuple(value: Any, length: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        value = (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise GemmSpecError(f"{what} must be a tuple of {length} positive ints, got {value!r}") from None
    if len(items) > length or not items or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in items):
        raise GemmSpecError(f"{what} must be a tuple of up to {length} positive ints, got {value!r}")
    return items + (1,) * (length - len(items))


def _check_common(name: str, precision: str, min_cc: Any, multiple_of: Any) -> tuple[tuple[int, int], tuple[int, int, int]]:
    if precision not in PRECISIONS:
        raise GemmSpecError(
            f"{name}: unknown precision {precision!r}; valid precisions are {', '.join(PRECISIONS)}"
        )
    try:
        major, minor = min_cc
        cc = (int(major), int(minor))
    except (TypeError, ValueError):
        raise GemmSpecError(f"{name}: min_cc must be a (major, minor) pair such as (8, 0), got {min_cc!r}") from None
    mult = _int_tuple(multiple_of, 3, f"{name}: multiple_of")
    return cc, mult  # type: ignore[return-value]


BETA_ZERO = ("blas", "reads_c")


def _check_beta_zero(label: str, value: str) -> None:
    """``beta_zero``: "blas" (C is not read when beta == 0: the default, BLAS's rule) or
    "reads_c" (the tutorial epilogue alpha*acc + beta*C: declared, reported as not BLAS-conformant)."""
    if value not in BETA_ZERO:
        raise GemmSpecError(f"{label}: beta_zero={value!r}; valid values: {', '.join(map(repr, BETA_ZERO))} "
                            "('reads_c' declares that the kernel reads C even when beta == 0)")


def _caller_dir() -> Path:
    """Directory of the module that declared a kernel (sources are relative to it)."""
    ours = {__file__, str(Path(__file__).with_name("declaration.py"))}  # and the dataclass's generated __init__:
    frame = inspect.currentframe()
    try:
        while frame is not None and (frame.f_code.co_filename in ours or frame.f_code.co_filename == "<string>"
                                     and frame.f_code.co_name == "__init__"):
            frame = frame.f_back
        filename = frame.f_globals.get("__file__") if frame else None
    finally:
        del frame
    return Path(filename).resolve().parent if filename else Path.cwd()


def _looks_like_code(source: str) -> bool:
    return "\n" in source or "__global__" in source or "{" in source


@dataclass(eq=False)
class CudaKernel:
    """A CUDA C kernel computing row-major ``C = A @ B`` (or ``alpha*A@B + beta*C``).

    ``source`` is a path relative to the defining module, or the CUDA C text.
    ``entry`` is the ``extern "C"`` name or a template instantiation such as ``mm<16>``.
    Launch geometry: ``tile=(rows, cols)`` of C per block gives
    ``grid = (ceil(N/cols), ceil(M/rows))``; or ``grid=lambda m, n, k: (...)``, or
    ``grid=lambda m, n, k, device: (device.sm_count, 1, 1)`` for a grid sized by the GPU.
    """

    source: str | os.PathLike[str]
    entry: str
    block: Sequence[int]
    tile: Sequence[int] | None = None
    grid: GridFn | None = None
    signature: str = "A,B,C,M,N,K"
    precision: str = "fp32"
    min_cc: Sequence[int] = (7, 0)
    multiple_of: Sequence[int] = (1, 1, 1)
    shared_mem: SharedMem = 0
    options: Sequence[str] = ()
    name: str | None = None
    deterministic: bool = True
    arches: Sequence[str] | None = None
    beta_zero: str = "blas"
    origin: Path = field(default_factory=_caller_dir, repr=False)
    #: The file compile messages name for CUDA C text: a declaration read in another process
    #: (kernels/declared.py) arrives as text and keeps its .cu file's name.
    source_file: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = self.entry
        if isinstance(self.source, os.PathLike):  # a pathlib.Path: always a file, never CUDA C text
            self.source = os.fspath(self.source)
        self.options = tuple(self.options)
        # The normal form now (block of 3, tile of 2), so validate() never changes how a
        # declaration compares or prints; a bad value is left for validate() to report.
        for attr, length in (("block", 3), ("tile", 2)):
            if getattr(self, attr) is not None:
                try:
                    setattr(self, attr, _int_tuple(getattr(self, attr), length, attr))
                except GemmSpecError:
                    pass

    # -- validation -------------------------------------------------------
    def validate(self, *, build: bool = False) -> None:
        """Raise GemmSpecError naming what is wrong; called by the loader. ``build``: a launcher's
        ``builds=`` entry, whose parameters are the launcher's business (``lda``, no ``M``...)."""
        label = f"kernel {self.name!r}"
        if not isinstance(self.entry, str) or not self.entry.strip():
            raise GemmSpecError(f"{label}: entry must name the kernel function, e.g. entry=\"mm_tiled\"")
        if not build:
            parse_signature(self.signature)
        self.min_cc, self.multiple_of = _check_common(label, self.precision, self.min_cc, self.multiple_of)
        _check_beta_zero(label, self.beta_zero)
        self.block = _int_tuple(self.block, 3, f"{label}: block")
        threads = math.prod(self.block)
        if threads > MAX_THREADS_PER_BLOCK:
            raise GemmSpecError(
                f"{label}: block={tuple(self.block)} is {threads} threads; CUDA allows at most "
                f"{MAX_THREADS_PER_BLOCK} per block, so use a smaller block (e.g. (16, 16))"
            )
        if self.precision in ("fp16", "bf16") and threads % 32:
            raise GemmSpecError(
                f"{label}: block={tuple(self.block)} is {threads} threads, not a whole number of warps; "
                "tensor-core (WMMA) kernels need whole warps: use a multiple of 32 threads"
            )
        if (self.tile is None) == (self.grid is None):
            raise GemmSpecError(f"{label}: give exactly one of tile=(rows, cols) or grid=lambda m, n, k: (...)")
        if self.tile is not None:
            self.tile = _int_tuple(self.tile, 2, f"{label}: tile")
        elif not callable(self.grid):
            raise GemmSpecError(f"{label}: grid must be a callable of (m, n, k) or (m, n, k, device), "
                                f"got {self.grid!r}")
        if not (isinstance(self.shared_mem, int) and self.shared_mem >= 0) and not callable(self.shared_mem):
            raise GemmSpecError(f"{label}: shared_mem must be bytes (int >= 0) or a callable of (m, n, k)")
        if self.arches is not None:
            self.arches = check_arches(label, self.arches)
        self.source_path()  # a missing file is reported now, not at compile time
        found = problems(*self.source_text(), self.entry.strip(), None if build else self.tokens, self.precision)
        if found:
            raise GemmSpecError(f"{label}: {'; '.join(found)}")

    # -- derived facts ----------------------------------------------------
    @property
    def tokens(self) -> tuple[str, ...]:
        return parse_signature(self.signature)

    @property
    def takes_alpha_beta(self) -> bool:
        return "alpha" in self.tokens

    def source_path(self) -> Path | None:
        """The .cu file, or None when ``source`` is CUDA C text."""
        if _looks_like_code(self.source):
            return None
        path = Path(self.source)
        if not path.is_absolute():
            path = self.origin / path
        if not path.is_file():
            raise GemmSpecError(
                f"kernel {self.name!r}: source file {str(path)!r} not found; source is a path relative to "
                f"the module that declares the kernel ({self.origin}) or the CUDA C text itself"
            )
        return path

    def source_text(self) -> tuple[str, str]:
        """(CUDA C text, file name used in compile messages)."""
        path = self.source_path()
        if path is None:
            return self.source, self.source_file or f"{self.name}.cu"
        return path.read_text(), str(path)

    def launch_grid(self, m: int, n: int, k: int, device: Any = None) -> tuple[int, int, int]:
        """The grid at this shape; a declared ``grid`` with a zero dimension (e.g. floor
        division at a shape smaller than one tile) raises EmptyGridError: it launches no block.
        A ``grid`` of four arguments (or with one named ``device``) also gets the device's
        properties (``device.sm_count``, ``device.compute_capability``, ...): a persistent kernel
        launches one block per SM without hard-coding the count."""
        if self.grid is not None:
            if grid_takes_device(self.grid):
                if device is None:
                    raise GemmSpecError(f"kernel {self.name!r}: grid(m, n, k, device) needs the device; "
                                        "it is given when the kernel is launched on a GPU")
                named = "device" in inspect.signature(self.grid).parameters
                raw = tuple(self.grid(m, n, k, device=device) if named else self.grid(m, n, k, device))
            else:
                raw = tuple(self.grid(m, n, k))
            if raw and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in raw) and 0 in raw:
                raise EmptyGridError(f"kernel {self.name!r}: grid(m, n, k) = {raw} at {m}x{n}x{k} launches no block")
            return _int_tuple(raw, 3, f"kernel {self.name!r}: grid(m, n, k)")  # type: ignore[return-value]
        rows, cols = self.tile  # type: ignore[misc]
        return (-(-n // cols), -(-m // rows), 1)

    def dynamic_shared_mem(self, m: int, n: int, k: int) -> int:
        return int(self.shared_mem(m, n, k)) if callable(self.shared_mem) else int(self.shared_mem)

    def claimed_arches(self, claimable: Sequence[str] | None = None) -> tuple[str, ...]:
        """Architectures it claims (and is compile-checked for): the declared ``arches``, else
        every generic target the installed NVRTC supports (``claimable``) at or above
        ``min_cc``; arch-specific targets (``sm_90a``) only when declared."""
        if self.arches is not None:
            return tuple(_arches.normalize(a) for a in self.arches)
        return _arches.default_claims(self.min_cc, claimable)

    def not_claimed_reason(self, arch: str, claimable: Sequence[str] | None = None) -> str:
        """Why it does not claim ``arch`` (a skip reason that names the true cause)."""
        return _arches.not_claimed_reason(str(self.name), arch, self.arches, self.min_cc, claimable)

    def claimed_on(self, compute_capability: Sequence[int]) -> bool:
        """Whether a GPU of this compute capability is one it claims: at or above ``min_cc``
        and, with declared ``arches``, covered by one of them (``sm_90a`` only on 9.0 exactly)."""
        cc = (int(compute_capability[0]), int(compute_capability[1]))
        if cc < tuple(self.min_cc):
            return False
        return self.arches is None or any(_arches.arch_claimed_on(a, cc) for a in self.arches)


def _positional_params(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


@dataclass(eq=False)
class PyKernel:
    """A Python launcher (CuPy, Numba, Triton, ...) that writes ``a @ b`` into ``c``.

    The function takes ``(a, b, c)`` or ``(a, b, c, alpha, beta)``: CuPy arrays,
    ``a`` (M, K) and ``b`` (K, N) in the precision's storage dtype (bf16 as
    uint16 bit patterns), ``c`` (M, N) float32.
    """

    fn: Callable[..., Any]
    precision: str = "fp32"
    min_cc: Sequence[int] = (7, 0)
    multiple_of: Sequence[int] = (1, 1, 1)
    name: str | None = None
    deterministic: bool = True
    beta_zero: str = "blas"
    arches: Sequence[str] | None = None  # an arch-specific target (sm_90a) limits it to that device
    #: The CUDA C it builds, as CudaKernels (source, entry, options, arches): compile-checked in its name.
    builds: Sequence[CudaKernel] = ()

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = getattr(self.fn, "__name__", "kernel")
        self.builds = tuple(self.builds) if isinstance(self.builds, (list, tuple)) else (self.builds,)

    def validate(self) -> None:
        label = f"kernel {self.name!r}"
        if not callable(self.fn):
            raise GemmSpecError(f"{label}: @kernel must decorate a function")
        self.min_cc, self.multiple_of = _check_common(label, self.precision, self.min_cc, self.multiple_of)
        _check_beta_zero(label, self.beta_zero)
        bad = [a for a in (self.arches or ()) if a not in SUPPORTED_ARCHES]
        if bad:
            raise GemmSpecError(f"{label}: unknown arch(es) {bad}; valid: {', '.join(SUPPORTED_ARCHES)}")
        for build in self.builds:  # the CUDA C it compiles, each declared like a CudaKernel
            if not isinstance(build, CudaKernel):
                raise GemmSpecError(f"{label}: builds= lists pytest_gemm.CudaKernel(...) declarations (source, entry, "
                                    f"options, arches) of the CUDA C the launcher compiles; got a {type(build).__name__}")
            try:
                build.validate(build=True)
            except GemmSpecError as exc:
                raise GemmSpecError(f"{label}: builds: {exc}") from None
        params = _positional_params(self.fn)
        required = [p for p in params if p.default is p.empty]
        if not (len(required) <= 3 <= len(params) or self.takes_alpha_beta):  # callable as f(a, b, c)
            raise GemmSpecError(
                f"{label}: a @kernel function takes (a, b, c) or (a, b, c, alpha, beta), "
                f"but {self.fn.__name__} takes {len(params)} positional parameters"
                + (f", {len(required)} without a default" if len(required) != len(params) else "")
                + ("; the sizes come from the arrays: m, k = a.shape; n = b.shape[1]" if len(params) > 5 else "")
            )

    @property
    def takes_alpha_beta(self) -> bool:
        """Called as ``f(a, b, c, alpha, beta)``: five parameters without defaults, or the fourth
        and fifth named alpha and beta. Further parameters with defaults (``stream=None``) are the
        launcher's own business: it is still called as ``f(a, b, c)``."""
        params = _positional_params(self.fn)
        required = [p for p in params if p.default is p.empty]
        return len(required) == 5 or (len(required) <= 5 <= len(params)
                                      and [p.name for p in params[3:5]] == ["alpha", "beta"])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def kernel(fn: Callable[..., Any] | None = None, *, precision: str = "fp32", min_cc: Sequence[int] = (7, 0),
           multiple_of: Sequence[int] = (1, 1, 1), name: str | None = None,
           deterministic: bool = True, beta_zero: str = "blas", arches: Sequence[str] | None = None,
           builds: Sequence[CudaKernel] = (), **unknown: Any) -> Any:
    """Declare a Python launcher as a GEMM kernel: ``@kernel`` or ``@kernel(precision="fp16", ...)``.
    ``builds``: the CudaKernel declarations of the CUDA C it compiles (compile-checked with no GPU)."""
    check_keywords("@kernel", unknown, _KERNEL_KEYWORDS, GemmSpecError)

    def wrap(f: Callable[..., Any]) -> PyKernel:
        return PyKernel(f, precision=precision, min_cc=min_cc, multiple_of=multiple_of, name=name,
                        deterministic=deterministic, beta_zero=beta_zero, arches=arches, builds=builds)

    return wrap(fn) if fn is not None else wrap


GemmKernel = Union[CudaKernel, PyKernel]
_KERNEL_KEYWORDS = tuple(inspect.signature(kernel).parameters)[1:-1]


strict_init(CudaKernel, GemmSpecError)
strict_init(PyKernel, GemmSpecError)


def unsupported_reason(kernel: GemmKernel, cc: Sequence[int]) -> str | None:
    """Why ``kernel`` cannot run on a GPU of compute capability ``cc``, or None: below its
    min_cc, or declared for arch-specific targets only (``sm_90a``: its code runs on 9.0 alone)."""
    have = f"{cc[0]}.{cc[1]}"
    if tuple(cc) < tuple(kernel.min_cc):
        return f"kernel {kernel.name!r} needs compute capability {kernel.min_cc[0]}.{kernel.min_cc[1]} (min_cc); this GPU is {have}"
    exact = [a for a in (kernel.arches or ()) if a.endswith("a")]
    if exact and f"sm_{cc[0]}{cc[1]}a" not in exact:
        return (f"kernel {kernel.name!r} is built for {', '.join(exact)} only (arch-specific instructions such as "
                f"wgmma run on that compute capability exactly); this GPU is {have}")
    return None


def is_kernel(obj: Any) -> bool:
    return isinstance(obj, (CudaKernel, PyKernel))


def short_id(name: str) -> str:
    """A test-id friendly form of a kernel name: ``"tiled 16"`` -> ``"tiled16"``."""
    keep = "".join(ch for ch in name if ch.isalnum() or ch in "_-.")
    return keep or "kernel"


__all__ = [
    "CudaKernel", "PyKernel", "kernel", "GemmKernel", "parse_signature",
    "is_kernel", "short_id", "unsupported_reason", "SIGNATURE_TOKENS", "SUPPORTED_ARCHES", "MAX_THREADS_PER_BLOCK",
]
