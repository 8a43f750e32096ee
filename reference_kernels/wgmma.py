"""The Hopper rung's launcher: 12_wgmma.cu with its TMA tensor maps built on the host.

Why a Python launcher and not a plain CudaKernel: the kernel reads A and B through TMA, and a
TMA copy needs a tensor map (CUtensorMap: 128 opaque bytes naming the address, sizes, strides,
box and swizzle) built on the host by the driver (cuTensorMapEncodeTiled) and passed by value.
The harness launches CudaKernels with the fixed arguments A, B, C, M, N, K, so this rung
launches itself:

- 12_wgmma.cu is compiled with the project's compiler (NVRTC, ``pytest_gemm.kernels.compiler``) for
  ``sm_90a`` and loaded through CuPy, like every rung;
- the tensor maps are encoded and the kernel launched through ``ctypes`` on ``libcuda.so.1``,
  which every machine with an NVIDIA driver has: no dependency on a particular cuda-python
  version (CuPy 13/14 cannot pass a 128-byte struct by value, and cuda.bindings' driver module
  may be missing or of another major than the driver's). Launches go on CuPy's current stream.

The cooperative build also stores C with TMA (its epilogue, ``STORE_BUFFERS``), so it gets a
third tensor map, of C in fp32. Shapes the TMA path cannot take (K or N not a multiple of 8: TMA
needs 16-byte row strides; A, B or C not 16-byte aligned) run ``gemm_wgmma_tail``, a plain tiled
kernel in the same file.

CuPy and ctypes' driver calls are reached only when a launcher is called, so importing this
module never touches CUDA.
"""
from __future__ import annotations

import ctypes
import tempfile
from pathlib import Path
from typing import Any

from pytest_gemm.model.contract import CudaKernel

ARCH = "sm_90a"
BM, BN, BK, B_BOX = 128, 256, 64, 64   # block tile, K slice, TMA box width of B (12_wgmma.cu)
C_BOX_ROWS, C_BOX_COLS = 64, 32         # a TMA-store box of C: a consumer's 64 rows x 32 fp32 (12_wgmma.cu)
THREADS = 384                          # one producer and two consumer warpgroups
TAIL_TILE = 64                         # gemm_wgmma_tail: 64 x 64 tiles of 256 threads
STAGES = 4                             # K slices in the ring (-DWG_STAGES)
GROUP_M = 16                           # tile rows per group of the persistent walk (-DWG_GROUP_M)
CLUSTER = 1                            # blocks per cluster sharing (multicasting) B tiles: 1 in the rung
SOURCE = "12_wgmma.cu"                 # the rung's source: clusters of one block only; the bench's copy,
                                       # bench/candidates/wgmma_clusters.cu, also builds clusters of 2 (-DWG_CLUSTER)
PINGPONG = False                       # build variant: a 64 x 256 tile per consumer, turns (-DWG_PINGPONG)
STORE_BUFFERS = 2                      # the epilogue: C through N shared 64 x 32 boxes a consumer and TMA
                                       # stores; 0: from registers, float2 stores (-DWG_STORE_BUFFERS)
C_BOX_BYTES = C_BOX_ROWS * C_BOX_COLS * 4  # one box of the TMA-store epilogue
# What the rung runs for a problem whose 128 x 256 tiles are at most one per SM (one wave: 2048^3
# is 128 tiles on the H200's 132 SMs): the ping-pong build with 5 stages. With one tile a block
# the cooperative build ends on an epilogue that nothing overlaps; in ping-pong one consumer's
# stores overlap the other's K loop. Measured on the H200 (bench/wgmma_try.py, 2026-12-02, both
# builds and cuBLAS in one process): 2048^3 0.987 of cuBLAS fp16 and 0.977 bf16, against 0.943
# and 0.946 for the cooperative build as it was then (C stored from registers; its TMA store
# overlaps the next tile, and here there is none: not measured at 2048^3); at 4096^3 and 8192^3
# ping-pong was slower (0.89-0.95 against 0.97-0.99: each 64-row tile reads all 256 columns of B,
# 5/3 the L2 traffic a flop), so bigger problems keep the cooperative build.
ONE_WAVE_BUILD = {"stages": 5, "group_m": GROUP_M, "cluster": 1, "pingpong": True, "store_buffers": 0}

# cuda.h enum values (CUtensorMapDataType, ...Swizzle, ...L2promotion, ...FloatOOBfill).
_DTYPE = {"fp16": 6, "bf16": 9, "fp32": 7}
_ITEMSIZE = {"fp16": 2, "bf16": 2, "fp32": 4}
_SWIZZLE_128B = 3
_L2_PROMOTION_256B = 3
_OOB_FILL_ZERO = 0


