"""The ranking table and the JSON report, built from check records (no GPU)."""
from __future__ import annotations

import json

from pytest_gemm.outputs.report import build_report, ranking_rows, ranking_table


def _record(kernel, check, outcome="passed", category=None, **facts):
    rec = {"kernel": kernel, "precision": "fp32", "check": check, "shape": [64, 64, 64], "params": {},
           "outcome": outcome, "category": category, "message": None}
    rec.update(facts)
    return rec


def _speed(kernel, ms, tflops, fraction, **extra):
    timing = {"shape": [4096, 4096, 4096], "median_ms": ms, "min_ms": ms, "spread": 0.01, "tflops": tflops}
    return _record(kernel, "speed", timing=timing, fraction_of_cublas=fraction, fraction_of_roof=0.5,
                   cublas={"median_ms": 2.7}, **extra)


def test_only_correct_kernels_are_ranked_fastest_first_and_the_rest_listed_with_categories():
    records = [
        _record("slow", "exact"), _speed("slow", 10.0, 13.7, 0.27),
        _record("fast", "exact"), _speed("fast", 3.0, 45.8, 0.9),
        _record("wrong", "exact", "failed", "unwritten_output"), _speed("wrong", 1.0, 137.0, 2.7),
    ]
    ranked, unranked = ranking_rows(records)
    assert [r[1] for r in ranked] == ["fast", "slow"] and [r[0] for r in ranked] == [1, 2]
    assert [row[:3] for row in unranked] == [["wrong", "fp32", "unwritten_output"]]  # never a speed for a failed kernel
    text = "\n".join(ranking_table(records))
    assert "not ranked" in text and "137" not in text


def test_timings_taken_on_a_shared_gpu_are_marked():
    ranked, _ = ranking_rows([_record("k", "exact"), _speed("k", 3.0, 45.8, 0.9, gpu_shared=True)])
    assert "GPU shared" in ranked[0][1]


def test_ladder_rungs_timed_for_the_ranking_are_ranked_and_marked():
    records = [_record("mine", "exact"), _speed("mine", 3.0, 45.8, 0.9), _speed("warptile", 2.9, 47.0, 0.93, ladder=True)]
    ranked, unranked = ranking_rows(records)
    assert [r[1] for r in ranked] == ["warptile (ladder)", "mine"] and not unranked
    kernels = {k["name"]: k for k in build_report(records, {})["kernels"]}
    assert kernels["warptile"].get("ladder") is True and "ladder" not in kernels["mine"]


def test_json_report_has_schema_verdicts_checks_and_timings():
    records = [_record("k", "exact"), _record("k", "guards", "failed", "out_of_bounds_write"), _speed("k", 3.0, 45.8, 0.9)]
    report = json.loads(json.dumps(build_report(records, {"name": "GPU"})))
    assert report["schema_version"] == 3 and report["device"] == {"name": "GPU"}
    (kernel,) = report["kernels"]
    assert kernel["verdict"] == "failed" and kernel["primary_category"] == "out_of_bounds_write"
    assert kernel["primary_check"].startswith("guards") and kernel["consequences"] == []
    assert {c["check"] for c in kernel["checks"]} == {"exact", "guards", "speed"}
    assert kernel["timings"][0]["fraction_of_cublas"] == 0.9


def test_json_report_counts_timed_calls_whose_launch_outlasted_the_guard():
    late = _speed("late", 3.0, 45.8, 0.9)
    late["timing"]["late_launches"] = 4
    kernels = {k["name"]: k for k in build_report([late, _speed("prompt", 3.0, 45.8, 0.9)], {})["kernels"]}
    assert kernels["late"]["timings"][0]["late_launches"] == 4
    assert kernels["prompt"]["timings"][0]["late_launches"] == 0
