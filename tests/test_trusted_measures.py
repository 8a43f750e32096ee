"""The run's shared measurements under confinement (measure/trusted_measures.py): a confined
kernel's process reads the roofs and cuBLAS times the class shares and cannot write them (a
submission graded first could otherwise set every other student's fraction of cuBLAS); the
judging process measures them before a speed check, once, and takes no GPU lock when they are
there. No GPU: the confinements are real, the measurements are stand-ins."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path

import pytest

from pytest_gemm.checks import sandbox_confine
from pytest_gemm.kernels import confine
from pytest_gemm.measure import gpu_lock as gpu_lock_module
from pytest_gemm.measure import run_cache, trusted_measures
from pytest_gemm.measure.gpu_lock import lock_paths
from pytest_gemm.measure.shared_files import shared_readable
from pytest_gemm.measure.timed import ROOFS_ENTRY, cublas_entry
from pytest_gemm.measure.timing import speed_settings

LEVELS = [pytest.param(level, marks=pytest.mark.skipif(confine.why_not(level) is not None,
                                                          reason=f"{level}: {confine.why_not(level)}"))
          for level in ("bubblewrap", "landlock")]
DEVICE = types.SimpleNamespace(index=0, name="Fake H200")
OPTIONS = {"speed_budget_s": 0.3, "speed_stop": 0.001}


@pytest.fixture
def measured(monkeypatch):
    """A class's measurement folder, as the gradebook names it (in the temporary directory, which
    a root grader's sandbox user can pass through), with cuBLAS's entry stored."""
    folder = Path(tempfile.mkdtemp(prefix="pytest-gemm-measured-test-"))
    monkeypatch.setenv(run_cache.CACHE_ENV, str(folder))
    run_cache.shared(DEVICE, "cublas-fp32", lambda: {"median_ms": 0.5})
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def submission(open_folder):
    return open_folder


@pytest.mark.parametrize("level", LEVELS)
def test_a_confined_kernel_reads_the_shared_measurements_and_cannot_change_them(measured, submission, monkeypatch,
                                                                                 level):
    monkeypatch.setattr(confine, "_active", level)
    entry = next(measured.glob("*.json"))
    forge = ("import json, os, pathlib, sys\n"
             "folder = pathlib.Path(os.environ['PYTEST_GEMM_MEASURE_CACHE'])\n"
             f"print(json.loads((folder / {entry.name!r}).read_text())['median_ms'])\n"
             "for how in ('overwrite', 'new', 'remove'):\n"
             "    try:\n"
             f"        if how == 'overwrite': (folder / {entry.name!r}).write_text('{{\"median_ms\": 1e9}}')\n"
             "        elif how == 'new': (folder / 'forged.json').write_text('{}')\n"
             f"        else: os.remove(folder / {entry.name!r})\n"
             "        print(how, 'worked')\n"
             "    except OSError:\n"
             "        print(how, 'refused')\n")
    cmd, popen, _ = sandbox_confine.confined_command([sys.executable, "-c", forge], str(submission / "kernel.py"),
                                                    str(submission), dict(os.environ))
    assert cmd[0] != sys.executable  # confined
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, **popen)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == ["0.5", "overwrite refused", "new refused", "remove refused"], done.stdout
    assert json.loads(entry.read_text()) == {"median_ms": 0.5} and sorted(p.name for p in measured.iterdir()) == [entry.name]


def test_without_confinement_the_kernels_process_is_not_bound_at_all(measured, submission, monkeypatch):
    monkeypatch.setattr(confine, "_active", "none")
    assert sandbox_confine.confined_command(["true"], str(submission / "kernel.py"), str(submission),
                                            dict(os.environ)) == (["true"], {}, dict(os.environ))
    assert not sandbox_confine.confines("k.py") and not sandbox_confine.confines("gemm:ladder")
    monkeypatch.setattr(confine, "_active", "bubblewrap")
    assert sandbox_confine.confines("k.py") and not sandbox_confine.confines("gemm:ladder")  # the ladder is ours


def test_the_folder_is_made_and_opened_to_read_only(tmp_path):
    folder = tmp_path / "measured"
    assert shared_readable({run_cache.CACHE_ENV: str(folder)}) == [str(folder)]
    assert folder.is_dir() and folder.stat().st_mode & 0o777 == 0o755
    assert shared_readable({}) == []


def test_a_process_that_cannot_store_what_it_measured_keeps_it_to_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "write_text", lambda self, text: (_ for _ in ()).throw(PermissionError(13, "read-only")))
    assert run_cache.shared(DEVICE, "roofs", lambda: {"tflops": 1.0}, directory=tmp_path) == {"tflops": 1.0}
    assert not run_cache.stored(DEVICE, "roofs", directory=tmp_path)


class _Stand:
    """The GPU work of trusted_measures, stood in: what it measured, and the holds it took (its
    rehearsal's steps say the real lock's state: "shared" or "none"; the exclusive hold is a
    stand-in, "lock"). ``staged``: what each cuBLAS timing was given as its staged inputs."""

    def __init__(self, monkeypatch):
        self.calls: list[str] = []
        self.staged: list = []
        self.rehearsal_budgets: list[float] = []
        monkeypatch.setattr("pytest_gemm.kernels.device.probe", lambda: DEVICE)
        runtime = types.SimpleNamespace(deviceSynchronize=lambda: self.step("synced"))
        monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
            cuda=types.SimpleNamespace(Stream=types.SimpleNamespace(null=contextlib.nullcontext()), runtime=runtime)))
        monkeypatch.setattr(trusted_measures, "harness_for", lambda kernel, device: f"harness of {kernel.name}")
        monkeypatch.setattr(trusted_measures, "stage_inputs", lambda harness, problems: self.step("stage")
                            or f"{harness}'s staged inputs")
        monkeypatch.setattr(trusted_measures, "timed_run", self.rehearsal)
        monkeypatch.setattr(trusted_measures, "problems_for", lambda precision, shape: self.calls.append("draw"))
        monkeypatch.setattr(trusted_measures, "_alone", self.alone)
        monkeypatch.setattr(trusted_measures, "_release", lambda: None)
        monkeypatch.setattr(trusted_measures, "gpu_quiet", lambda device, measured, step: self.calls.append("quiet"))
        monkeypatch.setattr(trusted_measures, "process_roofs", lambda device: run_cache.shared(
            device, ROOFS_ENTRY, lambda: self.calls.append("roofs") or {"tflops": {"fp32": 60.0}}))
        monkeypatch.setattr(trusted_measures, "time_cublas", self.cublas)

    @contextlib.contextmanager
    def alone(self):
        self.calls.append("lock")
        yield types.SimpleNamespace(step_aside=None)

    def step(self, name):
        held = gpu_lock_module._HELD.get(lock_paths()[0])
        self.calls.append(f"{name} ({'none' if held is None else 'alone' if held else 'shared'})")

    def rehearsal(self, harness, shape, budget_s, problems, stop_within=None, laps=None, staged=None):
        self.step("rehearsal")
        self.rehearsal_budgets.append(budget_s)
        assert staged == f"{harness}'s staged inputs"  # on what it staged: nothing uploaded twice
        return None, lambda: self.step("verify")

    def cublas(self, precision, shape, device, budget_s, problems, stop_within, staged=None):
        assert (budget_s, stop_within) == (0.3, 0.001)
        self.staged.append(staged)
        return run_cache.shared(device, cublas_entry(precision, shape, budget_s, stop_within),
                                lambda: self.calls.append(f"cublas {precision}") or {"median_ms": 0.5})


REHEARSED = ["stage (shared)", "rehearsal (shared)", "verify (shared)", "synced (shared)"]


def test_the_judging_process_measures_what_a_speed_check_reads_once_and_then_takes_no_lock(tmp_path, monkeypatch):
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", str(tmp_path / "lock"))
    stand = _Stand(monkeypatch)
    assert trusted_measures.measure_for_confined("fp32", (4096, 4096, 4096), OPTIONS)
    # cuBLAS's timed run rehearsed first, untimed, beside the other checks (its context, handle
    # and kernels made there), then measured alone on the inputs the rehearsal left on the GPU
    assert stand.calls == ["draw", *REHEARSED, "lock", "roofs", "quiet", "cublas fp32"]
    assert stand.staged == ["harness of cublas-fp32's staged inputs"] and stand.rehearsal_budgets == [0.0]
    for name in trusted_measures.wanted("fp32", (4096, 4096, 4096), OPTIONS):  # what the check will look up
        assert run_cache.stored(DEVICE, name)
    stand.calls.clear()
    assert not trusted_measures.measure_for_confined("fp32", (4096, 4096, 4096), OPTIONS)
    assert stand.calls == []  # the next student's process: no lock, no drawing, nothing measured
    assert trusted_measures.measure_for_confined("fp16", (4096, 4096, 4096), OPTIONS)
    assert stand.calls == ["draw", *REHEARSED, "lock", "quiet", "cublas fp16"]  # the roofs were there


def test_processes_that_need_the_same_measurement_wait_for_the_first_and_then_take_no_gpu(tmp_path, monkeypatch):
    """A class's first round reaches its speed checks together: one process rehearses and
    measures, the others wait for it holding nothing, then find the entries stored (each used
    to rehearse, then hold the GPU alone in turn to find them there)."""
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", str(tmp_path / "lock"))
    stand = _Stand(monkeypatch)
    measuring, finish = threading.Event(), threading.Event()
    cublas = stand.cublas

    def slow_cublas(*args, **kwargs):
        measuring.set()
        assert finish.wait(10)
        return cublas(*args, **kwargs)

    monkeypatch.setattr(trusted_measures, "time_cublas", slow_cublas)
    results: dict[str, bool] = {}  # each student's: whether it measured

    def student(name: str) -> None:
        results[name] = trusted_measures.measure_for_confined("fp32", (64, 64, 64), OPTIONS)

    first = threading.Thread(target=student, args=("first",))
    first.start()
    assert measuring.wait(10)
    second = threading.Thread(target=student, args=("second",))
    second.start()
    second.join(0.5)
    assert second.is_alive() and results == {}  # waiting for the first, not measuring beside it
    calls = list(stand.calls)
    finish.set()
    first.join(10)
    second.join(10)
    assert results == {"first": True, "second": False}
    assert stand.calls == [*calls, "cublas fp32"]  # the second: nothing drawn, rehearsed or held


def test_no_rehearsal_where_another_process_stored_cublas_while_the_roofs_are_missing(tmp_path, monkeypatch):
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("PYTEST_GEMM_LOCK_DIR", str(tmp_path / "lock"))
    stand = _Stand(monkeypatch)
    budget_s, stop_within = speed_settings(OPTIONS)
    run_cache.shared(DEVICE, cublas_entry("fp32", (64, 64, 64), budget_s, stop_within), lambda: {"median_ms": 0.5})
    assert trusted_measures.measure_for_confined("fp32", (64, 64, 64), OPTIONS)
    assert stand.calls == ["draw", "lock", "roofs"]  # nothing of cuBLAS's to make ready


def test_nothing_is_measured_without_a_shared_folder_a_gpu_or_a_cublas_baseline(tmp_path, monkeypatch):
    stand = _Stand(monkeypatch)
    monkeypatch.delenv(run_cache.CACHE_ENV, raising=False)
    assert not trusted_measures.measure_for_confined("fp32", (64, 64, 64), OPTIONS)
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path))
    assert not trusted_measures.measure_for_confined("int8-made-up", (64, 64, 64), OPTIONS)
    monkeypatch.setattr("pytest_gemm.kernels.device.probe", lambda: "no usable GPU: test")
    assert not trusted_measures.measure_for_confined("fp32", (64, 64, 64), OPTIONS)
    assert stand.calls == []


def test_a_failed_measurement_is_a_warning_and_the_kernels_check_measures_for_itself(tmp_path, monkeypatch):
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path))
    _Stand(monkeypatch)
    monkeypatch.setattr(trusted_measures, "time_cublas", lambda *a: (_ for _ in ()).throw(RuntimeError("cuBLAS broke")))
    with pytest.warns(UserWarning, match="measurement of the roofs and cuBLAS failed .*cuBLAS broke.*measures them itself"):
        assert not trusted_measures.measure_for_confined("fp32", (64, 64, 64), OPTIONS)


def test_the_speed_check_looks_up_the_entries_the_judging_process_stores(monkeypatch):
    """The names measured under are those the check's time_cublas and process_roofs look up,
    with the options the runner sends (the defaults too)."""
    from pytest_gemm.measure import timed

    looked_up: list[str] = []

    def shared(device, what, measure):
        looked_up.append(what)
        raise LookupError

    monkeypatch.setattr(timed, "shared", shared)
    for options in (OPTIONS, {"speed_budget_s": 0.3, "speed_stop": None}, {}):
        looked_up.clear()
        budget_s, stop_within = speed_settings(options)  # as checks/speed.py reads them
        with pytest.raises(LookupError):
            timed.time_cublas("fp32", (128, 256, 64), types.SimpleNamespace(index=7), budget_s, None, stop_within)
        timed.process_roofs(DEVICE)
        assert looked_up == list(reversed(trusted_measures.wanted("fp32", (128, 256, 64), options)))
    assert trusted_measures.wanted("fp32", (128, 256, 64), {}) == ["roofs", "cublas-fp32-128x256x64-1s-stop0.001"]
