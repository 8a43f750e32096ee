"""--gemm-compare and --gemm-compare-fail through pytest itself, on a fake GPU (tests/fakegpu.py):
bad values refused at once with the value and what is valid, scipy missing named with the extra
to install, and the gate end to end (a saved run, then a 3 % slowdown and a 0.4 % shift); the
report's meta block, the terminal header and JUnit's gemm:run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fakegpu
from pytest_gemm.outputs.report_schema import validate


def _run(folder: Path, *args: str, speed: str | None = None, seed: str = "0",
         extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = fakegpu.env(folder, FAKEGPU_SEED=seed, **(extra_env or {}))
    if speed is not None:
        env["FAKEGPU_SPEED"] = speed
    argv = [sys.executable, "-m", "pytest", "-p", "fakegpu", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
            "-k", "speed", "--gemm-kernel", "fake_kernels.py:ok", "--gemm-kernel", "fake_kernels.py:slow", *args]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("compare")
    (folder / "fake_kernels.py").write_text(fakegpu.FAKE_KERNELS)
    (folder / "not_a_report.json").write_text(json.dumps({"hello": 1}))
    (folder / "no_name.json").write_text(json.dumps({"kernels": [{"verdict": "passed", "timings": []}]}))
    (folder / "null_time.json").write_text(json.dumps({"kernels": [{"name": "ok", "timings": [
        {"shape": [4096, 4096, 4096], "median_ms": 1.0, "times_ms": [1.0, None, 1.0]}]}]}))
    return folder


@pytest.fixture(scope="module")
def baseline(folder: Path) -> Path:
    run = _run(folder, "--gemm-report", "base.json", "--junitxml", "base.xml", speed="1.0")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return folder / "base.json"


@pytest.mark.parametrize("args, expected", [
    (["--gemm-compare", "base.json", "--gemm-compare-fail", "5"],
     "--gemm-compare-fail '5': expected a percentage above 0, e.g. 5% or 2.5%"),
    (["--gemm-compare", "base.json", "--gemm-compare-fail=fast"], "--gemm-compare-fail 'fast': expected a percentage"),
    (["--gemm-compare-fail=5%"], "--gemm-compare-fail=5% needs the saved run to compare with: add --gemm-compare"),
    (["--gemm-compare", "base.json", "--gemm-compare-noise", "2"], "--gemm-compare-noise '2': expected a percentage"),
    (["--gemm-compare-noise=2%"], "--gemm-compare-noise=2% needs the saved run to compare with: add --gemm-compare"),
    (["--gemm-compare", "missing.json"], "--gemm-compare 'missing.json': cannot read it"),
    (["--gemm-compare", "not_a_report.json"], "--gemm-compare 'not_a_report.json': not a pytest-gemm report"),
    # edited or corrupt: refused now, not a traceback after the whole run (that lost the run's own report)
    (["--gemm-compare", "no_name.json"], "--gemm-compare 'no_name.json': not a report a run wrote (kernels[0] has no name)"),
    (["--gemm-compare", "null_time.json"], "ok: timings[0]: 'times_ms' is not a list of numbers"),
])
def test_bad_values_end_the_run_at_once_echoing_the_value(folder, baseline, args, expected):
    run = _run(folder, *args)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout[-2000:]
    assert expected in run.stderr, run.stderr[-2000:]
    assert "passed" not in run.stdout  # refused before any test ran


def test_without_scipy_the_option_names_the_extra_to_install(folder, baseline, tmp_path):
    (tmp_path / "scipy").mkdir()
    (tmp_path / "scipy" / "__init__.py").write_text("raise ImportError('No module named scipy (hidden by the test)')\n")
    env_path = os.pathsep.join([str(tmp_path), fakegpu.env(folder)["PYTHONPATH"]])
    run = _run(folder, "--gemm-compare", "base.json", extra_env={"PYTHONPATH": env_path})
    assert run.returncode == pytest.ExitCode.USAGE_ERROR
    assert "needs scipy" in run.stderr and "pip install 'pytest-gemm[compare]'" in run.stderr, run.stderr[-2000:]


def test_the_report_carries_meta_and_the_header_and_junit_its_short_form(folder, baseline):
    report = json.loads(baseline.read_text())
    validate(report)
    meta = report["meta"]
    assert meta["command"].startswith("pytest ") and "--gemm-report base.json" in meta["command"]
    assert meta["cwd"] == str(folder) and meta["kernels"][0]["dir"] == str(folder) and meta["kernels"][0]["commit"] is None
    timing = {k["name"]: k for k in report["kernels"]}["ok"]["timings"][0]
    assert len(timing["times_ms"]) == 50 and len(timing["cublas_times_ms"]) == 50
    assert 'name="gemm:run" value="pytest-gemm ' in (folder / "base.xml").read_text()
    run = _run(folder, "--co", "-v")  # -q and -v: the default verbosity, which prints the header
    assert "\npytest-gemm: 0.1.0, CuPy " in run.stdout and ", GPU none" in run.stdout, run.stdout[:2000]


def test_a_3_percent_slowdown_fails_the_gate_at_2_percent(folder, baseline):
    run = _run(folder, "--gemm-compare", "base.json", "--gemm-compare-fail=2%", "-v", speed="1.03", seed="1")
    out = run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert "--gemm-compare:" in out and "compared with base.json" in out
    assert "slower FAIL" in out and "2 timings compared (time; noise band +-1.0%" in out
    assert "FAILED --gemm-compare-fail=2% against base.json: ok at 4096x4096x4096 is 3" in out
    assert "pytest-gemm: comparing with base.json" in out  # the header names the saved run


def test_a_wider_noise_band_is_used_and_said(folder, baseline):
    run = _run(folder, "--gemm-compare", "base.json", "--gemm-compare-fail=2%", "--gemm-compare-noise=2%",
               speed="1.03", seed="1")
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout[-3000:]
    assert "timings compared (time; noise band +-2.0%" in run.stdout and "slower FAIL" in run.stdout


def test_a_0_4_percent_shift_passes_and_without_a_threshold_nothing_fails(folder, baseline):
    run = _run(folder, "--gemm-compare", "base.json", "--gemm-compare-fail=2%", speed="1.004", seed="2")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "slower" not in run.stdout.split("--gemm-compare:")[1].split("timings compared")[0]
    assert "--gemm-compare-fail=2%: passed" in run.stdout
    run = _run(folder, "--gemm-compare", "base.json", speed="1.10", seed="3")
    assert run.returncode == 0 and "slower" in run.stdout  # reported, not gated


def test_the_ci_example_saves_a_baseline_on_main_and_gates_pull_requests_on_it():
    yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")
    root = Path(__file__).resolve().parent.parent
    steps = yaml.safe_load((root / "examples/ci/github-actions.yml").read_text())["jobs"]["gpu"]["steps"]
    saved = [s for s in steps if str(s.get("with", {}).get("name", "")).startswith("gemm-baseline-")]
    save = next(s for s in saved if "upload-artifact" in s["uses"])
    fetch = next(s for s in saved if "download-artifact" in s["uses"])
    assert "refs/heads/main" in save["if"] and save["with"]["path"] == "report-${{ matrix.gpu }}.json"
    assert "pull_request" in fetch["if"]
    gated = [s["run"] for s in steps if "--gemm-compare " in str(s.get("run", ""))]
    assert len(gated) == 1 and "--gemm-compare-fail=5%" in gated[0] and "baseline/report-${{ matrix.gpu }}.json" in gated[0]
    # the baseline comes from main's latest run that succeeded (a running or failed one saved none),
    # and a pull request that found none says it was not compared rather than pass ungated in silence
    (find,) = [s["run"] for s in steps if "gh run list" in str(s.get("run", ""))]
    assert "--status success" in find and "--branch main" in find
    assert "::warning::no baseline" in gated[0]


def test_a_comparison_that_cannot_be_made_costs_neither_the_report_nor_the_summary(folder, baseline, tmp_path):
    """Whatever goes wrong inside the comparison, the run's own report is written (before it) and
    the gate fails saying why; the summary still comes. A stand-in compare that raises, through
    a plugin loaded beside fakegpu."""
    (tmp_path / "broken_compare.py").write_text(
        "import pytest_gemm.outputs.compare as c\n"
        "def boom(*a, **k):\n    raise KeyError('name')\n"
        "c.compare = boom\n")
    run = _run(folder, "--gemm-compare", "base.json", "--gemm-compare-fail=2%", "--gemm-report", str(tmp_path / "now.json"),
               "-p", "broken_compare", speed="1.0", extra_env={"PYTHONPATH": os.pathsep.join(
                   [str(tmp_path), fakegpu.env(folder)["PYTHONPATH"]])})
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "the comparison could not be made (KeyError: 'name')" in run.stdout
    validate(json.loads((tmp_path / "now.json").read_text()))


def test_a_baseline_without_meta_is_named_for_what_it_is_in_the_header(folder, baseline):
    old = json.loads(baseline.read_text())
    old.pop("meta")
    (folder / "nometa.json").write_text(json.dumps(old))
    run = _run(folder, "--gemm-compare", "nometa.json", "--co", "-v")  # -q and -v: the header's verbosity
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "pytest-gemm: comparing with nometa.json: a report older than schema 3 (no meta block" in run.stdout
    assert "pytest-gemm: no meta block" not in run.stdout
