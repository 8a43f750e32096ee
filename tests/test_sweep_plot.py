"""--gemm-sweep and --gemm-plot: parsing, the shuffled order, the table, the JSON report and
the picture, from check records (no GPU)."""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gemm.outputs.report import build_report, kernel_summaries, ranking_rows, summary_lines
from pytest_gemm.measure.sweep import (SWEEP_SEED, by_size, parse_sweep, report_entries, size_label, sweep_entry,
                                       sweep_params, sweep_timeout, timing_order)
from pytest_gemm.outputs.sweep_table import sweep_series, sweep_table
from pytest_gemm.measure.timing import summarize

NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


# ---- parsing ---------------------------------------------------------------------

def test_sizes_are_n_or_mxnxk_and_duplicates_are_dropped():
    assert parse_sweep("512,1024, 2048 ,4096") == [(512,) * 3, (1024,) * 3, (2048,) * 3, (4096,) * 3]
    assert parse_sweep("1000x64x300,512,512,1000X64X300") == [(1000, 64, 300), (512, 512, 512)]
    assert parse_sweep("4096") == [(4096, 4096, 4096)]


@pytest.mark.parametrize("text, bad", [("512,abc", "'abc' is not a size"), ("512,0,4096x2", "'0', '4096x2' are not sizes"),
                                        ("1x2x3x4", "'1x2x3x4' is not a size"), ("-5", "'-5' is not a size")])
def test_bad_sizes_are_echoed_with_an_example(text, bad):
    with pytest.raises(ValueError) as info:
        parse_sweep(text)
    message = str(info.value)
    assert f"--gemm-sweep {text!r}" in message and bad in message and "512,1024,2048,4096" in message


@pytest.mark.parametrize("text", ["", " ", "512,,1024", "512,"])
def test_empty_items_are_refused(text):
    with pytest.raises(ValueError, match="comma-separated list of sizes"):
        parse_sweep(text)


def test_labels_and_size_order():
    assert size_label((4096, 4096, 4096)) == "4096" and size_label((1000, 64, 300)) == "1000x64x300"
    assert by_size([(4096,) * 3, (1000, 64, 300), (512,) * 3, (512,) * 3]) == [(1000, 64, 300), (512,) * 3, (4096,) * 3]


# ---- the shuffled, seeded order --------------------------------------------------------

def test_the_order_is_a_seeded_shuffle_with_the_first_of_each_pair_drawn_too():
    shapes = [(s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192)]
    plan = timing_order(shapes, seed=SWEEP_SEED)
    assert plan == timing_order(shapes, seed=SWEEP_SEED)  # reproducible
    assert sorted(s for s, _ in plan) == sorted(shapes)   # every size exactly once
    assert all(sorted(first) == ["cublas", "kernel"] for _, first in plan)
    orders = {tuple(s for s, _ in timing_order(shapes, seed)) for seed in range(20)}
    assert len(orders) > 10                                # the seed matters
    assert tuple(s for s, _ in plan) != tuple(shapes)      # shuffled, not in the order given
    firsts = {first for seed in range(20) for _, first in timing_order(shapes, seed)}
    assert firsts == {("kernel", "cublas"), ("cublas", "kernel")}
    assert timing_order(shapes + shapes[:2], SWEEP_SEED) == plan  # duplicates do not change it


def test_the_check_params_are_json_and_the_timeout_grows_with_the_sizes():
    params = sweep_params([(512,) * 3, (1000, 64, 300)])
    assert json.loads(json.dumps(params)) == {"shapes": [[512, 512, 512], [1000, 64, 300]], "seed": SWEEP_SEED}
    assert sweep_timeout([(512,) * 3]) == pytest.approx(90.0 + 10 * 2 * 512**3 / 1e12)
    assert sweep_timeout([(s, s, s) for s in (512, 1024, 2048, 4096)]) > 180


# ---- records as the sandbox returns them ------------------------------------------------

def _t(ms: float, shape) -> object:
    m, n, k = shape
    return summarize([ms] * 5, 2.0 * m * n * k)


