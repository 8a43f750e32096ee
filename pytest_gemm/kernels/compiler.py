"""Compile a CudaKernel with NVRTC for a named architecture, with or without a GPU.

NVRTC is reached through ``cuda.bindings`` (installed by the ``cuda12``/``cuda13``
extras), so compile checks and ptxas resource reports work on a machine with no
GPU. The GPU path compiles the same way for the device's own architecture and
hands the cubin to CuPy, so what CI checks is what runs.
"""
from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..model.contract import CudaKernel
from .compile_hints import include_hint
import struct
from ..model.arches import unsupported_reason
from ..model.arches import installed_arches, normalize, nvrtc_supported
from ..model.arches import installed_arches


class GemmCompileError(Exception):
    """NVRTC rejected a kernel; the message carries the log with file(line) references."""

    def __init__(self, kernel_name: str, arch: str, filename: str, log: str):
        self.kernel_name, self.arch, self.filename, self.log = kernel_name, arch, filename, log
        self.hint = include_hint(log)  # a header NVRTC lacks (<stdio.h>, <cublas_v2.h>): what to do
        super().__init__(f"kernel {kernel_name!r}: CUDA compile error in {filename} for {arch}:\n{log.strip()}\n"
                         + (self.hint or "fix the error at the file(line) shown above and run again"))


class GemmEntryError(GemmCompileError):
    """``entry`` names no kernel of the source: the message names the entry, the file and
    the ``__global__`` functions the file does define (not NVRTC's ``__nv_name_map``)."""

    def __init__(self, kernel_name: str, arch: str, filename: str, log: str, entry: str, source: str):
        Exception.__init__(self)
        self.kernel_name, self.arch, self.filename, self.log = kernel_name, arch, filename, log
        found = global_functions(source)
        defined = (f"the __global__ functions it defines: {', '.join(found)}" if found
                   else "it defines no __global__ function")
        detail = next((line.split("error:", 1)[1].strip() for line in log.splitlines() if "error:" in line), "")
        self.args = (
            f"kernel {kernel_name!r}: entry {entry!r} is not a kernel in {filename} ({detail}); {defined}. "
            f"entry is the extern \"C\" name of a __global__ function, or a template instantiation such as "
            f"mm<16> of a __global__ template",
        )


class GemmToolchainError(RuntimeError):
    """NVRTC or the CUDA headers are not installed."""


#: What to install when NVRTC is missing: the extras that bring cuda-bindings and NVRTC.
INSTALL_HINT = ("install NVRTC with the extra matching your driver: pip install 'pytest-gemm[cuda12]' "
                "or pip install 'pytest-gemm[cuda13]'")

_GLOBAL_RE = re.compile(r"(template\s*<[^>]*>\s*)?(?:(?:static|inline|extern\s+\"C\")\s+)*__global__\s+"
                        r"(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)")


def global_functions(source: str) -> list[str]:
    """The ``__global__`` functions a CUDA source defines (``"mm<...>"`` for a template)."""
    names: list[str] = []
    for template, name in _GLOBAL_RE.findall(source):
        label = f"{name}<...>" if template else name
        if label not in names:
            names.append(label)
    return names


@dataclass(frozen=True)
class Resources:
    registers: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    shared_static: int

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


@dataclass(frozen=True)
class CompileResult:
    kernel_name: str
    arch: str
    output: str          # "cubin" or "ptx"
    code: bytes
    lowered_name: str    # the symbol to look up in the module
    log: str
    resources: Resources


def _nvrtc():
    try:
        from cuda.bindings import nvrtc  # lazy: CUDA's bindings (the plugin loads with no GPU)
    except ImportError as exc:  # depends on the install
        raise GemmToolchainError(
            f"NVRTC is not available (cuda.bindings is not installed); {INSTALL_HINT}"
        ) from exc
    if not _NVRTC_LOADS:
        try:  # cuda.bindings loads libnvrtc on the first call: a broken install fails here
            err = nvrtc.nvrtcVersion()[0]
        except Exception as exc:
            why = " ".join(str(exc).split())  # one line: cuda-pathfinder's message ends in a newline
            raise GemmToolchainError(f"NVRTC does not load: {type(exc).__name__}: {why}; {INSTALL_HINT}") from exc
        if int(err) != 0:
            raise GemmToolchainError(f"NVRTC does not work: nvrtcVersion returned {err!r}; {INSTALL_HINT}")
        _NVRTC_LOADS.append(True)
    return nvrtc


