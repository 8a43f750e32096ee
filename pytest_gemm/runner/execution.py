"""Running one check on one kernel: in the kernel's child process (the default), or in
this process with ``--gemm-isolation none``.

Bounded resources: a worker keeps at most ``MAX_LIVE_SANDBOXES`` kernel processes alive
(``PYTEST_GEMM_MAX_PROCESSES`` overrides it); starting another stops the least recently
used, which starts afresh (import, compile) when its kernel's next check comes. The
trusted ladder's rungs share one process, which counts as one. Each child frees CuPy's
memory pools after every check, so an idle one holds its CUDA context and little else.
When the harness runs out of GPU memory even after its retry, the worker's other idle
processes are stopped, so that the next checks find the memory they held. With more kernels
than the bound, ``order_by_kernel`` runs each kernel's checks together, so that each kernel
starts its process about once per worker instead of once per check.

Timeouts: ``check_timeout`` is a check's own limit (start-up is bounded apart);
``checks/hangs.py`` shortens it for a kernel that already timed out, and fails without
running the rest of a kernel whose first checks all hung or faulted (ended its process). The GPU-wide lock
(``measure/gpu_lock.py``): this process holds it shared around every check that is not
``timed`` in the registry; a timed check takes it itself, exclusively, only around its timings
(its wait is not counted in its timeout); a new kernel process holds it shared while it
prepares the kernel (CUDA context, module load), so no timing sees that either. A shared hold
lasts at most ``hangs.presumed_hung_after`` (3 s plus the product at 20 GFLOP/s): a check
still running then is presumed hung (``gpu_lock.GpuHold.presume_hung``): timed checks wait
until it ends, as before, but the other checks are no longer queued behind them, so that a
hanging kernel does not hold up every student's checks for its whole timeout.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable

import pytest

from ..checks import registry
from ..checks.hangs import HangLedger, flops_of, presumed_hung_after, probe_case
from ..model import categories as cat
from ..model.categories import GemmCheckFailure
from .trace_options import trace_options
from ..model.contract import GemmKernel
from ..measure.gpu_lock import gpu_lock
from .state import GemmState, is_ladder_entry, state

MAX_LIVE_SANDBOXES = 4               # kernel processes one worker keeps alive
MAX_PROCESSES_ENV = "PYTEST_GEMM_MAX_PROCESSES"
DEFAULT_TIMEOUT_S = 20.0             # a check's timeout at a small shape (start-up not included)
DEFAULT_RATE_FLOPS = 5e9             # plus the time its product takes at 5 GFLOP/s
DEFAULT_TIMEOUT_TEXT = f"{DEFAULT_TIMEOUT_S:g} s plus 1 s per {DEFAULT_RATE_FLOPS / 1e9:g} GFLOP"  # --help, messages


def check_timeout(st: GemmState, shape: tuple[int, int, int], params: dict[str, Any] | None = None) -> float:
    """--gemm-timeout, or 20 s plus 1 s per 5 GFLOP of one product at this shape (a sweep:
    sweep.sweep_timeout). It bounds the check alone: start-up has its own limits."""
    if st.timeout is not None:
        return st.timeout
    if params and params.get("shapes"):
        from ..measure.sweep import sweep_timeout  # lazy: keeps measure.sweep out of the plugin's load

        return sweep_timeout(params["shapes"])
    m, n, k = shape
    return DEFAULT_TIMEOUT_S + 2.0 * m * n * k / DEFAULT_RATE_FLOPS


def max_live_sandboxes(env: dict[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    text = env.get(MAX_PROCESSES_ENV, "").strip()
    if not text:
        return MAX_LIVE_SANDBOXES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise pytest.UsageError(f"{MAX_PROCESSES_ENV}={text!r}: expected a whole number >= 1 of kernel processes "
                                f"per worker, e.g. {MAX_LIVE_SANDBOXES}")
    return value


def acquire(sandboxes: dict[Any, Any], key: Any, make: Any, bound: int) -> Any:
    """The client for ``key`` (made by ``make()`` the first time), now the most recently used;
    the least recently used others are stopped so that at most ``bound`` stay alive with it."""
    client = sandboxes.pop(key, None)
    if client is None:
        client = make()
    sandboxes[key] = client  # dicts keep insertion order: the last is the most recent
    alive = [c for k, c in sandboxes.items() if k != key and c.alive]
    for old in alive[:max(0, len(alive) - (bound - 1))]:
        old.stop()
    return client


def order_by_kernel(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With more kernels than a worker keeps processes for, run each kernel's checks one after
    another (stable; other tests keep their places): in the registry's check-by-check order a
    worker would meet every kernel once per check and restart (import, compile) each every time."""
    st = state(config, None)
    if st is None or st.isolation == "none":
        return
    remember_cases(st, items)
    slots, keys = [], []
    for i, item in enumerate(items):
        case = item.callspec.params.get("gemm_case") if hasattr(item, "callspec") else None
        if case is not None:
            slots.append(i)
            keys.append("ladder" if is_ladder_entry(config, case.kernel) else id(case.kernel))
    rank = {key: n for n, key in enumerate(dict.fromkeys(keys))}
    if len(rank) <= max_live_sandboxes():
        return
    ordered = [item for _, item in sorted(zip(keys, (items[i] for i in slots)), key=lambda pair: rank[pair[0]])]
    for i, item in zip(slots, ordered):
        items[i] = item


