"""The sandbox child: the process that loads one kernel and runs its checks on request
(``checks/sandbox.py`` is the parent's side and documents the protocol).

Requests are JSON lines: ``load`` (import the kernel by its spec), ``prepare`` (CUDA
initialisation, compiling and loading the kernel: bounded by its own time limit, so a
check's timeout measures the check alone) and ``check``. Each reply carries the check's own
duration (``seconds``), a check's reply also the seconds it waited for the GPU lock
(``lock_wait_s``), the prepare reply the seconds of each of its phases (``phases``: imports,
CUDA context, compile, module load, the harness's CuPy kernels). After every check the child
frees what CuPy's memory pools keep (``dispatch.release_memory``), so an idle child holds
little more than its CUDA context.

Out of memory: an allocation the harness makes (inputs, guard bands, references, timed
buffers) that fails is freed and the check retried once; if it fails again the check fails
with ``harness_out_of_memory``, which is no verdict on the kernel. An allocation made while
the kernel's own launcher runs (a Python launcher's workspace, a launch that needs more
local memory than the GPU has) stays the kernel's responsibility: it fails like any other
error of the kernel (``fault``).

A confined child (``PYTEST_GEMM_LOCK_BROKER`` set) cannot open the GPU lock's files: its
``gpu_lock`` asks the parent for the lock instead (``checks/lock_broker.py`` lists those
requests and their answers, which come back on the request pipe while a check runs).

Test hook: the module named by ``PYTEST_GEMM_DISPATCH="module:function"`` replaces
``dispatch.run_check``; that module may also define ``prepare(kernel)`` and
``release_memory()``, which then replace the defaults below.
"""
from __future__ import annotations

import importlib
import gc
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

from ..model import categories as cat
from ..model.categories import GemmCheckFailure
import sysconfig
import threading
import ctypes

from ..kernels.autotune import enable_result_cache
from ..kernels.loader import load_spec
from ..measure.gpu_lock import observe_waits, use_broker, waited_seconds
from ..measure.integrity import pin
from ..measure.trace import call_entered, call_returned
from ..measure.trace import prepare as prepare_trace
from ..model.declaration import GemmSpecError
from ..kernels.hang_stack import listen
from .lock_broker import BROKER_ENV, asker
from .warmup import watching

STARTED = time.monotonic()  # when this module was imported: the child's interpreter is up
DISPATCH_ENV = "PYTEST_GEMM_DISPATCH"  # test hook: "module:function" the child runs checks with
KERNEL_MARK = "gemm_raised_by_kernel"  # set on an exception raised while the kernel's launcher ran


# ---- out of memory: whose allocation was it ----------------------------------------------

def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during (``raise ... from None`` too)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]


def _is_oom(e: BaseException) -> bool:
    if type(e).__name__ == "OutOfMemoryError":  # cupy.cuda.memory.OutOfMemoryError
        return True
    if not cat.is_cuda_error(e):
        return False
    text = str(e)
    return any(s in text for s in ("out of memory", "OUT_OF_MEMORY", "MemoryAllocation", "Out of memory"))


def is_out_of_memory(exc: BaseException) -> bool:
    """CuPy's OutOfMemoryError or a CUDA out-of-memory error, raised or wrapped anywhere in the chain."""
    return any(_is_oom(e) for e in _chain(exc))


def raised_by_kernel(exc: BaseException) -> bool:
    return any(getattr(e, KERNEL_MARK, False) for e in _chain(exc))


def is_harness_oom(exc: BaseException) -> bool:
    """Out of memory outside the kernel's own launcher: the harness's problem, not the kernel's."""
    return is_out_of_memory(exc) and not raised_by_kernel(exc)


class KernelCall:
    """Wraps a harness's loaded kernel: whatever its call raises is marked as the kernel's own."""

    def __init__(self, inner: Any):
        self._inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call_entered()  # the launch trace keeps each call's window (measure/trace.py)
        try:
            return self._inner(*args, **kwargs)
        except BaseException as exc:
            try:
                setattr(exc, KERNEL_MARK, True)
            except (AttributeError, TypeError):
                pass
            raise
        finally:
            call_returned()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        """Set on the wrapped kernel: an attribute set here (``LoadedKernel.returned``, which
        checks/dispatch.py resets per check) must be the one the kernel's call writes."""
        if name == "_inner":
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)


