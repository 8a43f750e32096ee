"""Grading configuration: points and visibility per check (ini keys ``gemm_weights``,
``gemm_visibility``, ``gemm_performance_threshold``) and the markers ``gemm_weight`` /
``gemm_visibility`` on a user's own tests. Every bad key or value raises ``ValueError``
naming it and listing the valid ones. The checks, their default points and labels come
from the check registry (``checks/registry.py``)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..checks import registry

# The conformance checks, in the order their Gradescope tests are listed.
CHECKS: tuple[str, ...] = registry.GRADED
DEFAULT_WEIGHTS: dict[str, float] = {name: registry.get(name).weight for name in CHECKS}
VISIBILITIES: tuple[str, ...] = ("visible", "hidden", "after_due_date", "after_published")
# Extra keys of gemm_visibility besides check names.
VISIBILITY_KEYS: tuple[str, ...] = ("default", "results", "stdout")

def _is_custom_check(name: str) -> bool:
    """A user test's record carries its node id as the check name."""
    return "::" in name


def _visibility(value: str, where: str) -> str:
    if value not in VISIBILITIES:
        raise ValueError(f"{where}: visibility {value!r} is not valid; valid visibilities: {', '.join(VISIBILITIES)}")
    return value


def _weight(value: Any, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: weight {value!r} is not a number; expected points >= 0, e.g. 40") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{where}: weight {value!r} must be a finite number of points >= 0, e.g. 40")
    return number


def _threshold(value: Any, where: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {value!r} is not a number; expected a fraction of cuBLAS > 0 "
                         "(full speed credit at or above it), e.g. 0.3") from None
    if not math.isfinite(number) or not 0 < number <= 10:
        raise ValueError(f"{where}: {value!r} is out of range; expected a fraction of cuBLAS in (0, 10], e.g. 0.3")
    return number


