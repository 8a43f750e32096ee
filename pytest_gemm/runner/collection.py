"""Collection: parametrize the suite over the kernels under test, check markers, skip
what this machine cannot run."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from ..checks import registry
from ..checks.cases import GemmCase, build_cases, skip_reason
from ..grading.config import visibility_from_marker, weight_from_marker
from ..model.contract import short_id
from .state import is_ladder_entry, kernels_under_test, ladder_for_ranking, state
from .configure import pin_gpu


def generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``gemm_case`` from a ``gemm_cases`` marker: ``gemm_cases()`` (every GPU check
    of the registry), ``gemm_cases("exact")`` (one check, its registered shapes), or with
    ``shapes=`` / ``params=`` / ``when=`` overriding the registry's."""
    if "gemm_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("gemm_cases")
    if marker is None:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: uses gemm_case without a @pytest.mark.gemm_cases(...) marker")
    name = marker.args[0] if marker.args else marker.kwargs.get("check")
    if name is None:
        checks = [c for c in registry.CHECKS if c.gpu and not c.per_kernel]
    else:
        try:
            checks = [registry.get(name)]
        except ValueError as exc:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: gemm_cases: {exc}") from None
    values = []
    for check in checks:
        values += _params(metafunc.config, check, marker)
    if not values:
        what = name or "any"
        values = [pytest.param(None, id=f"{what}-none", marks=pytest.mark.skip(
            reason=f"no kernel under test has what the {what} check needs"))]
    metafunc.parametrize("gemm_case", values)


def _shapes(config: pytest.Config, check: registry.Check, given: Any, kernel: Any) -> Any:
    """The shapes ``check`` runs ``kernel`` on: the marker's (``given``), else --gemm-shapes quick's
    or full's; with neither option given, quick for a kernel that autotunes per shape."""
    profile = state(config).shapes
    quick = check.quick is not None and (profile == "quick" or (
        profile == "auto" and kernel is not None and _autotunes(kernel)))
    shapes = given or (check.quick if quick else check.shapes)
    return [state(config).bench_shape] if shapes == "bench" else shapes


@lru_cache(maxsize=None)
def _autotunes(kernel: Any) -> bool:
    from ..kernels.autotune import autotunes  # lazy: keeps kernels.autotune out of the plugin's load

    return autotunes(kernel)


def _params(config: pytest.Config, check: registry.Check, marker: pytest.Mark) -> list[Any]:
    given = marker.kwargs.get("shapes") or (marker.args[1] if len(marker.args) > 1 else None)
    params = marker.kwargs.get("params") or check.params
    per_kernel = bool(marker.kwargs.get("per_kernel", check.per_kernel))  # one test per kernel: <check>-<kernel>
    when = marker.kwargs.get("when")
    # lazy: keeps kernels.autotune, kernels.confine, kernels.declared out of the plugin's load
    from ..kernels.declared import is_bad

    under_test = kernels_under_test(config)
    bad = [k for k in under_test if is_bad(k)]  # one test per check, failing with the declaration's message
    kernels = [k for k in under_test if not is_bad(k) and (check.applies is None or check.applies(k))]
    cases = [case for k in kernels for case in build_cases(check.name, [k], _shapes(config, check, given, k), params, when)]
    if check.name == "speed":  # ranked with the ladder: its rungs are timed in the same run
        cases += build_cases(check.name, ladder_for_ranking(config), _shapes(config, check, given, None), params)
    values = [pytest.param(GemmCase(check.name, k, (1, 1, 1)), id=f"{check.name}-{short_id(str(k.name))}-declaration")
              for k in bad]
    for case in cases:
        reason = None if per_kernel else skip_reason(case.kernel, case.shape)  # a sweep skips sizes itself
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        test_id = f"{check.name}-{short_id(str(case.kernel.name))}" if per_kernel else case.id
        if is_ladder_entry(config, case.kernel):
            test_id = test_id.replace(f"{check.name}-", f"{check.name}-ladder-", 1)
        values.append(pytest.param(case, id=test_id, marks=marks))
    return values


def required_cc(item: pytest.Item) -> tuple[int, int] | None:
    marker = item.get_closest_marker("gemm_requires_cc")
    if marker is None:
        return None
    try:
        major, minor = (int(x) for x in marker.args)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{item.nodeid}: use @pytest.mark.gemm_requires_cc(major, minor), "
                                f"e.g. gemm_requires_cc(8, 0); got {marker.args!r}") from None
    return major, minor


# -- the shipped suite, collected from its own files under its own module names ----------

class ShippedSuite(pytest.Directory):
    """pytest-gemm's ``conformance`` folder: its ``test_*.py`` modules, whatever the project's
    ``python_files``, import mode or own ``conformance`` package."""

    def collect(self):  # type: ignore[no-untyped-def]
        for path in sorted(self.path.glob("test_*.py")):
            yield ShippedModule.from_parent(self, path=path)


class ShippedModule(pytest.Module):
    """A conformance module imported as ``_pytest_gemm_shipped_conformance.<name>`` (never as
    ``conformance.<name>``, the name a user's own ``conformance/`` package gets)."""

    def _getobj(self):  # type: ignore[no-untyped-def]
        # lazy: keeps kernels.autotune, kernels.confine, kernels.declared, kernels.loader out of the plugin's load
        from ..kernels.loader import import_shipped_module

        module = import_shipped_module("conformance", self.path)
        self.config.pluginmanager.consider_module(module)
        return module


@lru_cache(maxsize=1)
def _shipped_suite_dir() -> Path | None:
    # lazy: keeps kernels.autotune, kernels.confine, kernels.declared, kernels.loader out of the plugin's load
    from ..kernels.loader import shipped_dir

    try:
        return shipped_dir("conformance")
    except Exception:
        return None


def collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    suite = _shipped_suite_dir()
    if suite is not None and path.resolve() == suite:
        return ShippedSuite.from_parent(parent, path=path)
    return None


def uses_gemm(item: pytest.Item) -> bool:
    """The test requests a gemm fixture or carries a gemm marker."""
    fixtures = getattr(item, "fixturenames", ())
    return any(name.startswith("gemm_") for name in fixtures) or \
        any(mark.name.startswith("gemm_") for mark in item.iter_markers())


def select_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check marker arguments (a typo is an error even with no GPU); in --gemm-arch
    mode keep only compile-only checks. An xdist worker whose tests use the plugin gets its
    own GPU now, before any test runs (an unrelated suite is left alone)."""
    if any(uses_gemm(item) for item in items):
        state(config).active = True
        pin_gpu(config)

    for item in items:
        required_cc(item)
        try:
            weight_from_marker(item)
            visibility_from_marker(item)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    if state(config).arches is None:
        return
    keep = [i for i in items if i.get_closest_marker("gemm_offline")]
    drop = [i for i in items if not i.get_closest_marker("gemm_offline")]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def check_requirements(item: pytest.Item) -> None:
    needed = required_cc(item)
    if item.get_closest_marker("gemm_gpu") is None and needed is None:
        return
    from ..kernels.device import probe  # lazy: a test replaces probe on its module

    found = probe()
    if isinstance(found, str):
        pytest.skip(found)
    if needed is not None and found.compute_capability < needed:
        pytest.skip(f"needs compute capability {needed[0]}.{needed[1]}; this GPU ({found.name}) is "
                    f"{found.compute_capability[0]}.{found.compute_capability[1]}")

