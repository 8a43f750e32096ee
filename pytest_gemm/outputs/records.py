"""One typed record per check and per kernel, the run's results built once from them, and the
two rules every output applies: ``kernel_verdict`` (what a kernel's checks add up to: its
status and, when it failed, one root cause with the other failures as its consequences) and
``timing_trusted`` (whether its timings may be ranked).

The verdict rules themselves are ``verdicts.py`` (``kernel_verdict``, ``Verdict``, the lists
``TIMED_CHECKS``, ``UNTRUSTED_TIMING``, ``BLAS_ZERO_RULES``, ``ROOT_CAUSE_ORDER``): import them from
there. A check's result travels once: the plugin
builds a frozen ``CheckRecord`` when the test reports (category, summary, details and facts
kept apart, never flattened into one string),
it crosses xdist as one JSON object (``to_dict`` / ``from_dict``, the only serialisation), and
at the end of the run ``RunResults.build`` groups the records by kernel and derives each
kernel's verdict and ``timing_trusted`` once. The terminal table, the JSON report, the sweep
table, the plot, Gradescope, JUnit and the plugin's hooks all read that one object; none
decides on its own. The JSON report's layout is ``report.schema.json`` (shipped beside this).

Pure: tested with no GPU. The rules are written down, one row per rule, in
``docs/verdicts.md``; each has a test.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .verdicts import Verdict, kernel_verdict, timing_trusted_checks

NO_GPU_PREFIX = "no usable GPU"
# The record's own keys on the wire; every other key is a fact (resources, timing, roofs, ...).
_KNOWN = ("kernel", "precision", "check", "shape", "params", "outcome", "category", "summary", "details",
          "message", "ladder", "requested_shape", "wall_s")

def split_message(message: str | None, category: str | None = None) -> tuple[str | None, tuple[str, ...]]:
    """(summary, details) of a free-text message (a skip reason, a user's assertion): the first
    line and the rest. A ``[category]`` tag in front is dropped: the category is a field."""
    text = (message or "").strip()
    if not text:
        return None, ()
    if category and text.startswith(f"[{category}] "):
        text = text[len(category) + 3:]
    first, *rest = text.splitlines()
    return first.strip(), tuple(line[2:] if line.startswith("  ") else line for line in rest)


@dataclass(frozen=True)
class CheckRecord:
    """One check on one kernel at one shape (or architecture): what it found, kept apart."""

    kernel: str | None                  # None: a user's own graded test (gemm_weight), no kernel
    check: str                          # a check's name, or a user test's node id
    outcome: str                        # passed | failed | skipped
    precision: str | None = None
    shape: list[int] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    category: str | None = None         # a failure's category (model/categories.py)
    summary: str | None = None          # one line: what a failed or skipped check found
    details: tuple[str, ...] = ()       # the lines under it (rows, columns, the kernel's output)
    ladder: bool = False
    requested_shape: list[int] | None = None
    wall_s: float | None = None         # the test's wall time
    facts: dict[str, Any] = field(default_factory=dict)  # resources, timing, fraction_of_cublas, roofs, ...

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CheckRecord":
        """The record from its JSON form (``to_dict``); a ``message`` alone (older records, a
        hand-written one in a test) is split into summary and details."""
        summary, details = d.get("summary"), tuple(d.get("details") or ())
        if summary is None and d.get("message"):
            summary, details = split_message(d.get("message"), d.get("category"))
        wall = d.get("wall_s")
        kernel = d.get("kernel")
        return cls(kernel=None if kernel is None else str(kernel), check=str(d.get("check") or ""),
                   outcome=str(d.get("outcome")),
                   precision=d.get("precision"), shape=list(d["shape"]) if d.get("shape") else None,
                   params=dict(d.get("params") or {}), category=d.get("category"), summary=summary,
                   details=details, ladder=bool(d.get("ladder")),
                   requested_shape=list(d["requested_shape"]) if d.get("requested_shape") else None,
                   wall_s=float(wall) if isinstance(wall, (int, float)) else None,
                   facts={k: v for k, v in d.items() if k not in _KNOWN})

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: how a record crosses xdist (once), and what tests and tools read."""
        d: dict[str, Any] = {"kernel": self.kernel, "precision": self.precision, "check": self.check,
                             "shape": self.shape, "params": dict(self.params), "outcome": self.outcome,
                             "category": self.category, "summary": self.summary, "details": list(self.details)}
        if self.ladder:
            d["ladder"] = True
        if self.requested_shape:
            d["requested_shape"] = list(self.requested_shape)
        if self.wall_s is not None:
            d["wall_s"] = self.wall_s
        d.update(self.facts)
        return d

    @property
    def message(self) -> str | None:
        """The whole text, as a terminal shows it: ``[category] summary`` and the details indented."""
        if self.summary is None:
            return None
        head = f"[{self.category}] {self.summary}" if self.category else self.summary
        return "\n".join([head, *(f"  {d}" for d in self.details)])

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def skipped_for_no_gpu(self) -> bool:
        return self.outcome == "skipped" and (self.summary or "").strip().startswith(NO_GPU_PREFIX)

    @property
    def where(self) -> str:
        """``exact 17x33x65``, ``compile sm_80``, ``alphabeta 127x255x63 alpha=0.7 beta=1.3``."""
        parts = [self.check]
        if self.shape:
            parts.append("x".join(map(str, self.shape)))
        parts += [str(v) if k == "arch" else f"{k}={v}" for k, v in self.params.items()]
        return " ".join(parts)

    @property
    def first_line(self) -> str:
        return self.summary or ""


def as_records(records: Iterable[Mapping[str, Any] | CheckRecord]) -> list[CheckRecord]:
    """Typed records (dicts, from a test or an older report, are read with ``from_dict``)."""
    return [r if isinstance(r, CheckRecord) else CheckRecord.from_dict(r) for r in records]


@dataclass(frozen=True)
class KernelResult:
    """Every record of one kernel, with its verdict and whether its timings may be ranked:
    both derived once, when the result is built (``KernelResult.of``)."""

    name: str
    precision: str | None
    checks: tuple[CheckRecord, ...]
    ladder: bool
    verdict: "Verdict"
    trusted: bool                       # timing_trusted: its timings may be ranked

    @classmethod
    def of(cls, name: str, precision: str | None, checks: Sequence[CheckRecord], ladder: bool = False) -> "KernelResult":
        checks = tuple(checks)
        return cls(name, precision, checks, ladder, kernel_verdict(checks), timing_trusted_checks(checks))

    @property
    def resources(self) -> dict[str, Any]:
        for r in self.checks:
            if r.check == "launch" and r.facts.get("resources"):
                return dict(r.facts["resources"])
        return {}

    @property
    def timed(self) -> list[CheckRecord]:
        """Speed records that carry a timing (whether trusted or not)."""
        return [r for r in self.checks if r.check == "speed" and isinstance(r.facts.get("timing"), dict)
                and r.outcome != "skipped"]


@dataclass(frozen=True)
class RunResults:
    """A run's results, built once at its end and handed to every renderer, hook and test:
    the records in order, and each kernel's ``KernelResult`` (verdict and trust derived once)."""

    records: tuple[CheckRecord, ...]
    kernels: Mapping[str, KernelResult]

    @classmethod
    def build(cls, records: "RunResults | Iterable[Mapping[str, Any] | CheckRecord]") -> "RunResults":
        if isinstance(records, RunResults):
            return records
        typed = as_records(records)
        grouped: dict[str, list[CheckRecord]] = {}
        for r in typed:
            if r.kernel is not None:  # a user's graded test belongs to no kernel
                grouped.setdefault(r.kernel, []).append(r)
        kernels = {name: KernelResult.of(name, rs[0].precision, rs, any(r.ladder for r in rs))
                   for name, rs in grouped.items()}
        return cls(tuple(typed), kernels)

    def __iter__(self):
        return iter(self.records)


def kernel_results(records: "RunResults | Iterable[Mapping[str, Any] | CheckRecord]") -> Mapping[str, KernelResult]:
    """Records grouped by kernel, in order of appearance (``RunResults.build(...).kernels``)."""
    return RunResults.build(records).kernels


def timing_trusted(result: KernelResult) -> bool:
    """Whether a kernel's timings may be ranked (``KernelResult.trusted``, derived once)."""
    return result.trusted