def mark_kernel_calls(h: Any) -> Any:
    if not isinstance(h.loaded, KernelCall):
        h.loaded = KernelCall(h.loaded)
    return h


def harness_oom_failure(check: str, shape: Any, exc: BaseException) -> GemmCheckFailure:
    shape_text = "x".join(map(str, shape or []))
    what = next((str(e) for e in _chain(exc) if _is_oom(e)), str(exc)).strip().splitlines()[0][:200]
    return GemmCheckFailure(
        cat.HARNESS_OUT_OF_MEMORY,
        f"{check} at {shape_text}: the test harness ran out of GPU memory ({what}), also after freeing "
        "its memory pools and retrying once",
        ["this is not a verdict on the kernel: the check could not be run. Other processes on this GPU "
         "hold its memory (nvidia-smi lists them); run fewer of them (fewer xdist workers or gradebook "
         "--jobs) or free the GPU, then run this check again"])


# ---- the hooks: defaults and the test hook ---------------------------------------------------

def default_prepare(kernel: Any) -> dict[str, float]:
    """CUDA initialisation, compiling and loading the kernel, and CuPy's own kernels that the
    harness uses: everything a first check would otherwise pay for inside its timeout. Returns
    the seconds of each phase (``PREPARE_PHASES``), so that a class's staff can see where a
    kernel process's start-up goes."""
    phases: dict[str, float] = {}
    last = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        phases[name] = round(now - last[0], 4)
        last[0] = now

    import cupy  # lazy: timed as the start-up's imports phase
    import numpy as np  # lazy: timed as the start-up's imports phase

    from ..kernels.compiler import GemmCompileError, compile_for_arch  # lazy: timed as the start-up's imports phase
    from ..kernels.cuda_wait import WAIT_ENV, set_wait, wait_mode  # lazy: timed as the start-up's imports phase
    from ..kernels.device import require_device  # lazy: timed as the start-up's imports phase
    from ..kernels.harness import GuardedMatrix, harness_for  # lazy: timed as the start-up's imports phase
    from ..model.contract import CudaKernel  # lazy: timed as the start-up's imports phase

    lap("imports_s")
    mode = wait_mode(os.environ)  # before the context starts: how this process waits for the GPU
    if mode is not None:
        unset = set_wait(mode, cupy.cuda.runtime.getDevice())
        if unset:
            print(f"pytest-gemm: {WAIT_ENV}={mode} not set ({unset}); CUDA's default wait stays", file=sys.stderr)
    device = require_device()
    cupy.cuda.runtime.deviceSynchronize()  # creates the CUDA context now, so that it is timed apart
    lap("cuda_context_s")
    if isinstance(kernel, CudaKernel):
        try:
            compile_for_arch(kernel, device.arch)  # kept in the compiler's cache for harness_for
        except GemmCompileError:
            pass  # harness_for compiles again and reports it as the check's compile_error
    lap("compile_s")
    h = mark_kernel_calls(harness_for(kernel, device))
    lap("module_load_s")
    probe = GuardedMatrix(np.zeros((2, 2), dtype=np.float32), 256)  # compiles fill, compare, sum, nonzero
    probe.damage()
    probe.changed()
    del h, probe
    lap("harness_kernels_s")
    if not isinstance(kernel, CudaKernel):  # traced by default (--gemm-trace auto): CUPTI's start-up now
        prepare_trace()
    lap("trace_s")
    return phases


#: What ``default_prepare`` times, in order (each a key of its reply's ``phases``).
PREPARE_PHASES = ("imports_s", "cuda_context_s", "compile_s", "module_load_s", "harness_kernels_s", "trace_s")


