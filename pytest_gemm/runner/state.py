"""The run's configuration and collected records, kept in ``config.stash``."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..model.contract import GemmKernel
from ..measure.timing import DEFAULT_BUDGET_S, DEFAULT_STOP
from ..model.shapes import Shape

RESULT_PROPERTY = "gemm_result"
GRADED_PROPERTY = "gemm_graded"  # a user test with gemm_weight / gemm_visibility markers
# Found through pytest-gemm's own files (kernels/loader.py), never `import reference_kernels`,
# which a user's folder of that name would shadow.
LADDER_SPEC = "gemm:reference_kernels:LADDER"


@dataclass
class GemmState:
    kernels: list[GemmKernel]
    user_kernels: bool                 # given with --gemm-kernel / gemm_kernels
    arches: list[str] | None           # --gemm-arch: compile-only mode
    bench_shape: tuple[int, int, int]
    min_cublas_fraction: float | None
    isolation: str = "process"
    timeout: float | None = None
    gpu_shared: bool = False           # xdist workers outnumber GPUs: timings are marked
    results: list[Any] = field(default_factory=list)               # outputs.records.CheckRecord, as they come
    run: Any = None                    # outputs.records.RunResults, built once at the end (results.run_results)
    sandboxes: dict[Any, Any] = field(default_factory=dict)   # kernel id (or "ladder") -> SandboxClient, LRU order
    hangs: dict[Any, Any] = field(default_factory=dict)       # (spec, index) -> checks.hangs.HangLedger
    tuned_at_run_time: set[Any] = field(default_factory=set)  # (spec, index) of kernels seen autotuning
    cases: dict[Any, list[Any]] = field(default_factory=dict)  # (spec, index) -> its (check, shape, params), collected
    shapes: str = "full"               # --gemm-shapes: full, or quick (each check's small representative set)
    compile_arches: str = "claimed"    # gemm_compile_arches: claimed, or device (this GPU's only, when there is one)
    speed_budget_s: float = DEFAULT_BUDGET_S  # gemm_speed_budget: measured GPU seconds per timing of the speed check
    speed_stop: float | None = DEFAULT_STOP   # gemm_speed_stop: the repeats stop once the median is known to this fraction
    grading: Any = None                                          # grading.config.GradingConfig
    sweep: list[tuple[int, int, int]] | None = None              # --gemm-sweep sizes
    plot: str | None = None                                      # --gemm-plot path
    notes: list[str] = field(default_factory=list)               # lines for the terminal summary
    graded: list[dict[str, Any]] = field(default_factory=list)   # user tests' records
    started: float = field(default_factory=time.monotonic)
    rank_ladder: bool = False          # --gemm-ladder: time the ladder beside the kernels under test
    ladder: list[GemmKernel] | None = None                       # those rungs, once loaded
    active: bool = False               # a gemm option or ini key is set (else the plugin stays inert)
    require_gpu: bool = False          # --gemm-require-gpu / gemm_require_gpu: no GPU check ran -> failed
    pinned: bool = False               # this xdist worker's GPU was chosen
    confinement: str = "none"          # kernels/confine.py: what submitted code runs under (runner/confinement.py)
    grading_run: bool = False          # --gemm-gradescope: the terminal names the confinement even when none


STATE = pytest.StashKey[GemmState]()


_MISSING: Any = object()


def state(config: pytest.Config, default: Any = _MISSING) -> GemmState:
    """The run's state; ``default`` when the plugin never configured this run."""
    if default is not _MISSING:
        return config.stash.get(STATE, default)
    return config.stash[STATE]


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")



def kernels_under_test(config: pytest.Config) -> list[GemmKernel]:
    st = state(config)
    if not st.kernels:  # the ladder is the default target, loaded only when a test asks for it
        # lazy: keeps kernels.autotune, kernels.confine, kernels.declared, kernels.loader out of the plugin's load
        from ..kernels.loader import load_spec

        st.kernels = load_spec(LADDER_SPEC)
    return st.kernels


def ladder_for_ranking(config: pytest.Config) -> list[GemmKernel]:
    """With --gemm-ladder, the ladder rungs and cuBLAS baselines timed beside the kernels under
    test: those of the precisions under test (none when the ladder itself is under test)."""
    st = state(config)
    if not st.rank_ladder:
        return []
    if st.ladder is None:
        # lazy: keeps kernels.autotune, kernels.confine, kernels.declared, kernels.loader out of the plugin's load
        from ..kernels.loader import load_spec

        under_test = kernels_under_test(config)
        precisions = {k.precision for k in under_test}
        ladder_under_test = any(_is_ladder_spec(getattr(k, "origin_spec", ("", 0))[0]) for k in under_test)
        st.ladder = [] if ladder_under_test else \
            [k for k in load_spec(LADDER_SPEC) if k.precision in precisions]
    return st.ladder


def _is_ladder_spec(spec: str) -> bool:
    module = spec.rpartition(":")[0]
    module = module[len("gemm:"):] if module.startswith("gemm:") else module
    return module.split(".")[0] == "reference_kernels"


def is_ladder_entry(config: pytest.Config, kernel: GemmKernel) -> bool:
    """True for a rung timed only for the ranking (not a kernel under test)."""
    return any(kernel is k for k in state(config).ladder or ())



def requested_sweep(config: Any) -> list[Shape] | None:
    """The sizes asked for with ``--gemm-sweep`` (None when not given); a bad value is a UsageError."""
    from ..measure.sweep import parse_sweep  # lazy: keeps measure.sweep out of the plugin's load

    st = config.stash.get(STATE, None)
    if st is not None and getattr(st, "sweep", None):
        return list(st.sweep)
    text = getattr(config.option, "gemm_sweep", None)
    if not text:
        return None
    try:
        return parse_sweep(text)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