def tile_rows(pingpong: bool = PINGPONG) -> int:
    """Rows of gemm_wgmma's tile (and of its TMA box of A): 128, or 64 a consumer in ping-pong."""
    return BM // 2 if pingpong else BM


def smem_bytes(stages: int = STAGES, pingpong: bool = PINGPONG, store_buffers: int = STORE_BUFFERS) -> int:
    """Dynamic shared memory of gemm_wgmma: the stages, the TMA-store epilogue's staging buffers,
    2 barriers a stage (and the two consumers' turn barriers in ping-pong), 1 KB to align."""
    return (stages * (tile_rows(pingpong) * BK + BK * BN) * 2 + 2 * store_buffers * C_BOX_BYTES
            + 2 * stages * 8 + (16 if pingpong else 0) + 1024)


def _options(precision: str, stages: int, group_m: int, cluster: int, pingpong: bool,
             store_buffers: int = 0) -> tuple[str, ...]:
    return (f"-DWG_BF16={int(precision == 'bf16')}", f"-DWG_STAGES={stages}", f"-DWG_GROUP_M={group_m}") \
        + ((f"-DWG_CLUSTER={cluster}",) if cluster != 1 else ()) + (("-DWG_PINGPONG=1",) if pingpong else ()) \
        + (f"-DWG_STORE_BUFFERS={store_buffers}",)


def _source(cluster: int, source: str | None) -> str:
    """The .cu file of a build: ``source`` if given, else the rung's, which has no clusters."""
    if source is not None:
        return source
    if cluster != 1:
        raise ValueError(f"{SOURCE} builds no clusters (cluster={cluster}): pass source= the bench's copy, "
                         "bench/candidates/wgmma_clusters.cu, which does")
    return SOURCE


def _items(m: int, n: int, cluster: int, pingpong: bool = PINGPONG) -> int:
    """Work items of gemm_wgmma: ``cluster`` vertically adjacent tiles (128 or 64 x 256) each."""
    return -(-m // (tile_rows(pingpong) * cluster)) * -(-n // BN)


def main_kernel(precision: str = "fp16", stages: int = STAGES, group_m: int = GROUP_M,
                cluster: int = CLUSTER, pingpong: bool = PINGPONG, store_buffers: int = STORE_BUFFERS,
                source: str | None = None) -> CudaKernel:
    """gemm_wgmma as a CudaKernel, for compiling (the launcher caps its grid at what fits at once);
    ``source``: another .cu file with the same knobs (the bench's copy, for clusters)."""
    return CudaKernel(
        source=_source(cluster, source), entry="gemm_wgmma", block=(THREADS,),
        grid=lambda m, n, k: (cluster * _items(m, n, cluster, pingpong), 1, 1),
        precision=precision, min_cc=(9, 0), shared_mem=smem_bytes(stages, pingpong, store_buffers),
        options=_options(precision, stages, group_m, cluster, pingpong, store_buffers), arches=(ARCH,),
        name=f"wgmma-{precision}-main" + (f"-pingpong-s{stages}" if pingpong else "")
        + (f"-store-b{store_buffers}" if store_buffers != (0 if pingpong else STORE_BUFFERS) else ""),
    )


def tail_kernel(precision: str = "fp16", stages: int = STAGES, group_m: int = GROUP_M,
                cluster: int = CLUSTER, pingpong: bool = PINGPONG, store_buffers: int = STORE_BUFFERS,
                source: str | None = None) -> CudaKernel:
    """gemm_wgmma_tail (the path for shapes TMA cannot take) as a CudaKernel."""
    return CudaKernel(
        source=_source(cluster, source), entry="gemm_wgmma_tail", block=(256,), tile=(TAIL_TILE, TAIL_TILE),
        precision=precision, min_cc=(9, 0),
        options=_options(precision, stages, group_m, cluster, pingpong, store_buffers),
        arches=(ARCH,), name=f"wgmma-{precision}-tail",
    )


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h), for cuOccupancyMaxActiveClusters."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


