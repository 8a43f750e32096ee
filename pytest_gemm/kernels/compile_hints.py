"""What to do about an NVRTC error a kernel written for nvcc meets: pure text, no CUDA.

NVRTC compiles device code only and ships no C or C++ library headers, so a file written for
nvcc (``#include <stdio.h>``, ``<cublas_v2.h>``, a host function launching with ``<<<...>>>``)
stops at its first such include. The compile error then says which header, why, and the edit
that keeps the file building with nvcc too (``#ifndef __CUDACC_RTC__``, which NVRTC defines).
"""
from __future__ import annotations

import re

#: Headers of CUDA's host libraries and of the CUDA samples' host helpers (not device code).
_HOST_LIBRARIES = re.compile(r"(cublas|cublasLt|cublasXt|curand|cusparse|cusolver|cufft|cudnn|nvToolsExt|nvtx3/.*"
                             r"|cuda_profiler_api|helper_cuda|helper_functions|helper_string|helper_timer)(_v2)?\.h")
#: C headers whose device-side names NVRTC declares itself (printf, assert, the math functions).
_BUILT_IN = ("stdio.h", "cstdio", "assert.h", "cassert", "math.h", "cmath", "stdlib.h", "cstdlib")
#: C and C++ standard headers NVRTC has a device replacement for under <cuda/std/...>.
_CUDA_STD = {"stdint.h": "cstdint", "cstdint": "cstdint", "limits.h": "climits", "climits": "climits",
             "float.h": "cfloat", "cfloat": "cfloat", "stddef.h": "cstddef", "cstddef": "cstddef",
             "limits": "limits", "type_traits": "type_traits", "utility": "utility", "array": "array",
             "tuple": "tuple"}
_NOT_FOUND = re.compile(r'cannot open source file "([^"]+)"')
#: The C library's and C++ standard library's other headers: host headers NVRTC lacks.
_C_NAMES = ("ctype", "errno", "inttypes", "locale", "setjmp", "signal", "stdarg", "stdbool", "string", "time",
            "wchar", "fenv", "iso646", "uchar", "wctype")
_STD_NAMES = {f"{c}.h" for c in _C_NAMES} | {f"c{c}" for c in _C_NAMES} | {
    "unistd.h", "sys/time.h", "algorithm", "iostream", "vector", "string", "memory", "map", "set", "chrono",
    "random", "numeric", "iomanip", "sstream", "fstream", "thread", "mutex", "iterator", "list", "deque", "queue",
    "stack", "bitset", "functional", "unordered_map", "unordered_set", "stdexcept", "exception", "cstdio"}
#: The edit that keeps a file building with nvcc and NVRTC alike.
GUARD = "#ifndef __CUDACC_RTC__ ... #endif (NVRTC defines it, nvcc does not)"


#: Short type names that glibc's host headers (<sys/types.h>) declare and nvcc's host compile sees, but
#: NVRTC does not: the public SGEMM tutorial's kernels (siboehm/SGEMM_CUDA) use ``uint`` throughout.
_HOST_TYPEDEFS = {"uint": "unsigned int", "ushort": "unsigned short", "ulong": "unsigned long",
                  "u_int": "unsigned int", "u_char": "unsigned char", "uchar": "unsigned char"}
_UNDEFINED = re.compile(r'identifier "(\w+)" is undefined')


def include_hint(log: str) -> str | None:
    """The one thing to do about a header NVRTC could not open, or a host typedef it lacks, or None."""
    found = _NOT_FOUND.search(log)
    if found is None:
        return _typedef_hint(log)
    header = found.group(1)
    nvrtc = "NVRTC, which compiles kernels here, compiles device code only and ships no C/C++ library headers"
    if _HOST_LIBRARIES.fullmatch(header):
        return (f"<{header}> is a host library's header and {nvrtc}: put the file's host-only lines (such includes, "
                f"a host function that launches with <<<...>>>) inside {GUARD}, or delete them")
    if header in _BUILT_IN:
        return (f"<{header}> is a C library header and {nvrtc}; device code needs none for printf, assert or the "
                f"math functions (NVRTC declares them): delete the include, or guard it with {GUARD}")
    if header in _CUDA_STD:
        return (f"<{header}> is a C/C++ library header and {nvrtc}: include <cuda/std/{_CUDA_STD[header]}> "
                f"instead (the same names, in cuda::std), or guard a host-only include with {GUARD}")
    if header in _STD_NAMES:
        return f"<{header}> is a C/C++ library header and {nvrtc}: guard the host-only lines with {GUARD}"
    return (f"{header!r} was not found: a kernel's includes resolve in its source's own folder (by a path relative "
            f"to the file) and in CUDA's headers; copy the header beside the .cu file, or guard a host-only include "
            f"with {GUARD}")


def _typedef_hint(log: str) -> str | None:
    """A name that nvcc's host headers declare and NVRTC does not (``uint``): the typedef to add."""
    names = [n for n in dict.fromkeys(_UNDEFINED.findall(log)) if n in _HOST_TYPEDEFS]
    if not names:
        return None
    typedefs = " ".join(f"typedef {_HOST_TYPEDEFS[n]} {n};" for n in names)
    return (f"{', '.join(names)} {'is a type' if len(names) == 1 else 'are types'} that glibc's host headers declare "
            f"(nvcc's compile sees them, NVRTC, which compiles kernels here, does not): write "
            f"{' / '.join(_HOST_TYPEDEFS[n] for n in names)}, or add `{typedefs}` inside #ifdef __CUDACC_RTC__ ... #endif")