def remember_cases(st: GemmState, items: list[pytest.Item]) -> None:
    """Each kernel's cases (check, shape, params) as collected: where a probe may be taken from."""
    st.cases.clear()
    for item in items:
        case = item.callspec.params.get("gemm_case") if hasattr(item, "callspec") else None
        origin = getattr(getattr(case, "kernel", None), "origin_spec", None)
        if case is not None and origin is not None and not _is_timed(case.check):
            st.cases.setdefault(tuple(origin), []).append((case.check, tuple(case.shape), dict(case.params)))


def _is_timed(check: str) -> bool:
    """Timed checks (speed, sweep) take the GPU lock alone themselves; the runner holds none for
    them. Every other check, the launch check too (it can report a stream escape, but times
    nothing), runs under the runner's shared hold."""
    try:
        return registry.get(check).timed
    except ValueError:
        return False


def run_in_sandbox(config: pytest.Config, kernel: GemmKernel, check: str, shape: tuple[int, int, int],
                   params: dict[str, Any]) -> dict[str, Any]:
    """Run one check on one kernel, in its child process (or in-process with --gemm-isolation none)."""
    st = state(config)
    options = {"min_cublas_fraction": st.min_cublas_fraction, "speed_budget_s": st.speed_budget_s,
               "speed_stop": st.speed_stop}
    options.update(trace_options(config))  # the launch trace and the course's own-kernel rule
    if is_ladder_entry(config, kernel):
        options["own_kernel"] = False  # a rung timed for the ranking (cuBLAS among them) is no student's
    timed = _is_timed(check)
    if st.isolation == "none":
        return _run_here(kernel, check, shape, params, options, timed)
    # lazy: keeps checks.hang_presumption, checks.sandbox, checks.sandbox_child, checks.sandbox_confine, checks.warmup, kernels.autotune, kernels.confine, kernels.declared, measure.run_cache, measure.shared_files out of the plugin's load
    from ..checks.sandbox import SandboxClient
    from ..checks.sandbox_confine import confines  # lazy: as above (it imports kernels.confine)

    spec, index = kernel.origin_spec  # type: ignore[union-attr]
    ledger: HangLedger = st.hangs.setdefault((spec, index), HangLedger())
    label = f"{check} at {'x'.join(map(str, shape))}"
    _quick_after_tuning(st, (spec, index), check, shape)
    cut = ledger.cut_off()
    if cut is not None:
        raise GemmCheckFailure(cut[0], f"{label}: {cut[1]}", [])
    # What a confined speed check reads is measured here (it may not write it), and only for a
    # check that will run: measured first, a class's faulting students each asked for the GPU
    # alone at once, behind the hanging ones' marks (18 s of the H100 class's start at 1e43fba).
    if check == "speed" and confines(spec):
        from ..measure.trusted_measures import measure_for_confined  # lazy: CuPy, when a speed check runs

        measure_for_confined(kernel.precision, shape, options)
    flops = flops_of(shape, params)
    limit = check_timeout(st, shape, params)
    if st.timeout is None:  # the default: an autotuner's first meeting with a shape is no hang
        from ..kernels.autotune import tuning_allowance  # lazy: keeps kernels.autotune out of the plugin's load

        limit += tuning_allowance(kernel)
    timeout, why = ledger.budget(limit, flops, timed)
    # The ladder timed for the ranking is ours and trusted: its rungs share one process
    # (one CUDA context, one measurement of the roofs) instead of starting one each.
    key = "ladder" if is_ladder_entry(config, kernel) else id(kernel)
    rootdir = str(config.invocation_params.dir)
    client = acquire(st.sandboxes, key, lambda: SandboxClient(spec, index, rootdir), max_live_sandboxes())
    client.target(spec, index)
    client.progress = Progress(config, f"{kernel.name} {label}",  # a warm-up seen at run time (checks/warmup.py)
                               lambda what: _note_tuning(st, (spec, index), what))
    try:
        facts = client.run(check, list(shape), params, options, timeout,
                           guard=None if timed else lambda: gpu_lock(False, what=label),
                           why=why or _timeout_source(st, params),
                           startup_guard=lambda: gpu_lock(False, what="start-up"),  # a context, a module: not during a timing
                           hold_s=presumed_hung_after(flops), startup_hold_s=presumed_hung_after(0))
    except BaseException as exc:
        if isinstance(exc, Exception):
            facts = dict(getattr(exc, "facts", None) or {}, **where_time_went(client))
            try:
                exc.facts = facts  # type: ignore[attr-defined]
            except AttributeError:
                pass
        _account(st, client, ledger, label, flops, exc)
        if ledger.wants_probe():
            _probe(st, client, ledger, (spec, index), options)
        raise
    if client.last_seconds is not None:
        ledger.done(client.last_seconds, flops)
    return dict(facts, **where_time_went(client))