def _sweep_record(kernel, speeds, precision="fp32", outcome="passed", category=None, cublas_ms=None):
    """speeds: {size: kernel ms}; cuBLAS at 0.5 x the kernel's time unless cublas_ms gives it."""
    entries = []
    for size, ms in speeds.items():
        shape = (size, size, size)
        c_ms = (cublas_ms or {}).get(size, 0.5 * ms)
        entries.append(sweep_entry(shape, _t(ms, shape), _t(c_ms, shape)))
    return {"kernel": kernel, "precision": precision, "check": "sweep", "shape": [4096] * 3, "params": {},
            "outcome": outcome, "category": category, "message": None, "sweep": entries[::-1],
            "sweep_order": [], "sweep_seed": SWEEP_SEED, "roofs": None}


def _record(kernel, check, outcome="passed", category=None, precision="fp32", **facts):
    rec = {"kernel": kernel, "precision": precision, "check": check, "shape": [64, 64, 64], "params": {},
           "outcome": outcome, "category": category, "message": None}
    rec.update(facts)
    return rec


def _speed(kernel, ms, precision="fp32", cublas_ms=2.7, **extra):
    shape = [4096, 4096, 4096]
    t = _t(ms, shape).as_dict()
    t["shape"] = shape
    c = _t(cublas_ms, shape).as_dict()
    return _record(kernel, "speed", precision=precision, timing=t, cublas=c, fraction_of_cublas=cublas_ms / ms,
                   fraction_of_roof=0.5, roof_kind="measured", **extra)


ROOFS = {"device": "NVIDIA H200", "tflops": {"fp32": 56.6, "fp16": 608.0}, "memory_gb_s": 4470.0,
         "theoretical_tflops": {"fp32": 66.9, "fp16": 1081.0}, "theoretical_memory_gb_s": 4917.0, "methods": {}}

SWEEP_RECORDS = [
    _record("warptile", "exact"), _sweep_record("warptile", {512: 0.05, 1024: 0.1, 2048: 0.6, 4096: 4.4}),
    _record("tiled16", "exact"), _sweep_record("tiled16", {512: 0.1, 1024: 0.5, 2048: 2.0, 4096: 17.0}),
    _record("wmma-fp16", "exact", precision="fp16"),
    _sweep_record("wmma-fp16", {512: 0.02, 1024: 0.08, 4096: 5.0}, precision="fp16"),  # 2048 not claimed
    _record("wrong", "exact", "failed", "wrong_values"), _sweep_record("wrong", {512: 0.001, 4096: 0.1}),
    _record("cheat", "exact"), _sweep_record("cheat", {512: 0.001}, outcome="failed", category="stale_output"),
]


def test_a_sweep_entry_has_the_rate_and_the_ratio_to_cublas():
    shape = (4096, 4096, 4096)
    e = sweep_entry(shape, _t(4.0, shape), _t(2.7, shape))
    assert e["shape"] == [4096, 4096, 4096] and e["median_ms"] == 4.0
    assert e["tflops"] == pytest.approx(2 * 4096**3 / 4e-3 / 1e12) and e["fraction_of_cublas"] == pytest.approx(0.675)
    assert e["cublas_tflops"] == pytest.approx(2 * 4096**3 / 2.7e-3 / 1e12)
    json.dumps(e)


def test_series_keep_passed_sweeps_of_correct_kernels_and_add_a_cublas_baseline():
    sizes, series = sweep_series(SWEEP_RECORDS)
    assert sizes == [(s, s, s) for s in (512, 1024, 2048, 4096)]
    names = [s["name"] for s in series]
    assert "wrong" not in names and "cheat" not in names  # a wrong kernel or an untrusted sweep is not drawn
    assert set(names) == {"warptile", "tiled16", "wmma-fp16", "cuBLAS fp32 (baseline)", "cuBLAS fp16 (baseline)"}
    assert names[0] == "cuBLAS fp16 (baseline)"  # fastest at the largest size first
    base = next(s for s in series if s["name"] == "cuBLAS fp32 (baseline)")
    assert base["baseline"] and base["cublas"]
    assert base["points"][(4096,) * 3]["median_ms"] == pytest.approx((2.2 + 8.5) / 2)  # median of both kernels' cuBLAS