class _Driver:
    """The two driver entry points the launcher needs, through ctypes."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self.encode = lib.cuTensorMapEncodeTiled
        self.encode.restype = ctypes.c_int
        self.encode.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ]
        self.launch = lib.cuLaunchKernel
        self.launch.restype = ctypes.c_int
        self.launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        self.max_active_clusters = lib.cuOccupancyMaxActiveClusters
        self.max_active_clusters.restype = ctypes.c_int
        self.max_active_clusters.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p,
                                             ctypes.POINTER(_LaunchConfig)]
        self._error_name = lib.cuGetErrorName
        self._error_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def check(self, status: int, what: str) -> None:
        if status:
            name = ctypes.c_char_p()
            self._error_name(status, ctypes.byref(name))
            raise RuntimeError(f"{what} failed: {(name.value or b'?').decode()} ({status})")


class TensorMap:
    """A CUtensorMap for a row-major (rows, cols) matrix of ``dtype`` (fp16, bf16: A and B; fp32:
    C, for the TMA-store epilogue) copied in (box_rows, box_cols) boxes, 128-byte swizzled, zeros
    read outside the matrix (and nothing written there)."""

    def __init__(self, driver: _Driver, ptr: int, rows: int, cols: int, box_rows: int, box_cols: int,
                 dtype: str):
        self._raw = ctypes.create_string_buffer(128 + 64)
        self.address = (ctypes.addressof(self._raw) + 63) & ~63   # CUtensorMap is 64-byte aligned
        dims = (ctypes.c_uint64 * 2)(cols, rows)                  # innermost first
        strides = (ctypes.c_uint64 * 1)(cols * _ITEMSIZE[dtype])  # bytes between rows
        box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
        unit = (ctypes.c_uint32 * 2)(1, 1)
        driver.check(driver.encode(self.address, _DTYPE[dtype], 2, ptr, dims, strides, box, unit, 0,
                                   _SWIZZLE_128B, _L2_PROMOTION_256B, _OOB_FILL_ZERO),
                     f"cuTensorMapEncodeTiled({rows} x {cols}, box {box_rows} x {box_cols})")


class WgmmaLauncher:
    """Writes ``a @ b`` into ``c`` (CuPy arrays, a (M, K) and b (K, N) as float16 or bf16 bit
    patterns in uint16, c (M, N) float32) with gemm_wgmma, or gemm_wgmma_tail where TMA cannot."""

    def __init__(self, precision: str, stages: int = STAGES, group_m: int = GROUP_M, cluster: int = CLUSTER,
                 pingpong: bool = PINGPONG, store_buffers: int = STORE_BUFFERS, source: str | None = None):
        self.precision, self.stages, self.group_m, self.cluster = precision, stages, group_m, cluster
        self.pingpong, self.store_buffers, self.source = pingpong, store_buffers, _source(cluster, source)
        self._smem = smem_bytes(stages, pingpong, store_buffers)
        self._loaded: dict[int, tuple[Any, Any, int]] = {}   # device -> (main, tail, clusters at once)
        self._maps: dict[tuple, TensorMap] = {}
        self._driver: _Driver | None = None

    def _functions(self) -> tuple[Any, Any, int]:
        import cupy  # lazy: the ladder's declarations load with no GPU (compile checks in CI)

        from pytest_gemm.kernels.compiler import compile_for_arch  # lazy: NVRTC, only when it runs

        device = cupy.cuda.Device()
        if device.id not in self._loaded:
            cc = device.compute_capability
            if cc != "90":
                raise RuntimeError(f"wgmma-{self.precision} is built for {ARCH}: it runs on compute "
                                   f"capability 9.0 only, and this GPU is {cc[:-1]}.{cc[-1]}")
            functions = []
            build = (self.precision, self.stages, self.group_m, self.cluster, self.pingpong, self.store_buffers)
            for kernel in (main_kernel(*build, source=self.source), tail_kernel(*build, source=self.source)):
                compiled = compile_for_arch(kernel, ARCH)
                path = Path(tempfile.mkdtemp(prefix="gemm-")) / f"{kernel.entry}.cubin"
                path.write_bytes(compiled.code)
                module = cupy.RawModule(path=str(path))
                functions.append((module, module.get_function(compiled.lowered_name)))
            main = functions[0][1]
            main.max_dynamic_shared_size_bytes = self._smem
            self._modules = functions
            self._driver = self._driver or _Driver()
            self._loaded[device.id] = (main, functions[1][1], self._clusters_at_once(main, device))
        return self._loaded[device.id]

    def _clusters_at_once(self, main: Any, device: Any) -> int:
        """How many blocks (clusters of blocks) run at once: the persistent grid's size. Clusters
        must fit inside one GPC, so with clusters of 2 an odd SM out per GPC stays idle."""
        sms = int(device.attributes["MultiProcessorCount"])
        if self.cluster == 1:
            return sms
        assert self._driver is not None
        config = _LaunchConfig(sms - sms % self.cluster, 1, 1, THREADS, 1, 1, self._smem, None, None, 0)
        count = ctypes.c_int(0)
        if self._driver.max_active_clusters(ctypes.byref(count), main.kernel.ptr, ctypes.byref(config)) \
                or count.value < 1:
            return sms // self.cluster  # the query failed: assume every SM takes part
        return count.value

    def _map(self, ptr: int, rows: int, cols: int, box_rows: int, box_cols: int, dtype: str) -> TensorMap:
        key = (ptr, rows, cols, box_rows, box_cols, dtype)
        found = self._maps.get(key)
        if found is None:
            if len(self._maps) >= 64:
                self._maps.clear()
            assert self._driver is not None
            found = self._maps[key] = TensorMap(self._driver, ptr, rows, cols, box_rows, box_cols, dtype)
        return found

    def __call__(self, a: Any, b: Any, c: Any) -> None:
        import cupy
        import numpy as np

        m, k = a.shape
        k2, n = b.shape
        if k2 != k or tuple(c.shape) != (m, n) or a.dtype.itemsize != 2 or b.dtype.itemsize != 2 \
                or c.dtype != np.float32:
            raise ValueError(f"wgmma-{self.precision}: expects a (M, K), b (K, N) of 2-byte elements and "
                             f"c (M, N) float32; got {a.shape} {a.dtype}, {b.shape} {b.dtype}, {c.shape} {c.dtype}")
        if not (a.flags.c_contiguous and b.flags.c_contiguous and c.flags.c_contiguous):
            raise ValueError(f"wgmma-{self.precision}: a, b and c must be C-contiguous")
        if m == 0 or n == 0:
            return
        main, tail, at_once = self._functions()
        stream = cupy.cuda.get_current_stream()
        if not tma_ok(a, b, c if self.store_buffers else None):
            grid = (-(-n // TAIL_TILE), -(-m // TAIL_TILE), 1)
            tail(grid, (256, 1, 1), (a, b, c, np.int32(m), np.int32(n), np.int32(k)), stream=stream)
            return
        maps = [self._map(a.data.ptr, m, k, tile_rows(self.pingpong), BK, self.precision),
                self._map(b.data.ptr, k, n, BK, B_BOX, self.precision)]
        if self.store_buffers:  # C in the epilogue's boxes
            maps.append(self._map(c.data.ptr, m, n, C_BOX_ROWS, C_BOX_COLS, "fp32"))
        blocks = self.cluster * min(_items(m, n, self.cluster, self.pingpong), at_once)
        c_ptr = ctypes.c_uint64(c.data.ptr)
        dims = [ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k)]
        params = (ctypes.c_void_p * (len(maps) + 4))(*(t.address for t in maps), ctypes.addressof(c_ptr),
                                                     *(ctypes.addressof(v) for v in dims))
        assert self._driver is not None
        self._driver.check(
            self._driver.launch(main.kernel.ptr, blocks, 1, 1, THREADS, 1, 1, self._smem, stream.ptr, params, None),
            f"cuLaunchKernel(gemm_wgmma, {m} x {n} x {k})")


def tma_ok(a: Any, b: Any, c: Any = None) -> bool:
    """Whether gemm_wgmma can read A and B (and write ``c``, given for the TMA-store build) through
    TMA: 16-byte row strides (K and N multiples of 8) and 16-byte aligned bases. Otherwise
    gemm_wgmma_tail runs."""
    k, n = b.shape
    return k % 8 == 0 and n % 8 == 0 and a.data.ptr % 16 == 0 and b.data.ptr % 16 == 0 \
        and (c is None or c.data.ptr % 16 == 0)


def one_wave(m: int, n: int, sms: int) -> bool:
    """Whether the cooperative build's 128 x 256 tiles of an M x N output are at most one per SM."""
    return _items(m, n, 1) <= sms