#: A warm-up that means the launcher tunes itself per shape (checks/warmup.py's names for it).
TUNING_WARMUPS = ("Triton autotuning", "Triton benchmarking a config")


def _note_tuning(st: GemmState, key: Any, what: str) -> None:
    if what in TUNING_WARMUPS:
        st.tuned_at_run_time.add(key)


def _quick_after_tuning(st: GemmState, key: Any, check: str, shape: tuple[int, int, int]) -> None:
    """A kernel seen autotuning at run time gets what one found by its declaration gets
    (``collection._shapes``): the quick shape set, unless ``--gemm-shapes`` chose one. Its later
    checks at a shape of the full set only are skipped, saying why (this process found it: each
    xdist worker finds it at its own first tuning)."""
    if key not in st.tuned_at_run_time or st.shapes != "auto":
        return
    try:
        spec = registry.get(check)
    except ValueError:
        return
    quick, full = spec.quick, spec.shapes
    if quick is None or not isinstance(quick, (list, tuple)) or not isinstance(full, (list, tuple)):
        return
    if tuple(shape) in map(tuple, full) and tuple(shape) not in map(tuple, quick):
        pytest.skip(f"autotuning found at run time: the quick shape set, each shape tuned once (as for an "
                    f"autotuner found in the launcher's code); --gemm-shapes full runs {check} at "
                    f"{'x'.join(map(str, shape))} too")


class Progress:
    """Writes a kernel's warm-up progress on the terminal ("pytest-gemm: mine exact at 64x64x64:
    warming up: Triton autotuning, 10 s so far ..."; under xdist a worker has no terminal: stderr),
    and tells ``seen`` each warm-up the kernel's process reports."""

    def __init__(self, config: pytest.Config, what: str, seen: Callable[[str], None] | None = None):
        self.config, self.what, self.seen = config, what, seen or (lambda _: None)

    def __call__(self, text: str) -> None:
        line = f"pytest-gemm: {self.what}: {text}"
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and not hasattr(self.config, "workerinput"):
            reporter.write_line(line)
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()



def where_time_went(client: Any) -> dict[str, Any]:
    """The facts a check's record gets about its seconds: its own time in the kernel's process
    (``check_s``), its waits for the GPU lock (``lock_wait_s``), and, when it started a fresh
    kernel process, that start-up's phases (``process_start``)."""
    out: dict[str, Any] = {}
    if client.last_seconds is not None:
        out["check_s"] = round(float(client.last_seconds), 4)
    if client.last_lock_wait_s:
        out["lock_wait_s"] = round(float(client.last_lock_wait_s), 4)
    if getattr(client, "last_warmup_s", 0.0):
        out["warmup_s"] = round(float(client.last_warmup_s), 4)  # compiling, autotuning: not the check's time
    if client.last_start:
        out["process_start"] = dict(client.last_start)
    return out