def test_a_cublas_kernel_in_the_sweep_replaces_the_baseline_of_its_precision():
    records = SWEEP_RECORDS[:2] + [_sweep_record("cublas-fp32", {512: 0.03, 4096: 2.7})]
    _, series = sweep_series(records)
    names = [s["name"] for s in series]
    assert "cuBLAS fp32 (baseline)" not in names and next(s for s in series if s["name"] == "cublas-fp32")["cublas"]


def test_the_tflops_by_size_table():
    lines = sweep_table(SWEEP_RECORDS)
    text = "\n".join(lines)
    assert lines[0].startswith("TFLOP/s by size")
    header = lines[1].split()
    assert header == ["kernel", "precision", "512", "1024", "2048", "4096"]
    warptile = next(line for line in lines if line.startswith("warptile"))
    assert "31.24 (0.50x)" in warptile  # 2*4096^3 / 4.4 ms, cuBLAS twice as fast
    wmma = next(line for line in lines if line.startswith("wmma-fp16")).split()
    assert wmma[2 + 2 + 2] == "-"  # 2048 was not claimed (cells before it: value and ratio, two words each)
    assert "wrong" not in text and "cheat" not in text
    assert sweep_table([_record("k", "exact")]) == []


def test_the_json_report_has_the_sweep_per_kernel_and_the_measured_roofs():
    records = SWEEP_RECORDS + [_speed("warptile", 4.4, roofs=ROOFS), _speed("tiled16", 17.0, roofs=ROOFS)]
    report = json.loads(json.dumps(build_report(records, {"name": "GPU"})))
    kernels = {k["name"]: k for k in report["kernels"]}
    sweep = kernels["warptile"]["sweep"]
    assert [e["shape"] for e in sweep] == [[s] * 3 for s in (512, 1024, 2048, 4096)]  # smallest first
    assert {"shape", "median_ms", "tflops", "fraction_of_cublas"} <= set(sweep[0])
    assert sweep[-1]["median_ms"] == 4.4 and sweep[-1]["fraction_of_cublas"] == pytest.approx(0.5)
    assert kernels["wmma-fp16"]["sweep"][-1]["shape"] == [4096] * 3 and len(kernels["wmma-fp16"]["sweep"]) == 3
    assert kernels["warptile"]["timings"][0]["roof_kind"] == "measured"
    assert report["roofs"]["tflops"] == {"fp32": 56.6, "fp16": 608.0} and report["roofs"]["measurements"] == 2
    assert kernel_summaries([_record("k", "exact")])["k"]["sweep"] == []


def test_a_sweep_that_caught_a_cheat_unranks_the_kernel_but_a_failed_gate_does_not():
    records = [_record("cheat", "exact"), _speed("cheat", 3.0),
               _record("cheat", "sweep", "failed", "stale_output"),
               _record("slowpoke", "exact"), _speed("slowpoke", 30.0),
               _record("slowpoke", "sweep", "failed", "timeout")]
    ranked, unranked = ranking_rows(records)
    assert [r[1] for r in ranked] == ["slowpoke"] and [row[:3] for row in unranked] == [["cheat", "fp32", "stale_output"]]


def test_the_terminal_summary_has_the_table_and_the_roofs_line():
    records = SWEEP_RECORDS + [_speed("warptile", 4.4, roofs=ROOFS)]
    text = "\n".join(summary_lines(SimpleNamespace(results=records), None))
    assert "TFLOP/s by size" in text and "x cuBLAS" in text
    assert "measured roofs: fp32: 56.6 TFLOP/s (FMA, 85% of the 66.9 peak)" in text
    assert "memory: 4470 GB/s (91% of the 4917 peak)" in text


