"""Gradescope results.json from hand-made check records: pure, no GPU."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from pytest_gemm.grading.config import (DEFAULT_WEIGHTS, GradingConfig, user_test_record, visibility_from_marker,
                                        weight_from_marker)
from pytest_gemm.grading.gradescope import build_results, failure_results, write_failure_results, write_results

NO_GPU = "no usable GPU: cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
K = "student tiled"


def rec(check, outcome="passed", shape=(64, 64, 64), kernel=K, category=None, message=None, **extra):
    r = {"kernel": kernel, "precision": "fp32", "check": check, "shape": list(shape) if shape else None,
         "params": extra.pop("params", {}), "outcome": outcome, "category": category}
    if message is not None:
        r["message"] = message
    r.update(extra)
    return r


def speed(fraction=0.2, tflops=10.0, outcome="passed", category=None, kernel=K):
    return rec("speed", outcome, (4096, 4096, 4096), kernel=kernel, category=category,
               timing={"median_ms": 13.7, "min_ms": 13.5, "spread": 0.01, "tflops": tflops,
                       "shape": [4096, 4096, 4096]},
               fraction_of_cublas=fraction, cublas={"median_ms": 2.7})


def all_correct(kernel=K):
    """Every weighted check passed once."""
    return [rec(c, kernel=kernel) for c in ("launch", "exact", "coverage", "guards", "alphabeta",
                                            "deterministic", "accuracy")]


def by_name(results, name):
    """The one Gradescope test whose name starts with ``name``."""
    found = [t for t in results["tests"] if t["name"].startswith(name)]
    assert len(found) == 1, [t["name"] for t in results["tests"]]
    return found[0]


# ---- scoring ------------------------------------------------------------------------

def test_partial_credit_counts_passed_over_run_and_excludes_skipped_shapes():
    records = [rec("exact", shape=(16, 16, 16)), rec("exact", shape=(32, 32, 32)), rec("exact", shape=(64, 64, 64)),
               rec("exact", "failed", (1000, 1000, 1000), category="wrong_values",
                   message="[wrong_values] 'student tiled' at 1000x1000x1000: 8000 of 1000000 elements differ\n"
                           "  columns 992..999: N=1000 is not a multiple of your 16-wide tile"),
               rec("exact", "skipped", (7, 7, 7), message="kernel 'student tiled' declares multiple_of=(16, 16, 16): "
                                                          "M=7 is not a multiple of 16"),
               rec("exact", "skipped", (33, 33, 33), message="kernel 'student tiled' declares multiple_of=(16, 16, 16): "
                                                             "M=33 is not a multiple of 16")]
    results = build_results(records, GradingConfig())
    exact = by_name(results, "exact")
    assert exact["name"] == "exact (6 shapes)"
    assert exact["max_score"] == 40
    assert exact["score"] == pytest.approx(40 * 3 / 4)
    assert exact["status"] == "failed"
    assert "3 of 4 passed" in exact["output"]
    assert "2 skipped (not counted)" in exact["output"] and "multiple_of=(16, 16, 16)" in exact["output"]
    assert "wrong_values" in exact["tags"]
    json.dumps(results)  # JSON-able as is


def test_failure_output_lists_each_failure_with_its_category_and_first_lines():
    long_message = "[out_of_bounds_write] 'student tiled' at 17x33x65: 60 bytes after C were written\n" + \
        "\n".join(f"  detail line {i}" for i in range(20))
    records = [rec("guards", "failed", (17, 33, 65), category="out_of_bounds_write", message=long_message),
               rec("guards", "failed", (1, 1, 1), category="fault", message="guards raised CUDARuntimeError"),
               rec("guards", "failed", (5, 5, 5), category=None, message=None),
               rec("guards", shape=(64, 64, 64))]
    out = by_name(build_results(records), "guards")["output"]
    assert "1 of 4 passed" in out
    assert "- 17x33x65: [out_of_bounds_write] 'student tiled' at 17x33x65: 60 bytes after C were written" in out
    assert "detail line 4" in out and "detail line 5" not in out and "(15 more lines)" in out
    assert "- 1x1x1: [fault] guards raised CUDARuntimeError" in out      # the category is added when missing
    assert "- 5x5x5: failed (no message)" in out


def test_many_failures_are_capped_with_a_count():
    records = [rec("exact", "failed", (i, i, i), category="wrong_values", message=f"[wrong_values] at {i}")
               for i in range(1, 13)]
    out = by_name(build_results(records, GradingConfig(max_failures_listed=5)), "exact")["output"]
    assert out.count("\n- ") == 5 and "... and 7 more failures" in out


def test_a_group_where_nothing_ran_scores_zero_and_says_why():
    records = [rec("exact", "skipped", message=NO_GPU), rec("compile", params={"arch": "sm_80"}, shape=None)]
    results = build_results(records)
    exact = by_name(results, "exact")
    assert exact["score"] == 0 and exact["max_score"] == 40 and exact["status"] == "failed"
    assert "nothing ran: all 1 skipped" in exact["output"] and NO_GPU in exact["output"]
    # a weighted check with no case at all still appears, scored 0, with the likely reason
    ab = by_name(results, "alpha/beta")
    assert ab["score"] == 0 and ab["max_score"] == 5
    assert "no alpha/beta check ran for kernel 'student tiled'" in ab["output"]
    assert "signature takes alpha and beta" in ab["output"]
    # no GPU is said once, at the top, in words
    assert NO_GPU in results["output"] and "Every GPU check was skipped and scores 0" in results["output"]
    assert results["extra_data"]["pytest_gemm"]["no_gpu"] == NO_GPU
    compile_test = by_name(results, "compile")
    assert compile_test["name"] == "compile (1 architecture)" and compile_test["status"] == "passed"
    assert results["score"] == 0
    assert results["extra_data"]["pytest_gemm"]["max_score"] == sum(DEFAULT_WEIGHTS.values())


def test_total_score_is_the_sum_and_everything_correct_scores_full_marks():
    results = build_results(all_correct() + [speed()])
    assert results["score"] == pytest.approx(sum(DEFAULT_WEIGHTS.values()))
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))
    assert all(t["status"] == "passed" for t in results["tests"])
    names = [t["name"] for t in results["tests"]]
    assert names == ["launch (1 shape)", "exact (1 shape)", "coverage (1 shape)", "guards (1 shape)",
                     "alpha/beta (1 shape)", "deterministic (1 shape)", "accuracy (1 shape)", "speed"]


# ---- leaderboard --------------------------------------------------------------------

def test_leaderboard_shows_tflops_and_fraction_of_cublas_when_the_submission_is_correct():
    results = build_results(all_correct() + [speed(fraction=0.31234, tflops=15.9)])
    assert results["leaderboard"] == [{"name": "TFLOP/s", "value": 15.9, "order": "desc"},
                                      {"name": "fraction of cuBLAS", "value": 0.3123, "order": "desc"}]
    assert "leaderboard: 15.9 TFLOP/s" in results["output"]
    extra = results["extra_data"]["pytest_gemm"]
    assert extra["correct"] and extra["tflops"] == 15.9 and extra["fraction_of_cublas"] == 0.31234
    assert "15.90 TFLOP/s" in by_name(results, "speed")["output"]
    assert "speed_alone_s" not in extra  # a record from before the speed check's laps


def test_where_the_speed_checks_hold_of_the_gpu_went_is_in_the_staffs_data():
    alone = {"roofs": 0.21, "quiet": 0.01, "uploads": 0.3, "timed": 0.45, "verify": 0.12, "cublas": 0.0}
    record = speed()
    record["alone_s"] = alone
    assert build_results(all_correct() + [record])["extra_data"]["pytest_gemm"]["speed_alone_s"] == alone


def test_no_leaderboard_when_a_correctness_check_failed():
    records = all_correct() + [rec("coverage", "failed", (17, 33, 65), category="unwritten_output",
                                   message="[unwritten_output] columns 32..32 were never written"), speed()]
    results = build_results(records)
    assert "leaderboard" not in results
    assert ("not on the leaderboard: unwritten_output (coverage 17x33x65): columns 32..32 were never written"
            in results["output"])
    assert results["extra_data"]["pytest_gemm"]["primary_category"] == "unwritten_output"
    assert results["extra_data"]["pytest_gemm"]["tflops"] == 10.0  # still reported to staff


def test_no_leaderboard_when_nothing_was_verified_or_timing_is_untrusted():
    assert "leaderboard" not in build_results([rec("exact", "skipped", message=NO_GPU), speed()])
    escaped = speed(outcome="failed", category="timing_escape")
    results = build_results(all_correct() + [escaped])
    assert "leaderboard" not in results
    assert "no trustworthy timing" in results["output"]


def test_work_off_the_callers_stream_is_named_wrong_stream_and_kept_off_the_leaderboard():
    """The launch check's stream probe (rule 2a): a stream-ordering bug, named as one, with what to
    do, and no trustworthy timing (its work is not inside the caller's timing either)."""
    launch = rec("launch", "failed", category="wrong_stream",
                 message="[wrong_stream] 'student tiled' at 64x64x64: the launcher wrote C on another stream while the "
                         "current stream was still held\n  CuPy: launch on the current stream, "
                         "cupy.cuda.get_current_stream()")
    results = build_results([launch] + all_correct()[1:] + [speed()])
    assert "leaderboard" not in results
    assert ("not on the leaderboard (no trustworthy timing): wrong_stream (launch 64x64x64): 'student tiled' at "
            "64x64x64: the launcher wrote C on another stream" in results["output"]), results["output"]
    extra = results["extra_data"]["pytest_gemm"]
    assert extra["primary_category"] == "wrong_stream" and extra["failure_categories"] == ["wrong_stream"]
    assert extra["correct"] is False and "timing_escape" not in json.dumps(results)
    out = by_name(results, "launch")
    assert "wrong_stream" in out["tags"] and "cupy.cuda.get_current_stream()" in out["output"]


def test_leaderboard_is_the_first_kernel_and_other_kernels_are_prefixed():
    records = all_correct("mine") + [speed(0.2, 10.0, kernel="mine")] + all_correct("second") + \
        [speed(0.9, 45.0, kernel="second")]
    results = build_results(records)
    assert results["leaderboard"][0]["value"] == 10.0
    assert any(t["name"] == "second: exact (1 shape)" for t in results["tests"])
    assert results["extra_data"]["pytest_gemm"]["kernels"] == ["mine", "second"]


def test_only_the_kernels_under_test_are_graded():
    ladder = all_correct("tiled16") + [speed(0.16, 8.1, kernel="tiled16")]
    results = build_results(ladder + [rec("exact", kernel=K)], kernels=[K])
    assert all(not t["name"].startswith("tiled16") for t in results["tests"])
    assert results["extra_data"]["pytest_gemm"]["submission"] == K
    # a kernel under test with no record at all still gets its tests, scored 0
    empty = build_results(ladder, kernels=[K])
    assert by_name(empty, "exact")["score"] == 0 and "no exact check ran" in by_name(empty, "exact")["output"]


# ---- speed threshold ----------------------------------------------------------------

def test_speed_is_pass_fail_without_a_threshold():
    assert by_name(build_results([speed(0.01)]), "speed")["score"] == 10
    gate = speed(0.01, outcome="failed", category=None)
    gate["message"] = "'student tiled' runs at 0.010 of cuBLAS fp32; --gemm-min-cublas-fraction asks for 0.5"
    out = by_name(build_results([gate]), "speed")
    assert out["score"] == 0 and "0.010 of cuBLAS" in out["output"]


@pytest.mark.parametrize("fraction, credit", [(0.15, 0.5), (0.3, 1.0), (0.9, 1.0), (0.0, 0.0)])
def test_speed_threshold_gives_full_weight_at_the_threshold_and_linear_below(fraction, credit):
    config = GradingConfig(performance_threshold=0.3)
    test = by_name(build_results([speed(fraction)], config), "speed")
    assert test["score"] == pytest.approx(10 * credit)
    assert "full credit at 0.3 x cuBLAS" in test["output"]


def test_speed_threshold_gives_nothing_for_an_untrusted_timing():
    config = GradingConfig(performance_threshold=0.3)
    assert by_name(build_results([speed(5.0, outcome="failed", category="timing_escape")], config),
                   "speed")["score"] == 0
    assert by_name(build_results([speed(0.5, outcome="failed", category="stale_output")], config),
                   "speed")["score"] == 0


# ---- visibility ---------------------------------------------------------------------

def test_visibility_per_check_and_for_the_whole_result():
    config = GradingConfig(visibility={"speed": "after_published", "guards": "hidden"},
                           results_visibility="after_due_date", stdout_visibility="visible")
    results = build_results(all_correct() + [speed()], config)
    assert by_name(results, "speed")["visibility"] == "after_published"
    assert by_name(results, "guards")["visibility"] == "hidden"
    assert by_name(results, "exact")["visibility"] == "visible"
    assert results["visibility"] == "after_due_date" and results["stdout_visibility"] == "visible"
    assert build_results([])["stdout_visibility"] == "hidden"  # pytest's output stays with the staff


def test_no_records_at_all_still_gives_a_valid_result():
    results = build_results([])
    assert results["score"] == 0 and results["tests"] == []
    assert "no kernel was checked" in results["output"]


def test_failure_results_and_written_files(tmp_path):
    failed = failure_results("timed out after 600 s", 100)
    assert failed["score"] == 0 and failed["tests"][0]["max_score"] == 100
    assert failed["tests"][0]["output"] == "timed out after 600 s"
    path = tmp_path / "deep" / "results.json"
    written = write_results(path, all_correct() + [speed()])
    assert json.loads(path.read_text()) == written
    write_failure_results(path, "--gemm-kernel 'k.py:kernel': k.py has no attribute 'kernel'")
    data = json.loads(path.read_text())
    assert data["score"] == 0 and "has no attribute 'kernel'" in data["output"]
    assert data["tests"][0]["max_score"] == sum(DEFAULT_WEIGHTS.values())


# ---- configuration from the ini -----------------------------------------------------

def test_from_ini_reads_weights_visibilities_and_threshold():
    ini = {"gemm_weights": ["exact = 45", "speed = 15 after_published", "alphabeta = 0  # no alpha/beta here"],
           "gemm_visibility": "guards = hidden\nstdout = visible\nresults = after_due_date\n# comment",
           "gemm_performance_threshold": "0.3"}
    config = GradingConfig.from_ini(ini)
    assert config.weights["exact"] == 45 and config.weights["speed"] == 15 and config.weights["alphabeta"] == 0
    assert config.weights["coverage"] == 10  # unlisted checks keep their defaults
    assert config.visibility == {"speed": "after_published", "guards": "hidden"}
    assert config.stdout_visibility == "visible" and config.results_visibility == "after_due_date"
    assert config.performance_threshold == 0.3
    assert config.max_score() == 45 + 10 + 10 + 0 + 10 + 15 + 15


def test_from_ini_takes_getini_and_defaults_for_missing_keys():
    values = {"gemm_weights": [], "gemm_visibility": [], "gemm_performance_threshold": ""}
    assert GradingConfig.from_ini(values.__getitem__) == GradingConfig()

    def unregistered(name):
        raise ValueError(f"unknown configuration value: {name!r}")

    assert GradingConfig.from_ini(unregistered) == GradingConfig()
    assert GradingConfig.from_ini({}).weights == DEFAULT_WEIGHTS


@pytest.mark.parametrize("ini, echoed, listed", [
    ({"gemm_weights": ["exct = 40"]}, "'exct'", "exact, coverage, guards"),
    ({"gemm_weights": ["exact = forty"]}, "'forty'", "e.g. 40"),
    ({"gemm_weights": ["exact = -5"]}, "'-5'", ">= 0"),
    ({"gemm_weights": ["exact = nan"]}, "'nan'", ">= 0"),
    ({"gemm_weights": ["speed = 10 hiden"]}, "'hiden'", "visible, hidden, after_due_date, after_published"),
    ({"gemm_weights": ["exact 40"]}, "'exact 40'", "'exact = 40'"),
    ({"gemm_weights": ["exact = 40", "exact = 30"]}, "'exact'", "given twice"),
    ({"gemm_weights": ["speed = 10 hidden extra"]}, "'speed = 10 hidden extra'", "check = points [visibility]"),
    ({"gemm_visibility": ["speed = secret"]}, "'secret'", "visible, hidden, after_due_date, after_published"),
    ({"gemm_visibility": ["stdot = hidden"]}, "'stdot'", "default, results, stdout"),
    ({"gemm_performance_threshold": "fast"}, "'fast'", "fraction of cuBLAS"),
    ({"gemm_performance_threshold": "0"}, "'0'", "(0, 10]"),
])
def test_config_errors_echo_the_bad_value_and_list_the_valid_ones(ini, echoed, listed):
    with pytest.raises(ValueError) as info:
        GradingConfig.from_ini(ini)
    message = str(info.value)
    assert echoed in message and listed in message
    assert message.startswith(next(iter(ini)))  # names the ini key


def test_the_dataclass_validates_too():
    with pytest.raises(ValueError, match="'loud'.*valid visibilities"):
        GradingConfig(results_visibility="loud")
    with pytest.raises(ValueError, match="unknown check 'exactt'"):
        GradingConfig(weights={"exactt": 3})


# ---- markers on the user's own tests ------------------------------------------------

class FakeItem:
    def __init__(self, nodeid, **markers):
        self.nodeid = nodeid
        self.markers = {name: SimpleNamespace(args=args, kwargs=kwargs) for name, (args, kwargs) in markers.items()}

    def get_closest_marker(self, name):
        return self.markers.get(name)


def test_marker_readers():
    item = FakeItem("tests/test_mine.py::test_tiles[16]", gemm_weight=((5,), {}),
                    gemm_visibility=(("hidden",), {}))
    assert weight_from_marker(item) == 5.0 and visibility_from_marker(item) == "hidden"
    assert weight_from_marker(FakeItem("t::x", gemm_weight=((), {"points": 2.5}))) == 2.5
    plain = FakeItem("t::x")
    assert weight_from_marker(plain) is None and visibility_from_marker(plain) is None
    assert user_test_record(plain, "passed") is None
    with pytest.raises(ValueError, match=r"t::x: use @pytest.mark.gemm_weight\(points\).*'five'"):
        weight_from_marker(FakeItem("t::x", gemm_weight=(("five",), {})))
    with pytest.raises(ValueError, match=r"gemm_weight\(points\).*got args=\(\)"):
        weight_from_marker(FakeItem("t::x", gemm_weight=((), {})))
    with pytest.raises(ValueError, match="'secret'.*visible, hidden, after_due_date, after_published"):
        visibility_from_marker(FakeItem("t::x", gemm_visibility=(("secret",), {})))


def test_user_tests_become_one_gradescope_test_per_test_function():
    def item(param):
        return FakeItem(f"tests/test_mine.py::test_tiles[{param}]", gemm_weight=((6,), {}),
                        gemm_visibility=(("after_due_date",), {}))

    records = [user_test_record(item("16"), "passed"), user_test_record(item("32"), "passed"),
               user_test_record(item("64"), "failed", message="AssertionError: tile 64 is wrong")]
    assert records[0]["check"] == "tests/test_mine.py::test_tiles" and records[0]["params"] == {"id": "16"}
    results = build_results(all_correct() + [speed()] + records)
    mine = by_name(results, "tests/test_mine.py::test_tiles")
    assert mine["name"] == "tests/test_mine.py::test_tiles (3 cases)"
    assert mine["score"] == pytest.approx(6 * 2 / 3) and mine["max_score"] == 6
    assert mine["visibility"] == "after_due_date"
    assert "- 64: AssertionError: tile 64 is wrong" in mine["output"]
    assert "leaderboard" in results  # a user test is not one of the kernel's correctness checks
    # a weight can also come from gemm_weights by node id
    config = GradingConfig.from_ini({"gemm_weights": ["tests/test_mine.py::test_tiles = 9"]})
    unmarked = [dict(r, weight=None) for r in records]
    assert by_name(build_results(unmarked, config), "tests/test_mine.py")["max_score"] == 9


# ---- through the plugin: --gemm-gradescope (needs the plugin's wiring) ---------------

def _wired() -> bool:
    import inspect

    import pytest_gemm.plugin

    return "--gemm-gradescope" in inspect.getsource(pytest_gemm.plugin)


wired = pytest.mark.skipif(not _wired(), reason="plugin.py does not define --gemm-gradescope yet")


@wired
def test_user_tests_with_markers_are_graded_through_the_plugin(pytester: pytest.Pytester):
    pytester.makeini("""
        [pytest]
        gemm_weights =
            exact = 0
        gemm_visibility =
            stdout = visible
    """)
    pytester.makepyfile(test_hw="""
        import pytest

        @pytest.mark.gemm_weight(4)
        @pytest.mark.parametrize("n", [1, 2, 3, 4])
        def test_tiles(n):
            assert n != 4, "tile 4 is wrong"

        @pytest.mark.gemm_weight(2)
        @pytest.mark.gemm_visibility("hidden")
        def test_hidden():
            pass

        def test_unweighted():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gemm-gradescope", "out/results.json")
    result.assert_outcomes(passed=5, failed=1)
    data = json.loads((pytester.path / "out" / "results.json").read_text())
    tests = {t["name"]: t for t in data["tests"]}
    assert set(tests) == {"test_hw.py::test_tiles (4 cases)", "test_hw.py::test_hidden"}
    assert tests["test_hw.py::test_tiles (4 cases)"]["score"] == 3 and "tile 4 is wrong" in \
        tests["test_hw.py::test_tiles (4 cases)"]["output"]
    assert tests["test_hw.py::test_hidden"]["visibility"] == "hidden"
    assert data["score"] == 5 and data["stdout_visibility"] == "visible" and "execution_time" in data


@wired
@pytest.mark.parametrize("ini, echoed", [("gemm_weights = exact = lots", "'lots'"),
                                         ("gemm_performance_threshold = fast", "'fast'")])
def test_a_bad_grading_ini_is_a_usage_error(pytester: pytest.Pytester, ini, echoed):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert echoed in result.stderr.str() and "Traceback" not in result.stderr.str()


@wired
def test_a_bad_marker_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_x="""
        import pytest
        @pytest.mark.gemm_weight("five")
        def test_x(): pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "use @pytest.mark.gemm_weight(points)" in result.stderr.str() and "'five'" in result.stderr.str()


@wired
def test_a_spec_error_still_writes_results_that_say_why(pytester: pytest.Pytester):
    pytester.makepyfile(mine="x = 1")
    pytester.path.chmod(0o755)  # graded confined: run by root, the submission is read as a user of its own
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gemm-kernel", "mine.py:kernel",
                                           "--gemm-gradescope", "results.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    data = json.loads((pytester.path / "results.json").read_text())
    assert data["score"] == 0 and "has no attribute 'kernel'" in data["output"]


def test_each_checks_wall_time_is_summed_in_the_extra_data():
    records = [rec("exact", wall_s=0.5), rec("exact", shape=(1, 1, 1), wall_s=0.25),
               rec("coverage", wall_s=1.0), rec("guards")]
    checks = build_results(records)["extra_data"]["pytest_gemm"]["checks"]
    assert checks["exact"]["wall_s"] == 0.75 and checks["coverage"]["wall_s"] == 1.0
    assert checks["guards"]["wall_s"] == 0.0  # no wall time recorded: nothing invented