_NVRTC_LOADS: list[bool] = []


def _header_major(include_dir: Path) -> int | None:
    """CUDA major version of a header tree (CUDART_VERSION in cuda_runtime_api.h)."""
    header = include_dir / "cuda_runtime_api.h"
    if not header.is_file():
        return None
    m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", header.read_text(errors="replace"))
    return int(m.group(1)) // 1000 if m else None


def _system_include_dirs() -> list[Path]:
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    return [Path(r, "include") for r in roots if r and Path(r, "include").is_dir()]


@lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """CUDA headers matching the installed NVRTC: pip's cudart headers, the nvcc
    wheel's (crt/mma.h lives there), CuPy's bundled libcu++. A system toolkit is
    added only with the same CUDA major as NVRTC (mixed majors break builds): as
    the whole tree when pip gives none, or to supply crt/mma.h, which CUDA 13's
    pip headers lack."""
    dirs: list[str] = []
    try:
        import cuda.pathfinder as pathfinder  # lazy: CUDA's bindings (the plugin loads with no GPU)

        for lib in ("cudart", "nvcc"):
            try:
                found = pathfinder.find_nvidia_header_directory(lib)
            except Exception:
                found = None
            if found and "site-packages" in found and found not in dirs:
                dirs.append(found)
    except ImportError:
        pass
    spec = importlib.util.find_spec("cupy")
    if spec and spec.origin:
        cccl = Path(spec.origin).parent / "_core" / "include" / "cupy" / "_cccl" / "libcudacxx"
        if cccl.is_dir():
            dirs.append(str(cccl))
    has_runtime = any(Path(d, "cuda_fp16.h").is_file() for d in dirs)
    has_mma = any(Path(d, "crt", "mma.h").is_file() for d in dirs)
    if not (has_runtime and has_mma):
        try:
            major = nvrtc_version()[0]
        except Exception:
            major = None
        for system in _system_include_dirs():
            if _header_major(system) == major and (system / "crt" / "mma.h").is_file():
                dirs.append(str(system))  # searched after pip's: fills only what they lack
                break
    return tuple(dirs)


def _check(result, what: str):
    err = result[0]
    if int(err) != 0:
        raise GemmToolchainError(f"NVRTC {what} failed: {err!r}")
    return result[1] if len(result) > 1 else None


_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")


def parse_ptxas_log(log: str, symbol: str) -> Resources:
    """Resource figures for one entry function from a ``ptxas -v`` log."""
    sections = _ENTRY_RE.split(log)
    # split gives [prefix, name, arch, body, name, arch, body, ...]
    body = ""
    for i in range(1, len(sections) - 2, 3):
        if sections[i] == symbol:
            body = sections[i + 2]
            break

    def grab(pattern: str) -> int:
        m = re.search(pattern, body)
        return int(m.group(1)) if m else 0

    return Resources(
        registers=grab(r"Used (\d+) registers"),
        spill_stores=grab(r"(\d+) bytes spill stores"),
        spill_loads=grab(r"(\d+) bytes spill loads"),
        stack_frame=grab(r"(\d+) bytes stack frame"),
        shared_static=grab(r"(\d+) bytes smem"),
    )


_EIATTR_FRAME_SIZE = 0x11
_EIATTR_REGCOUNT = 0x2F


