"""Roofs: theoretical peaks, times turned into rates, the impossibility judges, the
measured-roof bookkeeping and the FMA benchmark's source. No GPU needed."""
from __future__ import annotations

import importlib.resources
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_gemm.measure import roof_bench, roofs
from pytest_gemm.measure.roofs import (CHAINS, MEASURED_HEADROOM, UNROLL, Ceilings, below_memory_floor, calibrated_iterations,
                               ceilings, combine_roofs, compulsory_bytes, copy_bytes, copy_gb_s, fma_blocks, fma_flops, fp32_accurate_peak_tflops,
                               impossible_timing, measured_tflops, memory_peak_gb_s, rate_tflops, reported_roof,
                               roof_tflops, roofs_summary, tensor_precisions, tensor_size)
from pytest_gemm.measure.timing import ROOF_MARGIN, summarize
from suite_helpers import load_declarations

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class FakeDevice:
    """The GemmDevice fields the roofs read (an H200, as CUDA reports it)."""

    index: int = 0
    name: str = "NVIDIA H200"
    compute_capability: tuple[int, int] = (9, 0)
    sm_count: int = 132
    max_threads_per_sm: int = 2048
    l2_bytes: int = 50 * 2**20
    clock_mhz: float = 1980.0
    memory_clock_mhz: float = 3201.0
    memory_bus_width: int = 6144
    total_memory: int = 141 * 2**30

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


H200 = FakeDevice()
T4 = FakeDevice(name="Tesla T4", compute_capability=(7, 5), sm_count=40, max_threads_per_sm=1024,
                l2_bytes=4 * 2**20, clock_mhz=1590.0, memory_clock_mhz=5001.0, memory_bus_width=256,
                total_memory=15 * 2**30)
NO_CLOCKS = FakeDevice(clock_mhz=0.0, memory_clock_mhz=0.0, memory_bus_width=0)

MEASURED = {"tflops": {"fp32": 56.6, "fp16": 608.0}, "memory_gb_s": 4470.0}


def _timing(ms: float, flops: float) -> object:
    return summarize([ms] * 5, flops)


# ---- theoretical peaks -------------------------------------------------------