def _account(st: GemmState, client: Any, ledger: HangLedger, label: str, flops: float, exc: BaseException) -> None:
    """What a check that raised tells the kernel's ledger (hangs, faults, completions)."""
    if isinstance(exc, GemmCheckFailure):
        if exc.category in (cat.FAULT, cat.LAUNCH_ERROR) and not client.alive:
            ledger.faulted(label, exc.category)  # it ended the kernel's process: the next check needs a fresh one
        elif exc.category == cat.TIMEOUT and client.last_seconds is None:
            if getattr(client, "check_timed_out", False):
                ledger.timed_out(label)
            else:  # start-up ran out of its own limit: do not pay it again for every check
                ledger.startup_failure = exc.summary
        elif client.last_seconds is not None:
            ledger.done(client.last_seconds, flops)
        if exc.category == cat.HARNESS_OUT_OF_MEMORY:
            for other in st.sandboxes.values():
                if other is not client:
                    other.stop()
    elif client.last_seconds is not None:  # a skip, a usage error: it completed
        ledger.done(client.last_seconds, flops)


def _probe(st: GemmState, client: Any, ledger: HangLedger, key: tuple[str, int], options: dict[str, Any]) -> None:
    """The kernel's first checks all faulted: before the rest are cut off, run one case at a
    large shape (``hangs.probe_case``) in a fresh process. Completing it means the kernel
    faults only at some shapes: it is then never cut off. Its outcome is only the ledger's; the
    case itself runs again, as its own test, when its turn comes."""
    case = probe_case(st.cases.get(key, ()), ledger.faults + ledger.timeouts)
    if case is None:
        ledger.probe = "none left to probe"
        return
    check, shape, params = case
    label = f"{check} at {'x'.join(map(str, shape))}"
    ledger.probe = label
    flops = flops_of(shape, params)
    timeout, _ = ledger.budget(check_timeout(st, shape, params), flops)
    try:
        client.run(check, list(shape), params, options, timeout, guard=lambda: gpu_lock(False, what="probe " + label),
                   why="a probe of a kernel whose first checks faulted",
                   startup_guard=lambda: gpu_lock(False, what="start-up"), hold_s=presumed_hung_after(flops),
                   startup_hold_s=presumed_hung_after(0))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the probe's outcome goes to the ledger only
        if isinstance(exc, GemmCheckFailure) and (exc.category in (cat.TIMEOUT, cat.HARNESS_OUT_OF_MEMORY)
                                                  or (exc.category in (cat.FAULT, cat.LAUNCH_ERROR) and not client.alive)):
            return  # it failed there too: the cut stands
    if client.last_seconds is not None:  # it completed the probe (passed, or failed on its values)
        ledger.done(client.last_seconds, flops)


def _timeout_source(st: GemmState, params: dict[str, Any]) -> str:
    if st.timeout is not None:
        return "--gemm-timeout"
    if params.get("shapes"):
        return "the sweep's default: 60 s, plus 30 s and 10 s per TFLOP for each size; see --gemm-timeout"
    return f"the default: {DEFAULT_TIMEOUT_TEXT}; see --gemm-timeout"


def _run_here(kernel: GemmKernel, check: str, shape: tuple[int, int, int], params: dict[str, Any],
              options: dict[str, Any], timed: bool) -> dict[str, Any]:
    """--gemm-isolation none: the same check, memory release and out-of-memory retry, in this process."""
    from ..checks.dispatch import release_memory, run_check  # lazy: keeps checks.dispatch out of the plugin's load
    # lazy: keeps checks.sandbox_child out of the plugin's load
    from ..checks.sandbox_child import default_prepare, run_with_retry

    facts: dict[str, Any] = {}
    try:
        default_prepare(kernel)
        with contextlib.nullcontext() if timed else gpu_lock(False):  # a timed check takes its own
            run_with_retry(run_check, release_memory, kernel, check, list(shape), params, options, facts)
    except Exception as exc:
        exc.facts = facts  # type: ignore[attr-defined]
        raise
    finally:
        try:
            release_memory()
        except Exception:  # noqa: BLE001 - a CUDA context the kernel broke; the failure says so
            pass
    return facts


def stop_sandboxes(config: pytest.Config) -> None:
    if state(config, None) is not None:
        for client in state(config).sandboxes.values():
            client.stop()