def test_report_entries_keep_the_documented_keys_smallest_first():
    entries = report_entries([{"shape": [64, 64, 64], "median_ms": 1.0, "tflops": 2.0, "fraction_of_cublas": 0.5,
                               "extra": 1}, {"shape": [8, 8, 8], "median_ms": 0.1, "tflops": 0.1,
                                             "fraction_of_cublas": 0.1}, "junk"])
    assert [e["shape"] for e in entries] == [[8, 8, 8], [64, 64, 64]] and "extra" not in entries[0]


# ---- the conformance module without --gemm-sweep ----------------------------------------------

def test_the_sweep_tests_are_skipped_with_the_reason_when_no_sweep_is_asked_for(pytester: pytest.Pytester,
                                                                                   monkeypatch):
    for k, v in NO_GPU.items():
        monkeypatch.setenv(k, v)
    result = pytester.runpytest_subprocess("--pyargs", "conformance", "-q", "-rs", "-k", "sweep and (tiled16 or cublas)",
                                           "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "5 skipped" in out and "no sweep asked for" in out and "--gemm-sweep 512,1024,2048,4096" in out


def test_a_bad_sweep_is_a_usage_error_that_echoes_it(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("--gemm-sweep", "512,abc", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gemm-sweep '512,abc': 'abc' is not a size" in result.stderr.str()


def test_sweep_tests_are_named_by_kernel_and_their_skips_stay_out_of_the_records(pytester: pytest.Pytester,
                                                                                monkeypatch, tmp_path):
    for k, v in NO_GPU.items():
        monkeypatch.setenv(k, v)
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess("--pyargs", "conformance", "--collect-only", "-q", "-k", "sweep",
                                           "-p", "no:cacheprovider")
    assert "test_sweep.py::test_sweep[sweep-tiled16]" in result.stdout.str()
    result = pytester.runpytest_subprocess("--pyargs", "conformance", "-q", "-k", "sweep and tiled16",
                                           "--gemm-report", str(report), "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    assert all(c["check"] != "sweep" for k in json.loads(report.read_text())["kernels"] for c in k["checks"])


def test_gemm_plot_without_matplotlib_is_a_usage_error_naming_the_extra(pytester: pytest.Pytester):
    pytester.makeconftest("import sys\nsys.modules['matplotlib'] = None  # as if not installed\n")
    result = pytester.runpytest_subprocess("--gemm-plot", "out.png", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "pip install 'pytest-gemm[plot]'" in result.stderr.str()


# ---- the plot ---------------------------------------------------------------------------------

def test_without_matplotlib_the_plot_names_the_extra(monkeypatch, tmp_path):
    from pytest_gemm.outputs.plot import PlotUnavailableError, plot_ranking

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotUnavailableError, match=r"pip install 'pytest-gemm\[plot\]'"):
        plot_ranking(SWEEP_RECORDS, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


BAR_RECORDS = [
    _record("naive-rows", "exact"), _speed("naive-rows", 140.0),
    _record("warptile", "exact"), _speed("warptile", 4.4),
    _record("mine", "exact"), _speed("mine", 6.0, gpu_shared=True),
    _record("wmma-fp16", "exact", precision="fp16"), _speed("wmma-fp16", 5.0, precision="fp16", cublas_ms=0.23),
    _record("cublas-fp32", "exact"), _speed("cublas-fp32", 2.7),
    _record("wrong", "exact", "failed", "wrong_values"), _speed("wrong", 0.1),
]


def test_bars_are_every_ranked_kernel_with_cublas_marked():
    from pytest_gemm.outputs.plot import bar_data

    bars = bar_data(BAR_RECORDS)
    names = [b["name"] for b in bars]
    assert names[0] == "cuBLAS fp16 (baseline)" and "wrong" not in names  # only ranked kernels, fastest first
    assert "cuBLAS fp32 (baseline)" not in names  # cublas-fp32 itself was ranked
    assert [b["name"] for b in bars if b["cublas"]] == ["cuBLAS fp16 (baseline)", "cublas-fp32"]
    assert any(n.startswith("mine (GPU shared") for n in names)
    assert all(b["shape"] == "4096x4096x4096" for b in bars)


@pytest.mark.parametrize("kind", ["bars", "lines", "empty"])
def test_the_plot_is_a_real_png(kind, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install 'pytest-gemm[plot]')")
    from pytest_gemm.outputs.plot import plot_ranking

    records = {"bars": BAR_RECORDS, "lines": SWEEP_RECORDS + BAR_RECORDS, "empty": [_record("k", "exact")]}[kind]
    path = tmp_path / "sub" / f"{kind}.png"
    what = plot_ranking(records, path)
    width, height = _png_size(path)
    if kind == "bars":
        assert what == "TFLOP/s of 6 kernels at the benchmark shape"
        assert width >= 1000 and height >= 300 and path.stat().st_size > 20_000
    elif kind == "lines":
        assert what == "TFLOP/s of 5 kernels over 4 sizes"
        assert width >= 1000 and height >= 600 and path.stat().st_size > 20_000
    else:
        assert what.startswith("no ranked timing") and path.stat().st_size > 2_000


def test_gemm_plot_draws_the_file_at_the_end_of_the_run(pytester: pytest.Pytester):
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install 'pytest-gemm[plot]')")
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("--gemm-plot", "plots/ranking.png", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    assert _png_size(pytester.path / "plots" / "ranking.png")[0] > 0
    result.stdout.fnmatch_lines(["*--gemm-plot: no ranked timing (an empty figure) drawn to plots/ranking.png*"])


# ---- the sweep check's orchestration, with the GPU parts replaced -----------------------------

H200 = SimpleNamespace(index=0, name="NVIDIA H200", compute_capability=(9, 0), sm_count=132, max_threads_per_sm=2048,
                       l2_bytes=50 * 2**20, clock_mhz=1980.0, memory_clock_mhz=3201.0, memory_bus_width=6144,
                       total_memory=141 * 2**30, arch="sm_90")


class _NullStream:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def fake_gpu(monkeypatch):
    """check_sweep with no GPU: CuPy's stream and pool, the harness's timed runs and cuBLAS replaced.
    ``runs`` lists (who, shape) in the order timed; ``speeds[who](shape)`` gives the median ms and
    ``verdicts[who]`` an exception the verifier raises."""
    from pytest_gemm.kernels import harness as checks
    from pytest_gemm.measure import timed as performance
    from pytest_gemm.model.contract import PyKernel

    fake_cupy = SimpleNamespace(cuda=SimpleNamespace(Stream=SimpleNamespace(null=_NullStream())),
                                get_default_memory_pool=lambda: SimpleNamespace(free_all_blocks=lambda: None))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    state = SimpleNamespace(runs=[], verdicts={},
                            speeds={"kernel": lambda s: 2e-12 * s[0] * s[1] * s[2] / 20 * 1e3,   # 20 TFLOP/s
                                    "cublas": lambda s: 2e-12 * s[0] * s[1] * s[2] / 40 * 1e3})  # 40 TFLOP/s
    cublas_harness = SimpleNamespace(kernel=SimpleNamespace(name="cublas-fp32", precision="fp32"), device=H200)
    monkeypatch.setattr(checks, "harness_for", lambda kernel, device: cublas_harness)
    monkeypatch.setattr(performance, "problems_for", lambda precision, shape: ["inputs"])

    def timed_run(h, shape, budget_s, problems=None):
        who = "cublas" if h is cublas_harness else "kernel"
        state.runs.append((who, tuple(shape)))

        def verify():
            if who in state.verdicts:
                raise state.verdicts[who]

        return summarize([state.speeds[who](shape)] * 5, 2.0 * shape[0] * shape[1] * shape[2]), verify

    monkeypatch.setattr(performance, "timed_run", timed_run)
    state.warmed = []  # (shape, runs timed before it): a launcher's warm-up at each size, before the GPU is taken alone
    monkeypatch.setattr(performance, "warm_outside_lock",
                        lambda h, shape, problems: state.warmed.append((tuple(shape), len(state.runs))))

    def harness(multiple_of=(1, 1, 1)):
        kernel = PyKernel(fn=lambda a, b, c: None, precision="fp32", multiple_of=multiple_of, name="mine")
        return SimpleNamespace(kernel=kernel, device=H200)

    state.harness = harness
    return state


def test_the_sweep_times_both_at_every_size_in_the_seeded_order(fake_gpu):
    from pytest_gemm.checks.sweep import check_sweep

    shapes = [(s, s, s) for s in (512, 1024, 2048, 4096)]
    facts: dict = {}
    check_sweep(fake_gpu.harness(), shapes, facts.update, seed=3, measure_roofs=False)
    plan = timing_order(shapes, 3)
    assert fake_gpu.runs == [(who, s) for s, first in plan for who in first]  # pairs, back to back
    assert fake_gpu.warmed == [(s, 2 * i) for i, (s, _) in enumerate(plan)]  # each size warmed before its pair
    assert [tuple(e["shape"]) for e in facts["sweep"]] == [s for s, _ in plan]
    assert all(e["fraction_of_cublas"] == pytest.approx(0.5) for e in facts["sweep"])
    assert facts["sweep_order"] == [[list(s), list(first)] for s, first in plan] and facts["sweep_seed"] == 3
    assert facts["sweep_skipped"] == [] and facts["roofs"] is None
    json.dumps(facts)


def test_sizes_a_kernel_does_not_claim_are_skipped_and_none_at_all_skips_the_check(fake_gpu):
    from pytest_gemm.checks.sweep import check_sweep

    facts: dict = {}
    check_sweep(fake_gpu.harness((16, 16, 16)), [(1000, 1000, 1000), (1024, 1024, 1024)], facts.update,
                measure_roofs=False)
    assert [e["shape"] for e in facts["sweep"]] == [[1024] * 3]
    assert facts["sweep_skipped"][0]["shape"] == [1000] * 3 and "multiple_of" in facts["sweep_skipped"][0]["reason"]
    with pytest.raises(pytest.skip.Exception, match="claims none of the sweep sizes"):
        check_sweep(fake_gpu.harness((16, 16, 16)), [(1000, 1000, 1000)], {}.update, measure_roofs=False)


def test_a_stale_output_fails_the_sweep_and_keeps_what_was_measured(fake_gpu):
    from pytest_gemm.model.categories import STALE_OUTPUT, GemmCheckFailure
    from pytest_gemm.checks.sweep import check_sweep

    shapes = [(s, s, s) for s in (512, 1024, 2048, 4096)]
    fake_gpu.verdicts["kernel"] = GemmCheckFailure(STALE_OUTPUT, "the output of the last timed call is wrong", [])
    facts: dict = {}
    with pytest.raises(GemmCheckFailure) as info:
        check_sweep(fake_gpu.harness(), shapes, facts.update, measure_roofs=False)
    assert info.value.category == STALE_OUTPUT and facts["sweep_order"]


def test_an_impossible_rate_in_the_sweep_is_a_timing_escape_naming_the_size(fake_gpu):
    from pytest_gemm.model.categories import TIMING_ESCAPE, GemmCheckFailure
    from pytest_gemm.checks.sweep import check_sweep

    fake_gpu.speeds["kernel"] = lambda s: 2e-12 * s[0] * s[1] * s[2] / 500 * 1e3  # 500 TFLOP/s in fp32
    with pytest.raises(GemmCheckFailure) as info:
        check_sweep(fake_gpu.harness(), [(2048, 2048, 2048)], {}.update, measure_roofs=False)
    assert info.value.category == TIMING_ESCAPE
    assert "sweep at 2048x2048x2048" in str(info.value) and "faster than this GPU's fp32-accurate (3xTF32 on tensor cores) roof" in str(info.value)