def test_theoretical_peaks_from_sms_and_clocks():
    assert roof_tflops(H200, "fp32") == pytest.approx(132 * 128 * 2 * 1980e6 / 1e12)  # 66.9, the datasheet's 67
    assert roof_tflops(H200, "fp16") == roof_tflops(H200, "bf16") == pytest.approx(132 * 4096 * 1980e6 / 1e12)
    assert roof_tflops(H200, "tf32") == pytest.approx(roof_tflops(H200, "fp16") / 2)
    assert roof_tflops(T4, "fp32") == pytest.approx(40 * 64 * 2 * 1590e6 / 1e12)  # 8.1
    # the tensor peaks are the datasheets' (a ceiling below one called correct fp16 kernels escapes)
    assert roof_tflops(T4, "fp16") == pytest.approx(65.1, abs=0.1)  # T4: 65 TFLOP/s mixed precision
    a100 = FakeDevice(name="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0), sm_count=108, clock_mhz=1410.0)
    assert roof_tflops(a100, "fp16") == pytest.approx(311.9, abs=0.1)  # A100: 312
    l40s = FakeDevice(name="NVIDIA L40S", compute_capability=(8, 9), sm_count=142, clock_mhz=2520.0)
    assert roof_tflops(l40s, "fp16") >= 362  # L40S: 362 dense, fp32 accumulate
    unknown = FakeDevice(compute_capability=(10, 0), sm_count=148, clock_mhz=1965.0)
    assert roof_tflops(unknown, "fp16") >= 2250  # B200: 2.25 PFLOP/s dense; a table that knows none bounds it
    assert roof_tflops(NO_CLOCKS, "fp32") == 0.0  # unknown clock: no roof, nothing judged


def test_memory_peak_is_double_data_rate_over_the_bus():
    assert memory_peak_gb_s(H200) == pytest.approx(4917, rel=1e-3)  # H200: 4.8 TB/s
    assert memory_peak_gb_s(T4) == pytest.approx(320, rel=1e-3)     # T4: 320 GB/s
    assert memory_peak_gb_s(NO_CLOCKS) == 0.0


# ---- times to rates ----------------------------------------------------------

def test_times_become_rates():
    assert rate_tflops(2 * 4096**3, 2.7) == pytest.approx(50.9, rel=1e-3)  # cuBLAS FP32 at 4096 on an H200
    assert rate_tflops(1e12, 0.0) == 0.0
    assert fma_flops(threads=1000, iters=10) == 2 * CHAINS * UNROLL * 10 * 1000
    assert fma_flops(threads=1, iters=1, chains=4, unroll=2) == 16
    assert copy_gb_s(1 << 30, 0.5) == pytest.approx(2 * (1 << 30) / 0.5e-3 / 1e9)  # read + written
    assert copy_gb_s(1 << 30, 0.0) == 0.0


def test_the_fma_benchmark_fills_every_sm_and_is_calibrated_to_its_target():
    assert fma_blocks(132, 2048) == 132 * 8        # a full wave of 256-thread blocks
    assert fma_blocks(40, 1024) == 40 * 4
    assert fma_blocks(10, 256) == 20               # at least two blocks per SM
    assert calibrated_iterations(1000, 2.0, target_ms=20.0) == 10000
    assert calibrated_iterations(1000, 0.001, target_ms=20.0) == 64000  # grows at most 64x per step
    assert calibrated_iterations(1000, 0.0) == 64000
    assert calibrated_iterations(1000, 100.0, target_ms=20.0) == 200


def test_sizes_of_the_copy_and_the_tensor_gemm():
    assert copy_bytes(H200.total_memory, H200.l2_bytes) == 1 << 30
    assert copy_bytes(2 * 2**30, 4 * 2**20) == 256 * 2**20       # an eighth of a small GPU
    assert copy_bytes(2 * 2**30, 64 * 2**20) == 512 * 2**20      # always 8x past the L2
    assert tensor_size(H200.total_memory) == 8192
    assert tensor_size(2 * 2**30) == 4096                        # halved to fit a small GPU
    assert tensor_size(512 * 2**20) == 2048
    assert tensor_precisions((9, 0)) == ("fp16", "bf16", "tf32")
    assert tensor_precisions((7, 5)) == ("fp16",)
    assert tensor_precisions((6, 1)) == ()


# ---- which roof a rate is reported against -----------------------------------

def test_the_measured_roof_is_reported_when_there_is_one():
    assert measured_tflops(MEASURED, "fp32") == 56.6 and measured_tflops(MEASURED, "tf32") is None
    assert measured_tflops(None, "fp32") is None and measured_tflops({"tflops": {"fp32": 0}}, "fp32") is None
    assert reported_roof("fp32", MEASURED, 66.9) == (56.6, "measured")
    assert reported_roof("tf32", MEASURED, 268.0) == (268.0, "theoretical")
    assert reported_roof("tf32", {}, 0.0) == (0.0, "none")


def test_roof_facts_of_a_speed_check():
    from pytest_gemm.measure.timed import roof_facts

    timing = _timing(2.7, 2 * 4096**3)
    facts = roof_facts(H200, "fp32", timing, MEASURED)
    assert facts["roof_kind"] == "measured" and facts["measured_roof_tflops"] == 56.6
    assert facts["fraction_of_roof"] == pytest.approx(timing.tflops / 56.6)
    assert facts["roof_tflops"] == pytest.approx(roof_tflops(H200, "fp32")) and facts["roofs"] is MEASURED
    fallback = roof_facts(H200, "fp32", timing, {})
    assert fallback["roof_kind"] == "theoretical" and fallback["measured_roof_tflops"] is None
    assert fallback["fraction_of_roof"] == pytest.approx(timing.tflops / roof_tflops(H200, "fp32"))
    assert fallback["roofs"] is None
    json.dumps(facts)  # crosses the sandbox pipe


# ---- what is physically impossible -------------------------------------------

def test_the_ceilings_are_the_theoretical_peaks_with_the_measured_roofs_as_fallback():
    limits = ceilings(H200, "fp16", MEASURED)
    assert limits == Ceilings(roof_tflops(H200, "fp16"), memory_peak_gb_s(H200), H200.l2_bytes)
    assert ceilings(T4, "fp32") == Ceilings(roof_tflops(T4, "fp32"), memory_peak_gb_s(T4), T4.l2_bytes)
    blind = ceilings(NO_CLOCKS, "fp32", MEASURED)
    assert blind.tflops == pytest.approx(56.6 * MEASURED_HEADROOM)
    assert blind.gb_s == pytest.approx(4470.0 * MEASURED_HEADROOM)
    assert ceilings(NO_CLOCKS, "fp32", None) == Ceilings(0.0, 0.0, H200.l2_bytes)
    slow_clock = FakeDevice(clock_mhz=500.0, memory_clock_mhz=1000.0)  # a device that under-reports its clocks
    wrong = ceilings(slow_clock, "fp32", MEASURED)  # the measurements beat its peaks: they cannot judge
    assert wrong.tflops == pytest.approx(56.6 * MEASURED_HEADROOM) and wrong.gb_s == pytest.approx(4470 * MEASURED_HEADROOM)


def test_a_rate_above_the_theoretical_peak_is_impossible_even_below_the_measured_roof_headroom():
    limits = ceilings(T4, "fp32", MEASURED)  # no TF32 tensor cores: the FMA peak is the ceiling
    flops = 2 * 4096**3
    honest = _timing(40.0, flops)  # 3.4 TFLOP/s: above nothing
    assert impossible_timing(honest, (4096, 4096, 4096), "fp32", limits) is None
    cheat = _timing(flops / (1.2 * limits.tflops * 1e12) * 1e3, flops)  # 1.2x the FP32 peak
    verdict = impossible_timing(cheat, (4096, 4096, 4096), "fp32", limits)
    assert verdict is not None and "faster than this GPU's fp32 roof" in verdict[0] and "not ranked" in verdict[0]


def test_a_kernel_declared_fp32_may_beat_the_fma_peak_on_tensor_cores_but_not_3xtf32():
    # The Triton tutorial's fp32 (TF32 tensor cores: 87-105 TFLOP/s on the H200, FMA peak 66.9)
    # was called timing_escape beside its precision_too_low; a 3xTF32 GEMM is fp32-accurate and
    # faster than the FMA peak too. The memoized cheat (240 TFLOP/s there) stays impossible.
    limits = ceilings(H200, "fp32", MEASURED)
    assert limits.tflops == pytest.approx(fp32_accurate_peak_tflops(H200))
    assert limits.tflops == pytest.approx(132 * 4096 * H200.clock_mhz * 1e6 / 2 / 3 / 1e12)
    assert limits.tflops > 2.5 * roof_tflops(H200, "fp32")
    flops = 2 * 4096**3
    tf32 = _timing(flops / 104.9e12 * 1e3, flops)
    assert impossible_timing(tf32, (4096, 4096, 4096), "fp32", limits) is None
    memoized = _timing(flops / 240.1e12 * 1e3, flops)
    verdict = impossible_timing(memoized, (4096, 4096, 4096), "fp32", limits)
    assert verdict is not None and "fp32-accurate (3xTF32 on tensor cores) roof" in verdict[0]


def test_a_time_below_the_memory_floor_is_impossible():
    shape = (1, 8192, 8192)  # a GEMV: 256 MB of B to read, far past the L2, almost no FLOPs
    moved = compulsory_bytes(shape, "fp32", H200.l2_bytes)
    assert moved == pytest.approx(4 * (8192 + 8192 * 8192) + 4 * 8192 - 2 * H200.l2_bytes)
    floor_ms = moved / (memory_peak_gb_s(H200) * 1e9) * 1e3
    limits = ceilings(H200, "fp32")
    flops = 2.0 * 8192 * 8192
    assert impossible_timing(_timing(1.5 * floor_ms, flops), shape, "fp32", limits) is None
    assert below_memory_floor(_timing(floor_ms / (0.99 * ROOF_MARGIN), flops), shape, "fp32", limits.gb_s,
                              limits.l2_bytes) is None
    verdict = impossible_timing(_timing(floor_ms / 3, flops), shape, "fp32", limits)
    assert verdict is not None and "faster than this GPU's memory" in verdict[0] and "1x8192x8192" in verdict[0]
    assert any("read" in d for d in verdict[1])


def test_what_the_l2_may_hold_is_never_judged_and_half_inputs_move_half_the_bytes():
    assert compulsory_bytes((512, 512, 512), "fp32", H200.l2_bytes) == 0.0  # fits in the L2: no floor
    assert below_memory_floor(_timing(1e-6, 1.0), (512, 512, 512), "fp32", 4917.0, H200.l2_bytes) is None
    assert compulsory_bytes((4096, 4096, 4096), "fp16") == 2 * 2 * 4096**2 + 4 * 4096**2
    assert below_memory_floor(_timing(1e-6, 1.0), (4096,) * 3, "fp32", 0.0) is None  # unknown bandwidth


# ---- measured roofs: several processes, one line -----------------------------

def test_measurements_from_several_sandboxes_combine_to_their_median():
    a = {"device": "H200", "tflops": {"fp32": 56.0, "fp16": 600.0}, "memory_gb_s": 4400.0,
         "theoretical_tflops": {"fp32": 66.9}, "theoretical_memory_gb_s": 4917.0, "methods": {"fp32": "FMA"}}
    b = dict(a, tflops={"fp32": 57.0, "fp16": 610.0}, memory_gb_s=4500.0)
    c = dict(a, tflops={"fp32": 56.5}, memory_gb_s=4450.0)
    combined = combine_roofs([a, None, b, {"errors": {"all": "x"}}, c])
    assert combined is not None and combined["measurements"] == 3
    assert combined["tflops"] == {"fp32": 56.5, "fp16": 605.0} and combined["memory_gb_s"] == 4450.0
    assert combined["spread"]["fp32"] == pytest.approx(1.0 / 56.5)
    assert combine_roofs([None, {}, {"errors": {}}]) is None
    line = roofs_summary(combined)
    assert line is not None and line.startswith("measured roofs (median of 3 processes): ")
    assert "fp32: 56.5 TFLOP/s (FMA, 84% of the 66.9 peak)" in line and "fp16: 605.0 TFLOP/s (cuBLAS)" in line
    assert "memory: 4450 GB/s (91% of the 4917 peak)" in line
    assert roofs_summary(None) is None


def test_measured_roofs_are_measured_once_per_device_and_failures_are_kept(monkeypatch):
    calls = []
    monkeypatch.setattr(roof_bench, "_MEASURED", {})
    monkeypatch.setattr(roof_bench, "_measure_fma", lambda device: calls.append("fma") or 55.0)
    monkeypatch.setattr(roof_bench, "_measure_copy", lambda device: calls.append("copy") or 4400.0)
    monkeypatch.setattr(roof_bench, "_free_memory", lambda: None)

    def cublas(device, precision):
        calls.append(precision)
        if precision == "bf16":
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
        return {"fp16": 600.0, "tf32": 300.0}[precision]

    monkeypatch.setattr(roof_bench, "_measure_cublas", cublas)
    first = roof_bench.measured_roofs(H200)
    assert first["tflops"] == {"fp32": 55.0, "fp16": 600.0, "tf32": 300.0} and first["memory_gb_s"] == 4400.0
    assert "CUBLAS_STATUS_NOT_SUPPORTED" in first["errors"]["bf16"]
    assert first["theoretical_tflops"]["fp32"] == pytest.approx(roof_tflops(H200, "fp32"))
    assert set(first["methods"]) == {"fp32", "fp16", "bf16", "tf32", "memory"}
    assert roof_bench.measured_roofs(H200) is first and calls == ["fma", "fp16", "bf16", "tf32", "copy"]
    json.dumps(first)
    roof_bench.measured_roofs(T4)  # another device: measured again, fp16 only below sm_80
    assert calls[5:] == ["fma", "fp16", "copy"]


def test_a_failed_measurement_leaves_the_speed_check_the_theoretical_peak(monkeypatch):
    from pytest_gemm.measure.timed import process_roofs

    def broken(device):
        raise RuntimeError("no cuda")

    monkeypatch.setattr(roof_bench, "measured_roofs", broken)
    assert process_roofs(H200)["errors"]["all"] == "RuntimeError: no cuda"
    assert process_roofs(H200, measure=False) == {}
    assert reported_roof("fp32", process_roofs(H200), 66.9) == (66.9, "theoretical")


# ---- the FMA benchmark's source ----------------------------------------------

def test_roofs_cu_is_package_data():
    source = importlib.resources.files("pytest_gemm.measure").joinpath("roofs.cu")
    text = source.read_text()
    assert "gemm_roof_fma" in text and "#ifndef CHAINS" in text and "#ifndef UNROLL" in text


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_the_fma_benchmark_compiles_to_independent_fmas_with_no_spills(arch):
    pytest.importorskip("cuda.bindings", reason="NVRTC not installed (install pytest-gemm[cuda12])")
    from pytest_gemm.kernels.compiler import compile_for_arch
    from pytest_gemm.model.contract import CudaKernel

    path = importlib.resources.files("pytest_gemm.measure").joinpath("roofs.cu")
    kernel = CudaKernel(source=str(path), entry="gemm_roof_fma", block=(256,), tile=(1, 1),
                        options=(f"-DCHAINS={CHAINS}", f"-DUNROLL={UNROLL}"), name="roof-fma")
    ptx = compile_for_arch(kernel, arch, output="ptx").code.decode()
    assert ptx.count("fma.rn.f32") == CHAINS * UNROLL  # the unrolled body: nothing folded or merged
    cubin = compile_for_arch(kernel, arch)
    assert cubin.resources.registers > 0 and cubin.resources.spills == 0


# ---- the fidelity script (it needs a GPU to measure; its help and its pure parts do not) -------------

def _fidelity():
    return load_declarations(REPO / "tools" / "fidelity.py", "gemm_fidelity")


def test_fidelity_script_has_help_and_needs_no_gpu_to_show_it():
    result = subprocess.run([sys.executable, str(REPO / "tools" / "fidelity.py"), "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--processes" in result.stdout and "--calls" in result.stdout and "GPU" in result.stdout
    assert "cupy" not in result.stderr.lower()


def test_fidelity_summary_of_the_medians():
    fidelity = _fidelity()
    assert fidelity.relative_difference(2.75, 2.70) == pytest.approx(0.05 / 2.70)
    spread = fidelity.median_spread([2.70, 2.72, 2.74, 2.71, 2.77])
    assert spread["median_ms"] == 2.72 and spread["range"] == pytest.approx(0.07 / 2.72)
    assert spread["min_ms"] == 2.70 and spread["max_ms"] == 2.77 and spread["stdev"] > 0
    assert fidelity.median_spread([2.7])["stdev"] == 0.0


# ---- the speed check with the GPU parts replaced --------------------------------------------

class _NullStream:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _speed_check(monkeypatch, shape, kernel_ms, precision="fp32"):
    """Run the speed check on fakes: the kernel takes kernel_ms, cuBLAS 2.7 ms, roofs MEASURED."""
    from types import SimpleNamespace

    from pytest_gemm.checks import speed as performance

    runtime = SimpleNamespace(deviceSynchronize=lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(Stream=SimpleNamespace(null=_NullStream()),
                                                                                  runtime=runtime)))
    monkeypatch.setattr(roof_bench, "measured_roofs", lambda device: MEASURED)
    monkeypatch.setattr(performance, "problems_for", lambda precision, shape: ["inputs"])
    monkeypatch.setattr(performance, "stage_inputs", lambda h, problems, each=None: "staged")
    flops = 2.0 * shape[0] * shape[1] * shape[2]
    monkeypatch.setattr(performance, "timed_run",
                        lambda h, s, b, p=None, stop=None, laps=None, staged=None: (_timing(kernel_ms, flops), lambda: None))
    monkeypatch.setattr(performance, "time_cublas", lambda *a, **k: _timing(2.7, flops))
    h = SimpleNamespace(kernel=SimpleNamespace(name="mine", precision=precision), device=H200)
    facts: dict = {}
    performance.check_speed(h, shape, facts.update, None)
    return facts


def test_the_speed_check_reports_the_fraction_of_the_measured_roof(monkeypatch):
    facts = _speed_check(monkeypatch, (4096, 4096, 4096), 4.4)
    assert facts["roof_kind"] == "measured" and facts["measured_roof_tflops"] == 56.6
    assert facts["fraction_of_roof"] == pytest.approx(2 * 4096**3 / 4.4e-3 / 1e12 / 56.6)
    assert facts["roof_tflops"] == pytest.approx(roof_tflops(H200, "fp32")) and facts["roofs"] is MEASURED
    assert facts["fraction_of_cublas"] == pytest.approx(2.7 / 4.4)


def test_the_speed_check_flags_a_time_below_the_memory_floor(monkeypatch):
    from pytest_gemm.model.categories import TIMING_ESCAPE, GemmCheckFailure

    with pytest.raises(GemmCheckFailure) as info:  # 256 MB of B in 10 us (only 13 TFLOP/s): 17 TB/s
        _speed_check(monkeypatch, (1, 8192, 8192), 0.01)
    assert info.value.category == TIMING_ESCAPE and "faster than this GPU's memory" in str(info.value)


def test_the_speed_check_still_flags_a_rate_above_the_theoretical_peak(monkeypatch):
    from pytest_gemm.model.categories import TIMING_ESCAPE, GemmCheckFailure

    with pytest.raises(GemmCheckFailure) as info:  # 2 * 4096^3 in 0.5 ms: 275 TFLOP/s in FP32
        _speed_check(monkeypatch, (4096, 4096, 4096), 0.5)
    assert info.value.category == TIMING_ESCAPE and "roof (178.4 TFLOP/s)" in str(info.value)


def test_the_cublas_gate_fails_only_a_kernel_below_the_fraction():
    from pytest_gemm.checks.speed import cublas_gate

    shape = (4096, 4096, 4096)
    message = cublas_gate("mine", "fp32", shape, 0.16, 8.1, 50.0, 0.5)
    assert message == ("'mine' runs at 0.160 of cuBLAS fp32 at 4096x4096x4096 (8.10 vs 50.00 TFLOP/s); "
                       "--gemm-min-cublas-fraction asks for 0.5")
    assert cublas_gate("mine", "fp32", shape, 0.5, 25.0, 50.0, 0.5) is None   # exactly at the gate passes
    assert cublas_gate("mine", "fp32", shape, 0.93, 46.5, 50.0, 0.5) is None
    assert cublas_gate("mine", "fp32", shape, 0.01, 0.5, 50.0, None) is None  # no gate asked for


def test_fidelity_spreads_by_kernel_say_whose_median_moves():
    fidelity = _fidelity()
    runs = [{"kernels": {"cublas-fp32": {"median_ms": ms}, "warptile": {"median_ms": 2.957}}}
            for ms in (2.685, 2.846, 2.789)]
    spreads = fidelity.spreads_by_kernel(runs)
    assert list(spreads) == ["cublas-fp32", "warptile"]
    assert spreads["cublas-fp32"]["range"] == pytest.approx((2.846 - 2.685) / 2.789)
    assert spreads["warptile"]["range"] == 0.0


def test_fidelity_kernels_option_puts_the_baseline_first_and_rejects_unknown_names():
    fidelity = _fidelity()
    assert fidelity.parse_kernels("warptile") == ["cublas-fp32", "warptile"]
    assert fidelity.parse_kernels("warptile,cublas-fp32,warptile") == ["cublas-fp32", "warptile"]
    with pytest.raises(ValueError, match="unknown kernel"):
        fidelity.parse_kernels("warptyle")
    result = subprocess.run([sys.executable, str(REPO / "tools" / "fidelity.py"), "--kernels", "warptyle"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "--kernels: unknown kernel(s) warptyle" in result.stderr


def test_fidelity_clock_samples_summary_ors_the_reasons_and_keeps_the_extremes():
    fidelity = _fidelity()
    assert fidelity.summarize_samples([]) is None
    summary = fidelity.summarize_samples([(1980, 300.0, 40, 0), (1755, 650.0, 44, 0x4), (1900, 500.0, 47, 0x80)])
    assert (summary["sm_mhz_min"], summary["sm_mhz_median"], summary["sm_mhz_max"]) == (1755, 1900, 1980)
    assert (summary["power_w_median"], summary["power_w_max"]) == (500.0, 650.0)
    assert (summary["temp_c_first"], summary["temp_c_last"]) == (40, 47)
    assert summary["reasons_mask"] == "0x84" and summary["samples"] == 3


def test_a_roof_is_an_upper_bound_for_the_rate_it_is_compared_with():
    """cuBLAS fp16 at 4096^3 can beat the roof measured with cuBLAS at 8192^3: "of roof" must not
    read 103 %, and the measured-roofs line keeps each precision apart from its value."""
    from pytest_gemm.measure.timed import roof_facts

    measured = {"tflops": {"fp16": 700.0}}
    fast = _timing(2 * 4096**3 / 773e12 * 1e3, 2 * 4096**3)  # 773 TFLOP/s
    facts = roof_facts(H200, "fp16", fast, measured)
    assert facts["fraction_of_roof"] <= 1.0 and facts["roof_kind"] == "measured"
    slow = _timing(2 * 4096**3 / 350e12 * 1e3, 2 * 4096**3)
    assert roof_facts(H200, "fp16", slow, measured)["fraction_of_roof"] == pytest.approx(0.5)
    line = roofs_summary({"tflops": {"fp32": 65.0}})
    assert "fp32: 65.0 TFLOP/s" in line and "fp3265" not in line.replace(" ", "")
