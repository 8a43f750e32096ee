"""GPU architectures a kernel can claim, and which devices a claim covers.

The claimable targets are what the installed NVRTC can compile for, from sm_70 up to the
newest it knows (``nvrtcGetSupportedArchs`` through ``cuda.bindings``, asked lazily, on
first use, never at import). Without NVRTC the list is :data:`FALLBACK_ARCHES` (what
NVRTC 12.9 supports), so declarations and ``--gemm-arch`` can still be checked; a run
that must compile without NVRTC is an error elsewhere (``kernels.compiler``).

Two kinds of target:

- generic ``sm_XY``: the cubin runs on compute capability X.Y and on later minors of the
  same major; a kernel claims, by default, every generic target at or above its ``min_cc``;
- arch-specific ``sm_XYa`` (``sm_90a``, ``sm_100a``, ...; X >= 9): code using
  architecture-specific instructions (wgmma, tcgen05) that runs on compute capability
  exactly X.Y. Never claimed by default: a kernel declares it with ``arches=("sm_90a",)``.

Pure Python: nothing here imports CuPy or touches a GPU.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Sequence

#: The lowest target a kernel can claim (Volta); CUDA 13's NVRTC starts at sm_75.
MIN_ARCH = 70
#: Arch-specific (``a``) targets exist from Hopper on.
MIN_ARCH_SPECIFIC = 90
#: Used when NVRTC is not installed: the targets NVRTC 12.9 supports at or above sm_70.
FALLBACK_ARCHES: tuple[int, ...] = (70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121)

_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(?:(\d+)\.(\d)|(\d{2,3}))(a?)$")


def parse_arch(text: str) -> tuple[int, int, bool]:
    """``"sm_90a"``, ``"90a"``, ``"9.0a"`` -> ``(9, 0, True)``; ``"sm_120"`` -> ``(12, 0, False)``.
    Raises ValueError for anything else."""
    m = _ARCH_RE.match(str(text).strip().lower())
    if m is None:
        raise ValueError(f"{text!r} is not an architecture; write sm_<major><minor>, e.g. sm_80, or sm_90a")
    if m.group(3):
        major, minor = divmod(int(m.group(3)), 10)
    else:
        major, minor = int(m.group(1)), int(m.group(2))
    return major, minor, bool(m.group(4))


def arch_name(major: int, minor: int, specific: bool = False) -> str:
    return f"sm_{major}{minor}{'a' if specific else ''}"


def normalize(text: str) -> str:
    """The canonical spelling: ``"90a"`` -> ``"sm_90a"``."""
    return arch_name(*parse_arch(text))


def is_arch_specific(arch: str) -> bool:
    return parse_arch(arch)[2]


def compute_capability(arch: str) -> tuple[int, int]:
    major, minor, _ = parse_arch(arch)
    return major, minor


def _number(major: int, minor: int) -> int:
    return major * 10 + minor


def claimable_arches(supported: Iterable[int]) -> tuple[str, ...]:
    """Every target a kernel can claim given NVRTC's supported numbers (``[75, 80, 90, ...]``):
    the generic ones from sm_70 up, each followed by its arch-specific twin from sm_90 on."""
    out: list[str] = []
    for number in sorted({int(n) for n in supported}):
        if number < MIN_ARCH:
            continue
        major, minor = divmod(number, 10)
        out.append(arch_name(major, minor))
        if number >= MIN_ARCH_SPECIFIC:
            out.append(arch_name(major, minor, True))
    return tuple(out)


@lru_cache(maxsize=1)
def nvrtc_supported() -> tuple[tuple[int, ...], str]:
    """(supported arch numbers, where the list came from): the installed NVRTC's own list,
    else :data:`FALLBACK_ARCHES` with the reason."""
    try:
        from cuda.bindings import nvrtc  # lazy: CUDA's bindings (the plugin loads with no GPU)

        err, numbers = nvrtc.nvrtcGetSupportedArchs()
        if int(err) != 0:
            raise RuntimeError(repr(err))
        _, major, minor = nvrtc.nvrtcVersion()
        return tuple(int(n) for n in numbers), f"NVRTC {int(major)}.{int(minor)}"
    except Exception as exc:  # ImportError (no cuda.bindings), or a broken NVRTC library
        reason = "cuda.bindings is not installed" if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}"
        return FALLBACK_ARCHES, f"no NVRTC ({reason}); the list NVRTC 12.9 supports"


def installed_arches() -> tuple[str, ...]:
    """The claimable targets on this machine (see :func:`nvrtc_supported`)."""
    return claimable_arches(nvrtc_supported()[0])


def default_claims(min_cc: Sequence[int], claimable: Iterable[str] | None = None) -> tuple[str, ...]:
    """What a kernel claims when it declares no ``arches``: every generic target at or above
    ``min_cc`` (never an arch-specific one)."""
    floor = (int(min_cc[0]), int(min_cc[1]))
    targets = installed_arches() if claimable is None else tuple(claimable)
    return tuple(a for a in targets if not is_arch_specific(a) and compute_capability(a) >= floor)


def arch_claimed_on(arch: str, device_cc: Sequence[int]) -> bool:
    """Whether code built for ``arch`` is claimed on a GPU of compute capability ``device_cc``:
    a generic target on that capability or a later one, an arch-specific target (``sm_90a``)
    only on exactly its own."""
    major, minor, specific = parse_arch(arch)
    cc = (int(device_cc[0]), int(device_cc[1]))
    return cc == (major, minor) if specific else cc >= (major, minor)


def not_claimed_reason(kernel_name: str, arch: str, declared: Sequence[str] | None, min_cc: Sequence[int],
                       claimable: Iterable[str] | None = None) -> str:
    """Why ``kernel_name`` does not claim ``arch``: the true cause, for a skip reason."""
    arch = normalize(arch)
    targets = installed_arches() if claimable is None else tuple(claimable)
    if declared is not None:
        listed = ", ".join(declared) or "none"
        return (f"kernel {kernel_name!r} does not claim {arch}: it declares arches=({listed}); "
                f"add {arch!r} to arches to claim it")
    if is_arch_specific(arch):
        return (f"kernel {kernel_name!r} does not claim {arch}: arch-specific targets are claimed only when "
                f"declared, e.g. arches=({arch!r},), and run only on compute capability "
                f"{'.'.join(map(str, compute_capability(arch)))}")
    if arch not in targets:
        return f"kernel {kernel_name!r} does not claim {arch}: the installed NVRTC cannot compile for it"
    major, minor = int(min_cc[0]), int(min_cc[1])
    return f"kernel {kernel_name!r} does not claim {arch}: it is below the kernel's min_cc=({major}, {minor})"


def unsupported_reason(arch: str) -> str | None:
    """None when the installed NVRTC can compile for ``arch``; else why not and what to do."""
    numbers, source = nvrtc_supported()
    major, minor, _ = parse_arch(arch)
    if _number(major, minor) in numbers:
        return None
    newest = arch_name(*divmod(max(numbers), 10)) if numbers else "none"
    return (f"{source} cannot compile for {normalize(arch)} (it knows up to {newest}); "
            f"install a newer CUDA extra, e.g. pip install 'pytest-gemm[cuda13]'")
