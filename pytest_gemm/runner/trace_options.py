"""The launch trace's options (``checks/launch_trace.py``): switching it off, and the course
setting that requires the student's own kernel.

- ``--gemm-trace auto|on|off`` (ini ``gemm_trace``; env ``PYTEST_GEMM_TRACE=off``): CUPTI traces
  each check's GPU launches where CUPTI is available. ``auto`` (the default) traces every Python
  launcher (what it runs is its own business) and, under the course setting, every kernel; a CUDA C
  kernel pytest-gemm launches itself (one launch a call, its resources in the compile report) is
  traced with ``on``. ``off`` compares timings without it.
- ``--gemm-own-kernel`` (ini ``gemm_own_kernel = true``): a check whose launches include a vendor
  library's kernels fails as ``vendor_kernel``. Off by default.
- ``--gemm-vendor-kernel REGEX`` (repeatable; ini ``gemm_vendor_kernels``, one per line): more
  kernel-name patterns the course counts as not the student's own.
"""
from __future__ import annotations

from typing import Any

import pytest
import re
import os

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("", "0", "false", "no", "off")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemm")
    group.addoption("--gemm-trace", choices=("auto", "on", "off"), default=None,
                    help="trace each check's GPU kernel launches with CUPTI, where the cupti-python binding and a "
                         "GPU are there: auto (the default) traces Python launchers, and every kernel under "
                         "--gemm-own-kernel; on: CUDA C kernels too; off: no trace (e.g. to compare timings)")
    group.addoption("--gemm-own-kernel", action="store_true", default=None,
                    help="a course's rule: a check whose launches include cuBLAS, cuBLASLt, CUTLASS or cuDNN "
                         "kernels (or --gemm-vendor-kernel patterns) fails as vendor_kernel")
    group.addoption("--gemm-vendor-kernel", action="append", default=[], metavar="REGEX",
                    help="with --gemm-own-kernel: a kernel-name pattern (Python regex) that is not the student's "
                         "own either (repeatable)")
    parser.addini("gemm_trace", default="", help="auto (default), on or off: like --gemm-trace")
    parser.addini("gemm_own_kernel", default="",
                  help="true: require the student's own kernel (like --gemm-own-kernel)")
    parser.addini("gemm_vendor_kernels", type="linelist", default=[],
                  help="kernel-name patterns (Python regex, one per line) that gemm_own_kernel also rejects")


def trace_options(config: pytest.Config) -> dict[str, Any]:
    """The options a check's child reads (``trace``, ``own_kernel``, ``vendor_kernels``)."""

    trace = config.getoption("gemm_trace", None) or str(config.getini("gemm_trace") or "").strip().lower() or "auto"
    if trace not in ("auto", "on", "off"):
        raise pytest.UsageError(f"gemm_trace = {trace!r}: expected auto, on or off")
    word = str(config.getini("gemm_own_kernel") or "").strip().lower()
    if word not in TRUE_WORDS + FALSE_WORDS:  # a mistyped course setting must not mean "off" in silence
        raise pytest.UsageError(f"gemm_own_kernel = {word!r}: expected true or false")
    own = bool(config.getoption("gemm_own_kernel", None)) or word in TRUE_WORDS
    if own and trace == "off":
        raise pytest.UsageError("the own-kernel rule (gemm_own_kernel, --gemm-own-kernel) is checked by the launch "
                                "trace, and --gemm-trace off (gemm_trace = off) turns it off: drop one of the two")
    patterns = [*config.getoption("gemm_vendor_kernel", []), *config.getini("gemm_vendor_kernels")]
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise pytest.UsageError(f"gemm vendor kernel pattern {p!r} is not a regular expression ({exc}); "
                                    "give a Python regex, e.g. 'magma_.*gemm'") from None
    return {"trace": trace, "own_kernel": own, "vendor_kernels": patterns}


def export_choice(config: pytest.Config) -> None:
    """``--gemm-trace off`` (or ``gemm_trace = off``) reaches the kernel processes through the
    environment they inherit, so that CUPTI is not even started there (``measure.trace.prepare``
    runs at a process's start-up, before any check's options arrive): an untraced run, the one
    a timing is compared against, never loads the profiler."""

    from ..measure.trace import TRACE_ENV  # lazy: keeps judges, judges.launches, measure.trace out of the plugin's load

    if trace_options(config)["trace"] == "off":
        os.environ[TRACE_ENV] = "off"
