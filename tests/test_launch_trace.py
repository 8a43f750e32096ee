"""The launch trace with no GPU: the pure judges (judges/launches.py) on plain records, the CUPTI
session (measure/trace.py) against a fake ``cupti`` binding, the path with no CUPTI at all, and
the outputs (terminal lines, JSON report against its schema, JUnit, Gradescope)."""
from __future__ import annotations

import enum
import os
import sys
import types
from typing import Any

import pytest

from pytest_gemm.judges.launches import (CallWindow, Launch, call_escape, demangle, group, kernel_rate_escape, kernel_time_facts,
                                         short_name, summary_line, vendor_kernels)


def _launch(name: str, start: int, end: int, call: int | None, corr: int = 0) -> Launch:
    return Launch(name, (8, 8, 1), (16, 16, 1), 40, 2048, 0, start, end, 7, corr, call)


# ---- names and the summary line ------------------------------------------------------------

def test_demangle_uses_the_cxx_runtime_and_leaves_c_names_alone():
    assert demangle("_Z9my_kernelILi128ELi128EEvPKfS1_Pfiii") == \
        "void my_kernel<128, 128>(float const*, float const*, float*, int, int, int)"
    assert demangle("matmul_kernel") == "matmul_kernel"  # Triton, extern "C"
    assert demangle("_Znot_really") == "_Znot_really"  # not a valid mangled name: kept


def test_short_name_drops_return_type_and_parameters():
    assert short_name("void my_kernel<128, 128>(float const*, float*, int)") == "my_kernel<128,128>"
    assert short_name("void ns::k<(int)2>(Params)") == "ns::k<(int)2>"
    assert short_name("splitk_reduce") == "splitk_reduce"


def test_summary_line_counts_each_kernel():
    launches = [_launch("void my_kernel<128, 128>(float*)", 0, 10, 0), _launch("splitk_reduce", 10, 12, 0),
                _launch("void my_kernel<128, 128>(float*)", 20, 30, 1)]
    entries = group(launches)
    assert summary_line(entries) == "3 launches: my_kernel<128,128> x2, splitk_reduce x1"
    assert entries[0]["grids"] == [[8, 8, 1]] and entries[0]["registers"] == 40 and entries[0]["static_shared"] == 2048
    assert summary_line([]) == "no GPU kernel launched"


# ---- vendor kernels ------------------------------------------------------------------------

@pytest.mark.parametrize("name,library", [
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNN", "cuBLASLt"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float>(...)", "cuBLASLt"),
    ("ampere_sgemm_128x64_nn", "cuBLAS"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "cuBLAS"),
    ("void gemv2T_kernel_val<int, int, float>(...)", "cuBLAS"),
    ("void gemvx::kernel<int, int, float, false, true>(...)", "cuBLAS"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)", "CUTLASS"),
    ("void cudnn::cnn::conv2d_grouped_direct_kernel<float>(...)", "cuDNN"),
])
def test_vendor_kernels_are_named_with_their_library(name, library):
    found = vendor_kernels(group([_launch(name, 0, 1, 0)]))
    assert [(lib, n) for _, lib, n in found] == [(library, 1)]


@pytest.mark.parametrize("name", ["matmul_kernel", "void my_kernel<128, 128>(float*)", "mm_tiled", "sgemm_naive",
                                  "splitk_reduce", "cupy_copy__float32_float32"])
def test_a_student_s_own_kernels_are_not_vendor_kernels(name):
    assert vendor_kernels(group([_launch(name, 0, 1, 0)])) == []


def test_a_course_lists_more_patterns():
    entries = group([_launch("magma_sgemm_kernel", 0, 1, 0)])
    assert vendor_kernels(entries) == []
    assert vendor_kernels(entries, (r"^magma_",)) == [("magma_sgemm_kernel", "course list", 1)]


# ---- calls against launches ----------------------------------------------------------------

MS = 1_000_000