def _lines(value: Any) -> list[str]:
    """An ini value (pytest linelist, or one multi-line string) as stripped lines, no comments."""
    if value is None:
        return []
    items = value.splitlines() if isinstance(value, str) else [str(v) for v in value]
    out = []
    for line in items:
        line = line.split(" #")[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _key_value(line: str, where: str, example: str) -> tuple[str, list[str]]:
    key, sep, value = line.rpartition("=")
    key = key.strip()
    if not sep or not key or not value.strip():
        raise ValueError(f"{where}: line {line!r} is not 'check = value'; e.g. {example}")
    return key, value.split()


def _check_key(key: str, where: str, extra: Sequence[str] = ()) -> str:
    if key in CHECKS or key in extra or _is_custom_check(key):
        return key
    valid = ", ".join(list(CHECKS) + list(extra))
    raise ValueError(f"{where}: unknown check {key!r}; valid keys: {valid} "
                     "(or a test node id such as tests/test_mine.py::test_tiles)")


@dataclass
class GradingConfig:
    """How checks become points: weights, visibilities, the speed threshold."""

    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    visibility: dict[str, str] = field(default_factory=dict)  # per check; others get default_visibility
    default_visibility: str = "visible"
    results_visibility: str = "visible"      # top-level "visibility" of the whole result
    stdout_visibility: str = "hidden"        # the autograder's stdout (pytest's output)
    performance_threshold: float | None = None  # fraction of cuBLAS for full speed credit
    max_failures_listed: int = 8

    def __post_init__(self) -> None:
        for check, w in list(self.weights.items()):
            _check_key(check, "GradingConfig.weights")
            self.weights[check] = _weight(w, f"GradingConfig.weights[{check!r}]")
        for check, v in self.visibility.items():
            _check_key(check, "GradingConfig.visibility")
            _visibility(v, f"GradingConfig.visibility[{check!r}]")
        _visibility(self.default_visibility, "GradingConfig.default_visibility")
        _visibility(self.results_visibility, "GradingConfig.results_visibility")
        _visibility(self.stdout_visibility, "GradingConfig.stdout_visibility")
        self.performance_threshold = _threshold(self.performance_threshold, "GradingConfig.performance_threshold")

    def weight(self, check: str) -> float:
        return self.weights.get(check, 0.0)

    def visibility_of(self, check: str) -> str:
        return self.visibility.get(check, self.default_visibility)

    def max_score(self, checks: Iterable[str] = CHECKS) -> float:
        """Points available when every listed check has a weight (alpha/beta included)."""
        return float(sum(self.weight(c) for c in checks))

    @classmethod
    def from_ini(cls, ini: Mapping[str, Any] | Callable[[str], Any]) -> "GradingConfig":
        """From ``config.getini`` (or a mapping of ini key to value).

        ``gemm_weights``: lines ``check = points [visibility]``; a check not listed keeps
        its default weight (exact 40, coverage 10, guards 10, alphabeta 5, deterministic 10,
        accuracy 15, speed 10, launch 0, compile 0).
        ``gemm_visibility``: lines ``check = visibility``, plus ``default``, ``results``
        (the whole result) and ``stdout`` (pytest's output, hidden by default).
        ``gemm_performance_threshold``: the fraction of cuBLAS that earns full speed credit.
        """

        def get(name: str) -> Any:
            if callable(ini):
                try:
                    return ini(name)
                except (ValueError, KeyError):  # pytest: an ini key nobody registered
                    return None
            return ini.get(name)

        weights = dict(DEFAULT_WEIGHTS)
        visibility: dict[str, str] = {}
        seen: set[str] = set()
        for line in _lines(get("gemm_weights")):
            where = f"gemm_weights: {line!r}"
            key, words = _key_value(line, "gemm_weights", "'exact = 40' or 'speed = 10 hidden'")
            check = _check_key(key, where)
            if check in seen:
                raise ValueError(f"{where}: check {check!r} is given twice; give each check once")
            seen.add(check)
            if len(words) > 2:
                raise ValueError(f"{where}: expected 'check = points [visibility]', e.g. 'speed = 10 hidden'")
            weights[check] = _weight(words[0], where)
            if len(words) == 2:
                visibility[check] = _visibility(words[1], where)
        extra = {"default": "visible", "results": "visible", "stdout": "hidden"}
        for line in _lines(get("gemm_visibility")):
            where = f"gemm_visibility: {line!r}"
            key, words = _key_value(line, "gemm_visibility", "'speed = after_published' or 'stdout = visible'")
            key = _check_key(key, where, VISIBILITY_KEYS)
            if len(words) != 1:
                raise ValueError(f"{where}: expected one visibility; valid visibilities: {', '.join(VISIBILITIES)}")
            value = _visibility(words[0], where)
            if key in extra:
                extra[key] = value
            else:
                visibility[key] = value
        threshold = _threshold(get("gemm_performance_threshold"), "gemm_performance_threshold")
        return cls(weights=weights, visibility=visibility, default_visibility=extra["default"],
                   results_visibility=extra["results"], stdout_visibility=extra["stdout"],
                   performance_threshold=threshold)


# ---- markers for the user's own tests ------------------------------------------------

def _marker_value(item: Any, name: str, usage: str) -> Any:
    marker = item.get_closest_marker(name)
    if marker is None:
        return None
    args = tuple(marker.args) + tuple(marker.kwargs.values())
    if len(args) != 1:
        raise ValueError(f"{getattr(item, 'nodeid', item)}: use {usage}; got args={tuple(marker.args)!r} "
                         f"kwargs={dict(marker.kwargs)!r}")
    return args[0]


def weight_from_marker(item: Any) -> float | None:
    """The points of ``@pytest.mark.gemm_weight(points)`` on a test item, or None."""
    usage = "@pytest.mark.gemm_weight(points), e.g. gemm_weight(5)"
    value = _marker_value(item, "gemm_weight", usage)
    if value is None:
        return None
    return _weight(value, f"{getattr(item, 'nodeid', item)}: use {usage}")


def visibility_from_marker(item: Any) -> str | None:
    """The Gradescope visibility of ``@pytest.mark.gemm_visibility("hidden")``, or None."""
    usage = "@pytest.mark.gemm_visibility(visibility), e.g. gemm_visibility('hidden')"
    value = _marker_value(item, "gemm_visibility", usage)
    if value is None:
        return None
    return _visibility(value, f"{getattr(item, 'nodeid', item)}: use {usage}")


def user_test_record(item: Any, outcome: str, message: str | None = None,
                     category: str | None = None) -> dict[str, Any] | None:
    """A record for a user test carrying gemm_weight/gemm_visibility, or None without them.

    The check name is the test's node id without its parameters, so the
    parametrizations of one test form one Gradescope test with partial credit.
    """
    weight, visibility = weight_from_marker(item), visibility_from_marker(item)
    if weight is None and visibility is None:
        return None
    nodeid = str(getattr(item, "nodeid", item))
    base, _, param = nodeid.partition("[")
    record: dict[str, Any] = {"kernel": None, "precision": None, "check": base, "shape": None,
                              "params": {"id": param.rstrip("]")} if param else {}, "outcome": outcome,
                              "category": category}
    if message:
        record["message"] = message
    if weight is not None:
        record["weight"] = weight
    if visibility is not None:
        record["visibility"] = visibility
    return record