def cubin_resources(cubin: bytes, symbol: str) -> tuple[int, int] | None:
    """(registers, stack frame bytes) of ``symbol`` read from the cubin (ELF).

    NVRTC caches compiles and a cache hit prints no ptxas report, so the log is
    not always there; the cubin always is. ``.text.<symbol>``'s sh_info holds the
    function's symbol index (and, before sm_90, the register count in its top
    byte); the ``.nv.info`` section lists REGCOUNT and FRAME_SIZE per symbol.
    Spilled registers live in the stack frame, so a zero frame means no spills.
    """

    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2:  # 64-bit ELF only
        return None
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQII", cubin, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = headers[shstrndx][4], headers[shstrndx][5]
    names = cubin[str_off:str_off + str_size]

    def name(h: tuple) -> bytes:
        return names[h[0]:names.find(b"\x00", h[0])]

    text = next((h for h in headers if name(h) == f".text.{symbol}".encode()), None)
    info = next((h for h in headers if name(h) == b".nv.info"), None)
    if text is None or info is None:
        return None
    sym_index = text[7] & 0xFFFFFF
    found: dict[int, int] = {}
    data = cubin[info[4]:info[4] + info[5]]
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr, value = struct.unpack_from("<BBH", data, pos)
        pos += 4
        if fmt == 0x04:  # EIFMT_SVAL: `value` bytes of payload follow
            if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and value >= 8:
                sym, number = struct.unpack_from("<II", data, pos)
                if sym == sym_index:
                    found[attr] = number
            pos += value
    if _EIATTR_REGCOUNT not in found:
        return None
    return found[_EIATTR_REGCOUNT], found.get(_EIATTR_FRAME_SIZE, 0)


def _options(kernel: CudaKernel, arch: str, source_dir: Path | None) -> list[bytes]:
    opts = [f"--gpu-architecture={arch}", "--ptxas-options=-v"]
    if not any(o.startswith(("-std", "--std")) for o in kernel.options):
        opts.append("-std=c++17")
    opts += list(kernel.options)
    if source_dir is not None:
        opts.append(f"-I{source_dir}")
    opts += [f"-I{d}" for d in include_dirs()]
    return [o.encode() for o in opts]


#: NVRTC 12.9+ on every compile for sm_70/sm_72: CUDA's roadmap, not the kernel's error. The
#: claimed architectures are what this NVRTC compiles for; the line would head every log and
#: every one-line reason (a gradebook's), above the kernel's real error.
_ARCH_DEPRECATED = re.compile(r"^nvrtc: warning: Architectures prior to '<compute/sm>_\d+' are deprecated.*\n?", re.M)


def without_arch_deprecation(log: str) -> str:
    """NVRTC's log without its warning that architectures before sm_75 are deprecated."""
    return _ARCH_DEPRECATED.sub("", log)


def _only_name_map_errors(log: str) -> bool:
    """NVRTC's errors are all in the name-expression map it builds from ``entry``."""
    errors = [line for line in log.splitlines() if ": error" in line]
    return bool(errors) and all(line.startswith("__nv_name_map") for line in errors)