def hooks() -> tuple[Callable[..., Any], Callable[[Any], None], Callable[[], dict[str, int]]]:
    """(run_check, prepare, release_memory): ``dispatch``'s, or those of the ``PYTEST_GEMM_DISPATCH`` module."""
    from . import dispatch  # lazy: numpy (every check) stays out of the plugin's process, which imports this module

    target = os.environ.get(DISPATCH_ENV, "")
    if not target:
        return dispatch.run_check, default_prepare, dispatch.release_memory
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return (getattr(module, attr or "run_check"), getattr(module, "prepare", lambda kernel: None),
            getattr(module, "release_memory", dispatch.release_memory))


def run_with_retry(run_check: Callable[..., Any], release: Callable[[], Any], kernel: Any, check: str,
                   shape: Any, params: dict[str, Any], options: dict[str, Any], facts: dict[str, Any]) -> None:
    """Run the check; on a harness-side out of memory, free the pools and run it once more;
    if that runs out too, raise ``harness_out_of_memory``. ``facts`` holds the last attempt's."""
    try:
        run_check(kernel, check, shape, params, options, facts)
        return
    except BaseException as exc:  # noqa: BLE001 - inspected, then re-raised
        if not is_harness_oom(exc):
            raise
    facts.clear()
    release()
    try:
        run_check(kernel, check, shape, params, options, facts)
    except BaseException as exc:  # noqa: BLE001
        if is_harness_oom(exc):
            raise harness_oom_failure(check, shape, exc) from exc
        raise


# ---- the child's loop ----------------------------------------------------------------------

def _die_with_parent() -> None:
    """Ask Linux to kill this child when the pytest process dies (say, killed by a
    CI timeout): it runs in its own session, so nothing else would stop a kernel
    that is still spinning on the GPU."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _library_dirs() -> tuple[str, ...]:

    paths = sysconfig.get_paths()
    return tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)


def raised_in_pytest_gemm(exc: BaseException) -> bool:
    """The innermost frame of ``exc`` that is neither the standard library nor an installed
    library (NumPy, CuPy: their frames do not say whose call went wrong) lies in pytest-gemm's
    own package. A kernel's module, a launcher, a grid or shared-memory callable, a test hook:
    anything else is the kernel's side."""
    ours = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
    libraries = _library_dirs()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not os.path.isabs(frame.filename):  # "<string>", Cython's relative .pyx names: a library's
            continue
        path = os.path.realpath(frame.filename)
        if path.startswith(ours):
            return True
        if not path.startswith(libraries):
            return False
    return False