def _calls(n: int, awaited: bool = True) -> list[CallWindow]:
    # call i: entered at 10*i ms, returned 0.1 ms later, awaited at 10*i + 2 ms
    return [CallWindow(i, 10 * i * MS, 10 * i * MS + MS // 10, 10 * i * MS + 2 * MS if awaited else None)
            for i in range(n)]


def test_an_honest_asynchronous_launcher_is_not_flagged():
    """Each kernel runs after its call returned (async on the timed stream) but before the
    harness's wait ended: that is what the harness awaits, never an escape."""
    calls = _calls(15)
    launches = [_launch("mm", 10 * i * MS + MS // 2, 10 * i * MS + int(1.9 * MS), i) for i in range(15)]
    assert call_escape(calls, launches) is None


def test_a_two_kernel_launcher_is_not_flagged():
    calls = _calls(5)
    launches = [x for i in range(5) for x in (_launch("gemm", 10 * i * MS + 200_000, 10 * i * MS + MS, i),
                                              _launch("reduce", 10 * i * MS + MS, 10 * i * MS + 1_200_000, i))]
    assert call_escape(calls, launches) is None
    facts = kernel_time_facts(calls, launches, event_ms=1.1)
    assert facts is not None and facts["kernel_ms"] == pytest.approx(1.0) and facts["launches_per_call"] == 2
    assert facts["overhead_ms"] == pytest.approx(0.1)


def test_one_launch_serving_fifteen_calls_is_fewer_launches_than_calls():
    calls = _calls(15)
    launches = [_launch("merged_gemm", MS // 2, int(1.5 * MS), 0)]
    summary, details = call_escape(calls, launches)
    assert summary.startswith("fewer launches than calls: 15 timed calls launched 1 GPU kernel (1 launch: merged_gemm x1)")
    assert "14 calls launched none" in summary and details


def test_work_running_after_the_harness_awaited_the_call_is_an_escape():
    calls = _calls(4)
    launches = [_launch("mm", 10 * i * MS + MS, 10 * i * MS + 5 * MS, i) for i in range(4)]  # ends 3 ms after the wait
    summary, _ = call_escape(calls, launches)
    assert summary.startswith("work still running after a call returned: in 4 of 4 timed calls")
    assert "mm: 3.000 ms after it" in summary


def test_untimed_calls_and_launchers_that_launch_nothing_are_not_judged():
    assert call_escape(_calls(3, awaited=False), [_launch("mm", 0, 100 * MS, 0)]) is None  # warm-up calls
    assert call_escape(_calls(3), []) is None  # copies only: no kernel at all
    assert call_escape(_calls(3), [_launch("fill", 0, 100 * MS, None)]) is None  # the harness's own launch


# A memoizing launcher on the H200 (tests/untrusted memoized at abd2fc4): each timed call at
# 4096^3 (137.4 GFLOP) launched reductions and a copy, 0.294 ms of GPU work; the fp32-accurate
# (3xTF32) roof was 178.4 TFLOP/s. By its events (0.76 ms a call) it was not over the roof.
GFLOP_4096 = 2 * 4096 ** 3


def test_kernels_too_brief_for_the_product_are_an_escape():
    calls = _calls(12)
    launches = [x for i in range(12) for x in (_launch("cupy_cub_sum", 10 * i * MS, 10 * i * MS + 100_000, i),
                                               _launch("cupy_copy", 10 * i * MS + 100_000, 10 * i * MS + 294_000, i))]
    summary, details = kernel_rate_escape(calls, launches, GFLOP_4096, 178.4, "fp32-accurate (3xTF32)", 1.05)
    assert summary.startswith("the kernels of a timed call ran 0.2940 ms on the GPU (median of 12 calls): 467.5 TFLOP/s, "
                              "faster than this GPU's fp32-accurate (3xTF32) roof (178.4 TFLOP/s)")
    assert "cupy_copy x12" in details[0]


def test_kernels_that_take_what_the_product_takes_are_not_flagged():
    # warptile at 4096^3: 2.76 ms a call, 49.8 TFLOP/s; a launcher whose kernel is at the roof itself
    calls = _calls(12)
    honest = [_launch("gemm", 10 * i * MS, 10 * i * MS + 2_760_000, i) for i in range(12)]
    assert kernel_rate_escape(calls, honest, GFLOP_4096, 178.4, "fp32", 1.05) is None
    at_roof = [_launch("gemm", 10 * i * MS, 10 * i * MS + 770_400, i) for i in range(12)]  # 178.4 TFLOP/s
    assert kernel_rate_escape(calls, at_roof, GFLOP_4096, 178.4, "fp32", 1.05) is None


def test_the_kernel_rate_is_not_judged_without_a_launch_in_every_call_or_a_roof():
    calls = _calls(3)
    brief = [_launch("copy", 10 * i * MS, 10 * i * MS + 1000, i) for i in range(3)]
    assert kernel_rate_escape(calls, brief[:2], GFLOP_4096, 178.4, "fp32", 1.05) is None  # call_escape's case
    assert kernel_rate_escape(calls, [], GFLOP_4096, 178.4, "fp32", 1.05) is None  # no kernel seen at all
    assert kernel_rate_escape(calls, brief, GFLOP_4096, 0.0, "fp32", 1.05) is None  # roof unknown
    assert kernel_rate_escape(_calls(3, awaited=False), brief, GFLOP_4096, 178.4, "fp32", 1.05) is None  # warm-up


# ---- the CUPTI session, against a fake binding ---------------------------------------------

class _Kind:
    CONCURRENT_KERNEL, KERNEL, DRIVER, RUNTIME = 10, 3, 5, 4


def _fake_cupti(records: list[Any], clock: list[int], refuse: bool = False) -> types.ModuleType:
    mod = types.ModuleType("cupti.cupti")
    mod.ActivityKind = _Kind
    callbacks: dict[str, Any] = {}
    mod.enabled = set()

    def register(requested, completed):
        callbacks["done"] = completed

    def enable(kind):
        if refuse:
            raise RuntimeError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
        mod.enabled.add(kind)

    def flush(flag):
        pending, records[:] = list(records), []
        if pending:
            callbacks["done"](pending)

    def timestamp():
        clock[0] += 1000
        return clock[0]

    mod.activity_register_callbacks = register
    mod.activity_enable = enable
    mod.activity_disable = lambda kind: mod.enabled.discard(kind)
    mod.activity_flush_all = flush
    mod.get_timestamp = timestamp
    return mod


def _kernel_record(name: str, corr: int, start: int, end: int) -> Any:
    return types.SimpleNamespace(kind=_Kind.CONCURRENT_KERNEL, name=name, grid_x=4, grid_y=2, grid_z=1, block_x=128,
                                 block_y=1, block_z=1, registers_per_thread=96, static_shared_memory=0,
                                 dynamic_shared_memory=49152, start=start, end=end, stream_id=7, correlation_id=corr)


def _api_record(corr: int, start: int) -> Any:
    return types.SimpleNamespace(kind=_Kind.DRIVER, correlation_id=corr, start=start, end=start + 10)


@pytest.fixture
def fake_cupti(monkeypatch):
    from pytest_gemm.measure import trace

    records: list[Any] = []
    clock = [0]
    mod = _fake_cupti(records, clock)
    package = types.ModuleType("cupti")
    package.cupti = mod
    monkeypatch.setitem(sys.modules, "cupti", package)
    monkeypatch.setitem(sys.modules, "cupti.cupti", mod)
    monkeypatch.setattr(trace, "_REGISTERED", False)
    monkeypatch.setattr(trace, "_NOT_LAUNCHING", [])
    monkeypatch.delenv(trace.TRACE_ENV, raising=False)
    monkeypatch.delenv(trace.API_ENV, raising=False)
    return types.SimpleNamespace(mod=mod, records=records, clock=clock)


class _DriverCbid(enum.IntEnum):  # a few of CUPTI's driver callback ids, as the binding names them
    INVALID, cuCtxGetCurrent, cuLaunchKernel, cuPointerGetAttribute, cuLaunchHostFunc, cuGraphLaunch, \
        cuLaunchKernelEx_ptsz, SIZE = range(8)


class _RuntimeCbid(enum.IntEnum):
    INVALID, cudaGetDevice_v3020, cudaLaunchKernel_v7000, cudaEventRecord_v3020, cudaLaunchCooperativeKernel_v9000, \
        SIZE = range(6)


def _with_call_switches(mod: types.ModuleType, forget_on_enable: bool = True) -> dict[str, set[int]]:
    """Give the fake binding CUPTI's per-call switches; returns the callback ids switched off,
    by kind. Like the H100's CUPTI at c43cd1e, it forgets them when a kind is enabled again."""
    off: dict[str, set[int]] = {"driver": set(), "runtime": set()}
    mod.driver_api_trace_cbid, mod.runtime_api_trace_cbid = _DriverCbid, _RuntimeCbid
    mod.activity_enable_driver_api = lambda cbid, on: (off["driver"].discard if on else off["driver"].add)(int(cbid))
    mod.activity_enable_runtime_api = lambda cbid, on: (off["runtime"].discard if on else off["runtime"].add)(int(cbid))
    enable = mod.activity_enable

    def enable_forgetting(kind: int) -> None:
        enable(kind)
        if forget_on_enable:
            off["driver" if kind == _Kind.DRIVER else "runtime" if kind == _Kind.RUNTIME else "none"] = set()

    mod.activity_enable = enable_forgetting
    return off


@pytest.mark.parametrize("name, launches", [
    ("cuLaunchKernel", True), ("cuLaunchKernelEx_ptsz", True), ("cuGraphLaunch", True),
    ("cudaLaunchKernel_v7000", True), ("_runtime_api_trace_cbid__cudaLaunchKernel_v13000", True),
    ("cudaLaunchCooperativeKernel_v9000", True), ("cuLaunchHostFunc", False), ("cudaLaunchHostFunc_v10000", False),
    ("cuPointerGetAttribute", False), ("cudaEventRecord_v3020", False), ("cuCtxGetCurrent", False),
])
def test_the_calls_that_launch_kernels_are_named_by_their_callback_ids(name, launches):
    from pytest_gemm.measure.trace import launch_api

    assert launch_api(name) is launches


def test_the_launching_calls_records_are_on_for_the_whole_check_and_no_other_calls(fake_cupti):
    """An autotuner's search made 25 other calls a launch (500,000 API records, 3 to 12 s to read in
    one check on an H100 at c43cd1e): only the launching calls' records are kept, for the whole
    check, and the switches are set again at every check (CUPTI forgot them between checks)."""
    from pytest_gemm.checks.launch_trace import traced
    from pytest_gemm.measure import trace

    off = _with_call_switches(fake_cupti.mod)
    for _ in range(2):  # a second check: the switches are set again
        facts: dict[str, Any] = {}
        with traced(object(), {"trace": "on"}, facts) as tracer:
            assert tracer is not None and tracer.whole_check
            assert {_Kind.CONCURRENT_KERNEL, _Kind.DRIVER, _Kind.RUNTIME} <= fake_cupti.mod.enabled
            assert off["driver"] == {_DriverCbid.cuCtxGetCurrent, _DriverCbid.cuPointerGetAttribute,
                                     _DriverCbid.cuLaunchHostFunc}
            assert off["runtime"] == {_RuntimeCbid.cudaGetDevice_v3020, _RuntimeCbid.cudaEventRecord_v3020}
            # the harness's own launch, outside every call: its launch record is kept, and it stays the harness's
            fake_cupti.records += [_api_record(1, fake_cupti.clock[0] + 1), _kernel_record("fill", 1, 0, 10)]
            trace.call_entered()
            inside = fake_cupti.clock[0] + 1
            fake_cupti.records += [_api_record(2, inside), _kernel_record("mine", 2, 10, 20)]
            trace.call_returned()
            assert _Kind.DRIVER in fake_cupti.mod.enabled  # not switched per call
        assert not fake_cupti.mod.enabled
        launches = facts["launches"]
        assert (launches["launches"], launches["harness_launches"], launches["api_records"]) == (1, 1, 2)
        assert launches["trace_s"] >= 0


def test_every_calls_records_while_the_launcher_runs_when_asked_or_without_the_switches(fake_cupti, monkeypatch):
    from pytest_gemm.checks.launch_trace import traced
    from pytest_gemm.measure import trace

    off = _with_call_switches(fake_cupti.mod)
    monkeypatch.setenv(trace.API_ENV, "all")
    with traced(object(), {"trace": "on"}, {}) as tracer:
        assert not tracer.whole_check and fake_cupti.mod.enabled == {_Kind.CONCURRENT_KERNEL}
        trace.call_entered()
        assert _Kind.DRIVER in fake_cupti.mod.enabled and not off["driver"]
        trace.call_returned()
    monkeypatch.delenv(trace.API_ENV)
    del fake_cupti.mod.activity_enable_driver_api  # an older binding
    with traced(object(), {"trace": "on"}, {}) as tracer:
        assert not tracer.whole_check and fake_cupti.mod.enabled == {_Kind.CONCURRENT_KERNEL}


def test_a_traced_check_keeps_the_kernel_s_launches_apart_from_the_harness_s(fake_cupti):
    from pytest_gemm.checks.launch_trace import traced
    from pytest_gemm.measure import trace

    facts: dict[str, Any] = {}
    with traced(object(), {"trace": "on"}, facts) as tracer:
        assert tracer is not None and trace.active() is tracer
        # kernel records for the whole check; API records only while the launcher runs (each API
        # record of the harness's own uploads and waits cost time, and says nothing of the kernel)
        assert fake_cupti.mod.enabled == {_Kind.CONCURRENT_KERNEL}
        fake_cupti.records.append(_kernel_record("fill", 1, 0, 10))  # the harness's fill: no API record
        trace.call_entered()
        assert {_Kind.CONCURRENT_KERNEL, _Kind.DRIVER, _Kind.RUNTIME} <= fake_cupti.mod.enabled
        inside = fake_cupti.clock[0] + 1
        fake_cupti.records += [_api_record(2, inside), _kernel_record("_Z9my_kernelILi128ELi128EEvPKfS1_Pfiii", 2, 0, 10),
                               _api_record(3, inside), _kernel_record("splitk_reduce", 3, 10, 12)]
        trace.call_returned()
        assert fake_cupti.mod.enabled == {_Kind.CONCURRENT_KERNEL}
    assert trace.active() is None and not fake_cupti.mod.enabled  # disabled after the check
    launches = facts["launches"]
    assert launches["summary"] == "2 launches: my_kernel<128,128> x1, splitk_reduce x1"
    assert (launches["calls"], launches["launches"], launches["harness_launches"]) == (1, 2, 1)
    assert launches["kernels"][0]["dynamic_shared"] == 49152 and launches["launcher"] == "cuda"


def test_the_speed_check_s_judge_reads_the_awaited_calls(fake_cupti):
    from pytest_gemm.checks.launch_trace import reject_traced_escape, traced
    from pytest_gemm.measure import trace
    from pytest_gemm.model.categories import GemmCheckFailure

    facts: dict[str, Any] = {}
    with pytest.raises(GemmCheckFailure) as caught, traced(object(), {"trace": "on"}, facts):
        for i in range(15):
            trace.call_entered()
            if i == 0:  # one merged launch on the first call serves all 15
                fake_cupti.records += [_api_record(1, fake_cupti.clock[0] + 1), _kernel_record("merged", 1, 0, 1)]
            trace.call_returned()
            trace.call_awaited()
        reject_traced_escape("merged", "at 64x64x64: ")
    assert caught.value.category == "timing_escape"
    assert "fewer launches than calls: 15 timed calls launched 1 GPU kernel" in caught.value.summary
    assert facts["launches"]["launches"] == 1  # recorded though the check failed


def test_the_speed_check_s_judge_finds_kernels_too_brief_for_the_product(fake_cupti):
    from pytest_gemm.checks.launch_trace import reject_traced_escape, traced
    from pytest_gemm.measure import trace
    from pytest_gemm.model.categories import GemmCheckFailure

    facts: dict[str, Any] = {}
    with pytest.raises(GemmCheckFailure) as caught, traced(object(), {"trace": "on"}, facts):
        for i in range(12):
            trace.call_entered()
            now = fake_cupti.clock[0]
            fake_cupti.records += [_api_record(100 + i, now + 1), _kernel_record("copy", 100 + i, now + 2, now + 2 + 1000)]
            trace.call_returned()
            trace.call_awaited()
        reject_traced_escape("memo", "at 64x64x64: ")  # no product given: nothing to compare with
        reject_traced_escape("memo", "at 64x64x64: ", 2 * 64 ** 3, 0.001, "fp32", 1.05)
    assert caught.value.category == "timing_escape"
    assert caught.value.summary.startswith("at 64x64x64: 'memo': the kernels of a timed call ran 0.0010 ms")


def test_no_cupti_binding_skips_the_trace_with_its_reason_and_changes_nothing(monkeypatch):
    from pytest_gemm.checks.launch_trace import reject_traced_escape, traced
    from pytest_gemm.measure import trace

    monkeypatch.setitem(sys.modules, "cupti", None)  # import cupti -> ImportError
    monkeypatch.delenv(trace.TRACE_ENV, raising=False)
    facts: dict[str, Any] = {"timing": {"median_ms": 1.0}}
    with traced(object(), {"own_kernel": True}, facts) as tracer:
        assert tracer is None
        trace.call_entered()  # the launcher's wrapper: a no-op
        trace.call_returned()
        reject_traced_escape("k")  # nothing to judge
    assert facts["timing"] == {"median_ms": 1.0}
    assert facts["launches"]["skipped"].startswith("no CUPTI: the cupti-python binding could not be imported")


def test_cupti_refusing_to_trace_is_a_skip_too(fake_cupti, monkeypatch):
    from pytest_gemm.checks.launch_trace import traced

    fake_cupti.mod.activity_enable = lambda kind: (_ for _ in ()).throw(RuntimeError("CUPTI_ERROR_NOT_INITIALIZED"))
    facts: dict[str, Any] = {}
    with traced(object(), {"trace": "on"}, facts) as tracer:
        assert tracer is None
    assert "CUPTI could not trace here" in facts["launches"]["skipped"]


def test_auto_traces_python_launchers_and_the_course_rule_not_a_cuda_c_kernel(fake_cupti):
    """--gemm-trace auto (the default): a CUDA C kernel is launched by pytest-gemm itself, once a
    call, so it is traced only when asked (on) or under the course's own-kernel rule."""
    from pytest_gemm.checks.launch_trace import traced
    from pytest_gemm.model.contract import CudaKernel, kernel

    cuda_c = CudaKernel(source="__global__ void k() {}", entry="k", block=(16, 16), tile=(16, 16))
    launcher = kernel()(lambda a, b, c: None)
    for k, options, on in [(cuda_c, {}, False), (cuda_c, {"trace": "auto"}, False), (cuda_c, {"trace": "on"}, True),
                           (cuda_c, {"own_kernel": True}, True), (launcher, {}, True)]:
        facts: dict[str, Any] = {}
        with traced(k, options, facts) as tracer:
            assert (tracer is not None) is on, (k, options)
        assert ("skipped" in facts["launches"]) is not on
        if not on:
            assert "--gemm-trace on traces it too" in facts["launches"]["skipped"]


@pytest.mark.parametrize("how", ["option", "env"])
def test_the_switch_turns_the_trace_off(fake_cupti, monkeypatch, how):
    from pytest_gemm.checks.launch_trace import traced
    from pytest_gemm.measure import trace

    options = {"trace": "off"} if how == "option" else {}
    if how == "env":
        monkeypatch.setenv(trace.TRACE_ENV, "off")
    facts: dict[str, Any] = {}
    with traced(object(), options, facts) as tracer:
        assert tracer is None and not fake_cupti.mod.enabled
    assert "switched off" in facts["launches"]["skipped"]


# ---- the course's own-kernel rule ----------------------------------------------------------

def _facts_with(*names: str) -> dict[str, Any]:
    entries = group([_launch(n, 0, 1, 0) for n in names])
    return {"launches": {"summary": summary_line(entries), "kernels": entries}}


def test_own_kernel_rule_fails_vendor_kernels_naming_them():
    from pytest_gemm.checks.launch_trace import reject_vendor_kernels
    from pytest_gemm.model.categories import GemmCheckFailure

    facts = _facts_with("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNN", "cupy_copy")
    reject_vendor_kernels("student", facts, {"own_kernel": False})  # off by default: nothing
    with pytest.raises(GemmCheckFailure) as caught:
        reject_vendor_kernels("student", facts, {"own_kernel": True})
    assert caught.value.category == "vendor_kernel"
    assert "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNN (cuBLASLt) x1" in caught.value.summary
    reject_vendor_kernels("student", _facts_with("my_kernel"), {"own_kernel": True})  # its own: passes
    reject_vendor_kernels("student", {"launches": {"skipped": "no CUPTI"}}, {"own_kernel": True})  # unknown: no verdict


def test_vendor_kernel_is_the_root_cause_over_what_the_library_computed():
    from pytest_gemm.outputs.records import RunResults

    recs = [{"kernel": "s", "check": "exact", "shape": [64, 64, 64], "outcome": "failed", "category": "vendor_kernel",
             "summary": "'s' launched library kernels, not its own: ampere_sgemm (cuBLAS) x1"},
            {"kernel": "s", "check": "accuracy", "shape": [256, 256, 1024], "outcome": "failed",
             "category": "precision_too_low", "summary": "tf32"}]
    v = RunResults.build(recs).kernels["s"].verdict
    assert (v.status, v.primary_category) == ("failed", "vendor_kernel")


# ---- outputs -------------------------------------------------------------------------------

def _records() -> list[dict[str, Any]]:
    entries = group([_launch("void my_kernel<128, 128>(float*)", 0, 10, 0), _launch("splitk_reduce", 10, 12, 0),
                     _launch("void my_kernel<128, 128>(float*)", 20, 30, 0)])
    launches = {"summary": summary_line(entries), "kernels": entries, "calls": 1, "launches": 3,
                "harness_launches": 2, "launcher": "python"}
    timing = {"median_ms": 1.2, "min_ms": 1.1, "q1_ms": 1.15, "q3_ms": 1.25, "repeats": 20, "flops": 2e9,
              "spread": 0.08, "tflops": 1.67, "shape": [1024, 1024, 1024]}
    return [{"kernel": "mine", "precision": "fp32", "check": "launch", "shape": [64, 64, 64], "outcome": "passed",
             "launches": launches},
            {"kernel": "mine", "precision": "fp32", "check": "speed", "shape": [1024, 1024, 1024], "outcome": "passed",
             "timing": timing, "fraction_of_cublas": 0.5, "launches": dict(launches, calls=30, launches=90),
             "kernel_time": {"kernel_ms": 1.0, "event_ms": 1.2, "overhead_ms": 0.2, "calls": 25,
                             "launches_per_call": 3.0}}]


def test_terminal_lines_one_per_kernel_and_the_python_launcher_s_speed_line():
    from pytest_gemm.outputs.launch_view import launch_lines, speed_lines

    assert launch_lines(_records()) == ["mine (launch 64x64x64): 3 launches: my_kernel<128,128> x2, splitk_reduce x1"]
    (line,) = speed_lines(_records())
    assert "event 1.2000 ms a call, its GPU kernels 1.0000 ms (3 launches a call), launcher overhead 0.2000 ms" in line
    skipped = [{"kernel": "k", "check": "exact", "shape": [1, 1, 1], "outcome": "passed",
                "launches": {"skipped": "no CUPTI: ..."}}]
    assert launch_lines(skipped, own_kernel=True) == [
        "launch trace skipped: no CUPTI: ...; the course's own-kernel rule (gemm_own_kernel) was not checked"]


def test_the_launches_that_stand_for_a_kernel_are_its_largest_exact_check_s_whatever_the_order():
    from pytest_gemm.outputs.launch_view import kernel_launches
    from pytest_gemm.outputs.records import RunResults

    def exact(shape: list[int], name: str) -> dict[str, Any]:
        entries = group([_launch(name, 0, 10, 0)])
        return {"kernel": "mm", "precision": "fp32", "check": "exact", "shape": shape, "outcome": "passed",
                "launches": {"summary": summary_line(entries), "kernels": entries, "calls": 1, "launches": 1,
                             "harness_launches": 0, "launcher": "python"}}

    tiny, large = exact([1, 1, 1], "cupy_multiply"), exact([1000, 1000, 1000], "ampere_sgemm_128x64_nn")
    for recs in ([tiny, large], [large, tiny]):
        chosen = kernel_launches(RunResults.build(recs).kernels["mm"])
        assert chosen["check"] == "exact 1000x1000x1000" and chosen["kernels"][0]["name"] == "ampere_sgemm_128x64_nn"


def test_report_junit_and_gradescope_carry_the_launches():
    from pytest_gemm.grading.gradescope import build_results
    from pytest_gemm.outputs.junit import verdict_properties
    from pytest_gemm.outputs.report import build_report
    from pytest_gemm.outputs.report_schema import validate

    report = build_report(_records(), None)
    validate(report)
    (k,) = report["kernels"]
    assert k["launches"]["summary"].startswith("3 launches") and k["launches"]["check"] == "launch 64x64x64"
    assert k["checks"][1]["launches"]["launches"] == 90
    assert (k["timings"][0]["kernel_ms"], k["timings"][0]["overhead_ms"]) == (1.0, 0.2)
    assert ("gemm:mine:launches", "launch 64x64x64: 3 launches: my_kernel<128,128> x2, splitk_reduce x1") \
        in verdict_properties(_records())
    results = build_results(_records())
    assert "GPU kernels launched: 3 launches: my_kernel<128,128> x2, splitk_reduce x1" in results["output"]
    assert results["extra_data"]["pytest_gemm"]["launches"]["summary"].startswith("3 launches")


def test_gradescope_says_when_the_course_s_own_kernel_rule_went_unchecked():
    """A course that requires the student's own kernel, on a machine whose trace was skipped: the
    student's text and extra_data say the rule was not checked (the verdict cannot say more)."""
    from pytest_gemm.grading.gradescope import build_results

    untraced = [dict(r, launches={"skipped": "no CUPTI: the cupti-python binding could not be imported"})
                for r in _records()]
    course = build_results(untraced, own_kernel=True)
    assert "not traced (no CUPTI: the cupti-python binding could not be imported); the course's own-kernel rule " \
           "(gemm_own_kernel) was not checked" in course["output"], course["output"]
    assert course["extra_data"]["pytest_gemm"]["own_kernel_checked"] is False
    plain = build_results(untraced)
    assert "was not checked" not in plain["output"] and "own_kernel_checked" not in plain["extra_data"]["pytest_gemm"]
    assert "was not checked" not in build_results(_records(), own_kernel=True)["output"]  # traced: it was checked


# ---- options -------------------------------------------------------------------------------

class _Config:
    def __init__(self, options: dict[str, Any], ini: dict[str, Any]):
        self.options, self.ini = options, ini

    def getoption(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)

    def getini(self, name: str) -> Any:
        return self.ini.get(name, [] if name == "gemm_vendor_kernels" else "")


def test_trace_options_from_option_ini_and_their_errors():
    from pytest_gemm.runner.trace_options import trace_options

    assert trace_options(_Config({}, {})) == {"trace": "auto", "own_kernel": False, "vendor_kernels": []}
    got = trace_options(_Config({"gemm_vendor_kernel": ["^magma_"]},
                                {"gemm_trace": "on", "gemm_own_kernel": "true", "gemm_vendor_kernels": ["rocblas"]}))
    assert got == {"trace": "on", "own_kernel": True, "vendor_kernels": ["^magma_", "rocblas"]}
    assert trace_options(_Config({}, {"gemm_trace": "off", "gemm_own_kernel": "no"}))["own_kernel"] is False
    # the course's rule is the trace's: both at once is refused, and a mistyped value never means off
    with pytest.raises(pytest.UsageError, match="drop one of the two"):
        trace_options(_Config({"gemm_own_kernel": True}, {"gemm_trace": "off"}))
    with pytest.raises(pytest.UsageError, match="gemm_own_kernel = 'ture': expected true or false"):
        trace_options(_Config({}, {"gemm_own_kernel": "ture"}))
    with pytest.raises(pytest.UsageError, match="gemm_trace = 'maybe': expected auto, on or off"):
        trace_options(_Config({}, {"gemm_trace": "maybe"}))
    with pytest.raises(pytest.UsageError, match="is not a regular expression"):
        trace_options(_Config({"gemm_vendor_kernel": ["magma_("]}, {}))


def test_the_course_example_requires_the_student_s_own_kernel(pytester):
    from pathlib import Path

    ini = Path(__file__).resolve().parent.parent / "examples" / "course" / "pytest.ini"
    pytester.makeini(ini.read_text())
    # the ini's setting is read and in force: beside it, switching the trace off is refused
    result = pytester.runpytest_subprocess("--gemm-trace", "off", "--gemm-kernel", "reference_kernels:naive_rows",
                                           "--gemm-allow-no-gpu", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert "the own-kernel rule (gemm_own_kernel, --gemm-own-kernel) is checked by the launch trace" \
        in result.stderr.str()


def test_trace_off_by_option_reaches_the_kernel_processes(monkeypatch):
    """--gemm-trace off is exported to the environment the kernel processes inherit, so their
    start-up (measure.trace.prepare) does not start CUPTI either; auto and on export nothing."""
    from pytest_gemm.measure import trace
    from pytest_gemm.runner.trace_options import export_choice

    monkeypatch.delenv(trace.TRACE_ENV, raising=False)
    export_choice(_Config({"gemm_trace": "auto"}, {}))
    assert trace.TRACE_ENV not in os.environ and trace.switched_off() is None
    export_choice(_Config({}, {"gemm_trace": "off"}))
    assert os.environ[trace.TRACE_ENV] == "off" and trace.switched_off() is not None
