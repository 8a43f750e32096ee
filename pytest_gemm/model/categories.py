"""Failure categories: the one-word verdict every failed check carries.

The names are part of the public contract (JSON report, Gradescope output),
so they are plain strings, not an Enum: they cross xdist and JSON as-is.
"""
from __future__ import annotations

WRONG_VALUES = "wrong_values"
UNWRITTEN_OUTPUT = "unwritten_output"
OUT_OF_BOUNDS_WRITE = "out_of_bounds_write"
INPUT_MODIFIED = "input_modified"
NONDETERMINISTIC = "nondeterministic"
PRECISION_TOO_LOW = "precision_too_low"
FAULT = "fault"
TIMEOUT = "timeout"
COMPILE_ERROR = "compile_error"
LAUNCH_ERROR = "launch_error"
TIMING_ESCAPE = "timing_escape"
STALE_OUTPUT = "stale_output"
BETA_ZERO_READS_C = "beta_zero_reads_c"
# Not a failure: a note (``NOTES``). With alpha == 0 reference BLAS returns before reading A and B,
# but BLAS documents no such rule (only "when BETA is zero, C need not be set on input"): a kernel
# whose alpha*acc turns NaN in A or B into NaN output is correct; its report says so.
ALPHA_ZERO_READS_AB = "alpha_zero_reads_ab"
# The test harness (not the kernel) ran out of GPU memory, after freeing and retrying once:
# the check could not be run, which is no verdict on the kernel.
HARNESS_OUT_OF_MEMORY = "harness_out_of_memory"
# pytest-gemm's own code raised while the kernel was not running (a bug of ours, not the
# kernel's): the check could not be run, which is no verdict on the kernel either.
HARNESS_ERROR = "harness_error"
# Failures of the harness, not of the kernel: never a root cause (records.py). Gradescope does
# not count a harness_out_of_memory case and gives a harness_error case no points (gradescope.py).
HARNESS_FAILURES: tuple[str, ...] = (HARNESS_OUT_OF_MEMORY, HARNESS_ERROR)
# A course that requires the student's own kernel (gemm_own_kernel): the check's launches
# include a vendor library's kernels (cuBLAS, cuBLASLt, CUTLASS, cuDNN, or the course's list).
VENDOR_KERNEL = "vendor_kernel"
# A Python launcher's work ran on another stream than the caller's current one (the launch check,
# kernels/stream_probe.py): unordered with the caller's uploads and reads (CUDA semantics), against
# the documented kernel contract (docs/kernels.md). A stream-ordering bug, not a timing cheat.
WRONG_STREAM = "wrong_stream"

ALL: tuple[str, ...] = (
    WRONG_VALUES,
    UNWRITTEN_OUTPUT,
    OUT_OF_BOUNDS_WRITE,
    INPUT_MODIFIED,
    NONDETERMINISTIC,
    PRECISION_TOO_LOW,
    FAULT,
    TIMEOUT,
    COMPILE_ERROR,
    LAUNCH_ERROR,
    TIMING_ESCAPE,
    STALE_OUTPUT,
    BETA_ZERO_READS_C,
    HARNESS_OUT_OF_MEMORY,
    HARNESS_ERROR,
    VENDOR_KERNEL,
    WRONG_STREAM,
)


# Observations that cost nothing: shown on the summary line, in the JSON report's notes and in
# Gradescope's text, never a failure (outputs/verdicts.py: ``kernel_verdict``).
NOTES: tuple[str, ...] = (ALPHA_ZERO_READS_AB,)


class GemmCheckFailure(AssertionError):
    """A conformance check failed; ``category`` says what kind of failure.

    An AssertionError so pytest reports it as a test failure (not an error),
    and its ``str()`` is the whole student-facing message.
    """

    def __init__(self, category: str, summary: str, details: list[str] | None = None) -> None:
        if category not in ALL:
            raise ValueError(f"unknown failure category {category!r}; valid categories are {', '.join(ALL)}")
        self.category = category
        self.summary = " ".join(summary.split())  # one line, whatever the caller built
        self.details = list(details or [])
        super().__init__(self._message())

    def _message(self) -> str:
        lines = [f"[{self.category}] {self.summary}"]
        lines.extend(f"  {d}" for d in self.details)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._message()

    def __reduce__(self):  # picklable across processes despite the custom __init__
        return (type(self), (self.category, self.summary, self.details))


__all__ = [
    "ALL", "GemmCheckFailure",
    "WRONG_VALUES", "UNWRITTEN_OUTPUT", "OUT_OF_BOUNDS_WRITE", "INPUT_MODIFIED", "NONDETERMINISTIC",
    "PRECISION_TOO_LOW", "FAULT", "TIMEOUT", "COMPILE_ERROR", "LAUNCH_ERROR", "TIMING_ESCAPE", "STALE_OUTPUT",
    "BETA_ZERO_READS_C", "ALPHA_ZERO_READS_AB",
    "HARNESS_OUT_OF_MEMORY", "HARNESS_ERROR", "HARNESS_FAILURES", "NOTES", "VENDOR_KERNEL",
    "WRONG_STREAM",
]


def is_cuda_error(exc: BaseException) -> bool:
    """An error raised by CUDA itself (CuPy's CUDARuntimeError, CUDADriverError, ...)."""
    return "CUDA" in type(exc).__name__ or "cuda" in type(exc).__module__