def _failure_reply(request: dict[str, Any], exc: BaseException, facts: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the reply for an exception, whether the child must end after sending it)."""
    what = request.get("check") or request["op"]
    if isinstance(exc, GemmCheckFailure):
        restart = exc.category in (cat.FAULT, cat.HARNESS_OUT_OF_MEMORY)  # a fresh process: a fresh context
        return ({"status": "fail", "category": exc.category, "summary": exc.summary, "details": exc.details,
                 "facts": facts, "restart": restart}, False)
    if type(exc).__name__ == "Skipped":
        return {"status": "skip", "reason": str(getattr(exc, "msg", exc))}, False
    if type(exc).__name__ == "UsageError":
        return {"status": "usage", "message": str(exc)}, False
    if isinstance(exc, SystemExit):  # sys.exit() in a launcher: as if the process had ended
        shape_text = "x".join(map(str, request.get("shape") or []))
        return ({"status": "fail", "category": cat.FAULT,
                 "summary": f"{what} at {shape_text}: the kernel called sys.exit({exc.code!r})",
                 "details": ["a kernel must return, not end the process; later checks run in a fresh process"],
                 "facts": facts, "restart": True}, True)
    if is_harness_oom(exc):  # while loading or preparing: nothing was retried
        failure = harness_oom_failure(what, request.get("shape"), exc)
        return ({"status": "fail", "category": failure.category, "summary": failure.summary,
                 "details": failure.details, "facts": facts, "restart": True}, True)
    cuda = cat.is_cuda_error(exc)
    where = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    declaration = any(isinstance(e, GemmSpecError) for e in _chain(exc))  # the kernel's declaration is wrong
    if request.get("op") == "check" and not (cuda or declaration or raised_by_kernel(exc)) and raised_in_pytest_gemm(exc):
        # not the kernel's failure: blaming it would give it a root cause it does not have
        return ({"status": "fail", "category": cat.HARNESS_ERROR,
                 "summary": f"{what}: pytest-gemm's own code raised {where}, outside the kernel's launch: a bug "
                            "in pytest-gemm, not a verdict on the kernel; please report it with these lines",
                 "details": traceback.format_exc().splitlines()[-8:],
                 "facts": facts, "restart": False}, False)
    return ({"status": "fail", "category": cat.FAULT if cuda else cat.LAUNCH_ERROR,
             "summary": f"{what} raised {where}",
             "details": [] if cuda else traceback.format_exc().splitlines()[-8:],
             "facts": facts, "restart": cuda}, cuda)  # a CUDA error: the context is unusable


def child(read_fd: int, write_fd: int) -> None:
    _die_with_parent()
    listen(os.environ)  # where it is, should a check time out (kernels/hang_stack.py)
    reader = os.fdopen(read_fd, "r")
    writer = os.fdopen(write_fd, "w", buffering=1)


    sending = threading.Lock()  # the warm-up watcher sends from its own thread

    def send(message: dict[str, Any]) -> None:
        with sending:
            writer.write(json.dumps(message, default=str) + "\n")
            writer.flush()

    # a check that waits for the GPU lock says so: its parent stops the check's clock meanwhile
    observe_waits(lambda waiting: send({"event": "lock_wait" if waiting else "lock_held"}))
    if os.environ.get(BROKER_ENV):  # confined: the lock's files are not here, the parent takes it for us
        use_broker(asker(send, reader), send)
    run_check, prepare, release = hooks()
    kernel = None
    for line in iter(reader.readline, ""):  # readline: the broker reads its answers from the same pipe
        request = json.loads(line)
        facts: dict[str, Any] = {}
        started, waited, warmup_s = time.perf_counter(), waited_seconds(), 0.0
        try:
            if request["op"] == "load":
                pin()  # before the kernel's module runs: what it replaces later is seen (measure/integrity.py)
                enable_result_cache(os.environ)  # a Triton autotuner's choices shared by its processes

                if request["rootdir"] not in sys.path:
                    sys.path.insert(0, request["rootdir"])
                kernel = load_spec(request["spec"], Path(request["rootdir"]), each=True)[request["index"]]
                send({"status": "ok", "seconds": time.perf_counter() - started,
                      "since_start_s": time.monotonic() - STARTED})
                continue
            if request["op"] == "prepare":
                phases = prepare(kernel)
                # What start-up made (modules, the kernel, CuPy's kernels) lives as long as the
                # process: out of every later collection. release_memory collects after each check;
                # through all of it, a collection took 16 ms with the checks and CuPy imported (a
                # CPU, 2567d34) and 42 ms a check in a whole in-process pytest run (the H100).
                gc.freeze()
                send({"status": "ok", "seconds": time.perf_counter() - started,
                      "phases": phases if isinstance(phases, dict) else {}})
                continue
            try:
                with watching(send) as watch:  # a warm-up seen now has its own budget (checks/warmup.py)
                    run_with_retry(run_check, release, kernel, request["check"], request["shape"],
                                   request["params"], request["options"], facts)
            finally:
                warmup_s = watch.total_s
            reply, end = {"status": "ok", "facts": facts}, False
        except BaseException as exc:  # noqa: BLE001 - everything must be reported to the parent
            reply, end = _failure_reply(request, exc, facts)
            del exc
        reply["lock_wait_s"] = waited_seconds() - waited  # a timed check's wait for the GPU alone
        reply["warmup_s"] = warmup_s  # not the check's time: a hang budget never pays for a warm-up
        reply["seconds"] = max(0.0, time.perf_counter() - started - reply["lock_wait_s"] - warmup_s)  # its own time
        if request["op"] == "check" and not end and not reply.get("restart"):
            try:
                reply["memory"] = release()
            except Exception as exc:  # noqa: BLE001 - a context the kernel broke: start afresh
                reply["restart"] = True
                reply["memory"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        send(reply)
        if end:
            return


if __name__ == "__main__":
    child(int(sys.argv[1]), int(sys.argv[2]))