def compile_for_arch(kernel: CudaKernel, arch: str, *, output: str = "cubin") -> CompileResult:
    """Compile ``kernel`` for ``arch`` (e.g. ``"sm_80"``) and return code plus resources.

    Raises GemmCompileError with NVRTC's log (file(line): error ...) on failure.
    """
    if output not in ("cubin", "ptx"):
        raise ValueError(f"output must be 'cubin' or 'ptx', got {output!r}")
    if f"{arch}a" in (kernel.arches or ()):  # a kernel built for sm_90a runs on a 9.0 device as sm_90a
        arch = f"{arch}a"
    text, filename = kernel.source_text()
    source_path = kernel.source_path()
    key = (text, filename, kernel.entry, tuple(kernel.options), arch, output, str(source_path))
    if key in _CACHE:
        return _CACHE[key]
    nvrtc = _nvrtc()

    unsupported = unsupported_reason(arch)
    if unsupported is not None:
        raise GemmCompileError(str(kernel.name), arch, filename, unsupported)
    prog = _check(nvrtc.nvrtcCreateProgram(text.encode(), filename.encode(), 0, [], []), "program creation")
    try:
        entry = kernel.entry.encode()
        _check(nvrtc.nvrtcAddNameExpression(prog, entry), "name expression")
        opts = _options(kernel, arch, source_path.parent if source_path else None)
        status = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        buf = b" " * size
        _check(nvrtc.nvrtcGetProgramLog(prog, buf), "log")
        log = without_arch_deprecation(buf.rstrip(b"\x00 ").decode(errors="replace"))
        if int(status) != 0:
            if _only_name_map_errors(log):
                raise GemmEntryError(str(kernel.name), arch, filename, log, kernel.entry, text)
            raise GemmCompileError(str(kernel.name), arch, filename, log or repr(status))
        lowered = _check(nvrtc.nvrtcGetLoweredName(prog, entry), "lowered name").decode()
        if output == "cubin":
            size = _check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
            code = b" " * size
            _check(nvrtc.nvrtcGetCUBIN(prog, code), "cubin")
        else:
            size = _check(nvrtc.nvrtcGetPTXSize(prog), "ptx size")
            code = b" " * size
            _check(nvrtc.nvrtcGetPTX(prog, code), "ptx")
            code = code.rstrip(b"\x00")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    resources = parse_ptxas_log(log, lowered)
    if not resources.registers and output == "cubin":  # NVRTC cache hit: no ptxas report in the log
        from_cubin = cubin_resources(code, lowered)
        if from_cubin is not None:
            registers, frame = from_cubin
            # The frame bounds the spills from above; a zero frame proves there are none.
            resources = Resources(registers, frame, frame, frame, resources.shared_static)
    result = CompileResult(str(kernel.name), arch, output, code, lowered, log, resources)
    _CACHE[key] = result
    return result


_CACHE: dict[tuple, CompileResult] = {}


def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    return int(major), int(minor)


def parse_arch_list(value: str) -> list[str]:
    """``--gemm-arch``: ``"sm_75,sm_80,sm_90a"`` or ``"75,80"`` -> ``["sm_75", "sm_80", ...]``;
    ``"all"``: every target the installed NVRTC supports. A bad item raises ValueError naming
    the option and the accepted values."""

    valid = installed_arches()
    accepted = f"accepted ({nvrtc_supported()[1]}): all, {', '.join(valid)}"
    if value.strip().lower() == "all":
        return list(valid)
    arches: list[str] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        try:
            arch = normalize(item)
        except ValueError:
            arch = None
        if arch not in valid:
            raise ValueError(f"--gemm-arch: unknown architecture {item!r}; {accepted}")
        if arch not in arches:
            arches.append(arch)
    if not arches:
        raise ValueError(f"--gemm-arch: no architecture in {value!r}; try --gemm-arch sm_75,sm_80,sm_90; {accepted}")
    return arches


_PROBE_SOURCE = 'extern "C" __global__ void gemm_probe(float* c) { c[threadIdx.x] = 1.0f; }'


def toolchain_problem() -> str | None:
    """None when NVRTC can compile here; else what is wrong and what to install. Compiles a
    one-line kernel, so a broken NVRTC (a library that does not load, headers of another CUDA
    major) is found as well as a missing one."""

    try:
        _nvrtc()
        major, minor = nvrtc_version()
        probe = CudaKernel(source=_PROBE_SOURCE, entry="gemm_probe", block=(32,), tile=(1, 32), name="gemm_probe")
        compile_for_arch(probe, next(a for a in installed_arches() if not a.endswith("a")), output="ptx")
    except GemmToolchainError as exc:
        return f"{exc}" if "pip install" in str(exc) else f"NVRTC does not work here: {exc}; {INSTALL_HINT}"
    except GemmCompileError as exc:
        return f"NVRTC {major}.{minor} cannot compile a one-line kernel: {exc.log.strip()}; {INSTALL_HINT}"
    except Exception as exc:  # the NVRTC library itself failed to load or run
        return f"NVRTC does not work here: {type(exc).__name__}: {exc}; {INSTALL_HINT}"
    return None