_LAUNCHERS: dict[tuple[str, bool], WgmmaLauncher] = {}
_SMS: dict[int, int] = {}   # device -> SM count


def launch(precision: str, a: Any, b: Any, c: Any) -> None:
    """``c = a @ b`` with the rung for ``precision`` (fp16 or bf16): the ping-pong build
    (ONE_WAVE_BUILD) for a one-wave problem that TMA can read, the cooperative build otherwise
    (its tail kernel for the shapes TMA cannot take)."""
    import cupy

    device = cupy.cuda.Device().id
    if device not in _SMS:
        _SMS[device] = int(cupy.cuda.Device(device).attributes["MultiProcessorCount"])
    small = a.ndim == 2 and b.ndim == 2 and tma_ok(a, b) and one_wave(a.shape[0], b.shape[1], _SMS[device])
    if (precision, small) not in _LAUNCHERS:
        _LAUNCHERS[precision, small] = WgmmaLauncher(precision, **ONE_WAVE_BUILD) if small \
            else WgmmaLauncher(precision)
    _LAUNCHERS[precision, small](a, b, c)


__all__ = ["WgmmaLauncher", "TensorMap", "main_kernel", "tail_kernel", "smem_bytes", "launch",
           "ARCH", "SOURCE", "STAGES", "GROUP_M", "CLUSTER", "PINGPONG", "STORE_BUFFERS", "ONE_WAVE_BUILD", "tile_rows",
           "tma_ok", "one_wave"]
