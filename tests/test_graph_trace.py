"""CUDA-graph launchers in the launch trace, with no GPU: synthetic CUPTI records as CUPTI delivers
them for a graph captured once and replayed on every call (tests/launches ``cupy_graph`` is the
same launcher on the GPU, tests/test_launches_gpu.py).

What CUPTI does (public sources: wolfpld/tracy#1318 and #1330, instrumented on an H100, CUDA
13.1): a replayed graph's kernels come as ``CONCURRENT_KERNEL`` records, all of one
``cudaGraphLaunch`` sharing that launch's correlation id; a capture's launches make API records
and no kernel record (nothing runs); ``GRAPH_TRACE`` would replace the kernel records with one per
graph, so measure/trace.py does not enable it."""
from __future__ import annotations

from typing import Any

from test_launch_trace import _Kind, _api_record, _kernel_record, fake_cupti  # noqa: F401 - the fixture

from pytest_gemm.judges.launches import CallWindow, Launch, call_escape, group, summary_line
from pytest_gemm.measure.trace import attribute

MS = 1_000_000


def _kernel(name: str, corr: int, start: int) -> Launch:
    return Launch(name, (64, 64, 1), (16, 16, 1), 32, 0, 0, start, start + MS, 7, corr)


def _windows(n: int) -> list[CallWindow]:
    """n calls, 10 ms apart, each awaited 5 ms after it returned."""
    return [CallWindow(i, i * 10 * MS, i * 10 * MS + MS, i * 10 * MS + 6 * MS) for i in range(n)]


def test_a_replayed_graph_s_kernels_belong_to_the_call_that_launched_it():
    calls = _windows(3)
    # call 0 captures (its cuLaunchKernel, correlation 5, makes no kernel record) then launches the
    # graph (correlation 6); calls 1 and 2 replay it (9 and 12). Two kernels a graph, one correlation a replay.
    api = {5: 100, 6: 200, 9: 10 * MS + 100, 12: 20 * MS + 100}
    kernels = [_kernel(name, corr, at) for corr, at in ((6, 2 * MS), (9, 12 * MS), (12, 22 * MS))
               for name in ("graph_partial", "graph_reduce")]
    launches = attribute(kernels, api, calls)
    assert [x.call for x in launches] == [0, 0, 1, 1, 2, 2]
    assert call_escape(calls, launches) is None  # two launches a call, each ended before its call was awaited
    assert summary_line(group(launches)) == "6 launches: graph_partial x3, graph_reduce x3"


def test_correlation_id_zero_is_no_match():
    """CUPTI's 0 is "no correlation": a kernel record carrying it was launched by no API call of
    ours, even if some API record in a call also says 0 (before: attributed to that call)."""
    calls = _windows(2)
    launches = attribute([_kernel("graph_gemm", 0, 2 * MS), _kernel("graph_gemm", 4, 12 * MS)],
                         {0: 100, 4: 10 * MS + 100}, calls)
    assert [x.call for x in launches] == [None, 1]


def test_a_graph_launcher_traced_through_cupti_lists_its_kernel_once_per_call(fake_cupti):  # noqa: F811
    """The session (measure/trace.py) as the speed check runs it: the first call captures and
    launches the graph, every later call replays it; the capture is no launch, and the calls
    and their launches agree (no "fewer launches than calls")."""
    from pytest_gemm.checks.launch_trace import reject_traced_escape, traced
    from pytest_gemm.measure import trace

    facts: dict[str, Any] = {}
    corr = 100
    with traced(object(), {"trace": "on"}, facts):
        for i in range(5):
            trace.call_entered()
            now = fake_cupti.clock[0] + 1
            if i == 0:  # cudaStreamBeginCapture, the captured cuLaunchKernel, cudaStreamEndCapture: API records only
                fake_cupti.records += [_api_record(corr + j, now) for j in range(3)]
                corr += 3
            fake_cupti.records += [_api_record(corr, now), _kernel_record("graph_gemm", corr, now + 500, now + 900)]
            corr += 1
            trace.call_returned()
            trace.call_awaited()
        reject_traced_escape("cupy_graph", "at 1024x1024x1024: ")  # raises on a disagreement
    launches = facts["launches"]
    assert (launches["calls"], launches["launches"], launches["harness_launches"]) == (5, 5, 0)
    assert launches["summary"] == "5 launches: graph_gemm x5"


def test_the_trace_never_enables_graph_level_records(fake_cupti):  # noqa: F811
    """GRAPH_TRACE would replace the per-kernel records of a graph by one record per graph."""
    from pytest_gemm.checks.launch_trace import traced
    from pytest_gemm.measure import trace

    seen: set[int] = set()
    enable = fake_cupti.mod.activity_enable
    fake_cupti.mod.activity_enable = lambda kind: (seen.add(kind), enable(kind))
    with traced(object(), {"trace": "on"}, {}):
        trace.call_entered()
        trace.call_returned()
    assert seen == {_Kind.CONCURRENT_KERNEL, _Kind.DRIVER, _Kind.RUNTIME}
