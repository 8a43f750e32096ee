"""Python launchers whose GPU launches the launch trace must see (tests/test_launches_gpu.py):

- ``calls_cupy_matmul``: ``cupy.matmul`` (cuBLAS) as a student's kernel; under the course
  setting ``--gemm-own-kernel`` every check fails as ``vendor_kernel``, naming cuBLAS's kernels.
- ``merged_launch``: the leaderboard cheat: after the correctness checks' calls at a shape (at most 11), it launches
  nothing and lets one launch on every 15th call compute the 15 calls' outputs (one launch
  serving 15 calls): ``timing_escape``, "fewer launches than calls".
- ``split_k``: an honest two-kernel split-K launcher (``splitk_partial<16>`` then
  ``splitk_reduce``): listed as two kernels, and not flagged.
- ``cupy_graph``: an honest CUDA-graph launcher: at its first call for given buffers, shape and
  scalars it captures one launch of ``graph_gemm`` (``graph.cu``) on a stream of its own
  (``begin_capture``/``end_capture``: nothing runs), then every call, that first one included,
  replays the graph on the caller's stream (``graph.launch()``). A replay reads the buffers'
  current contents, so it is right for new values in the same buffers. CUPTI reports each
  replayed kernel with the correlation id of its ``cudaGraphLaunch``, made inside the call: the
  trace lists ``graph_gemm`` once per call, and it passes.
"""
from __future__ import annotations

from pathlib import Path

from pytest_gemm import kernel

HERE = Path(__file__).resolve().parent
BATCH = 15          # calls one merged launch serves
HONEST_CALLS = 11   # calls at a shape computed honestly first: the correctness checks of one shape make at
                    # most 11 together (tests/untrusted first_call_only), so only the timed calls see the batching
_MODULES: dict[str, object] = {}


def _module(name: str, **kwargs: object) -> object:
    import cupy

    if name not in _MODULES:
        _MODULES[name] = cupy.RawModule(code=(HERE / f"{name}.cu").read_text(), **kwargs)
    return _MODULES[name]


@kernel(precision="fp32", name="calls_cupy_matmul")
def calls_cupy_matmul(a, b, c):
    import cupy

    cupy.matmul(a, b, out=c)


_PENDING: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}
_SEEN: dict[tuple[int, int, int], int] = {}


def _merged(calls: list[tuple[int, int, int]], m: int, n: int, k: int) -> None:
    import cupy
    import numpy as np

    fn = _module("merged").get_function("merged_gemm")
    ptrs = [cupy.asarray(np.array(p, dtype=np.uint64)) for p in zip(*calls)]  # copies, not kernels
    fn(((n + 15) // 16, (m + 15) // 16, len(calls)), (16, 16), (*ptrs, np.int32(m), np.int32(n), np.int32(k)))


@kernel(precision="fp32", name="merged_launch")
def merged_launch(a, b, c):
    m, k = a.shape
    n = b.shape[1]
    key = (m, n, k)
    _SEEN[key] = _SEEN.get(key, 0) + 1
    call = (a.data.ptr, b.data.ptr, c.data.ptr)
    if _SEEN[key] <= HONEST_CALLS:
        _merged([call], m, n, k)
        return
    pending = _PENDING.setdefault(key, [])
    pending.append(call)
    if len(pending) == BATCH:  # one launch for the 15 calls
        _merged(pending, m, n, k)
        pending.clear()


@kernel(precision="fp32", name="split_k")
def split_k(a, b, c):
    import cupy
    import numpy as np

    m, k = a.shape
    n = b.shape[1]
    module = _module("splitk", options=("-std=c++17",), name_expressions=("splitk_partial<16>",))
    partial = module.get_function("splitk_partial<16>")
    reduce = module.get_function("splitk_reduce")
    work = cupy.empty(2 * m * n, dtype=cupy.float32)
    partial(((n + 15) // 16, (m + 15) // 16, 2), (16, 16), (a, b, work, np.int32(m), np.int32(n), np.int32(k)))
    count = m * n
    reduce(((count + 255) // 256,), (256,), (work, c, np.int64(count)))


GRAPH_CACHE = 256   # graphs kept (oldest dropped first): one per (buffers, shape, scalars)
_GRAPHS: dict[tuple[object, ...], object] = {}


def _captured(key: tuple[object, ...], launch: object) -> object:
    """The graph of ``launch()`` (CuPy launches on the current stream), captured on a stream of
    its own the first time ``key`` is seen: a capture records the launch, it runs nothing."""
    import cupy

    graph = _GRAPHS.get(key)
    if graph is None:
        capture = cupy.cuda.Stream(non_blocking=True)  # non-blocking: no implicit join with the legacy stream
        with capture:
            capture.begin_capture()
            try:
                launch()  # type: ignore[operator]
            finally:
                graph = capture.end_capture()
        if len(_GRAPHS) >= GRAPH_CACHE:
            _GRAPHS.pop(next(iter(_GRAPHS)))
        _GRAPHS[key] = graph
    return graph


@kernel(precision="fp32", name="cupy_graph")
def cupy_graph(a, b, c, alpha, beta):
    import numpy as np

    m, k = a.shape
    n = b.shape[1]
    alpha, beta = np.float32(alpha), np.float32(beta)
    fn = _module("graph").get_function("graph_gemm")  # loaded before any capture
    key = (a.data.ptr, b.data.ptr, c.data.ptr, m, n, k, alpha.tobytes(), beta.tobytes())
    graph = _captured(key, lambda: fn(((n + 15) // 16, (m + 15) // 16), (16, 16),
                                      (a, b, c, np.int32(m), np.int32(n), np.int32(k), alpha, beta)))
    graph.launch()  # type: ignore[attr-defined]  # on the current stream: the caller's
