"""``--gemm-isolation none``: the kernels run in pytest's own process, and a launcher that
replaces a timer there is still seen (measure/integrity.py pins before the kernels load). No GPU."""
from __future__ import annotations

import pytest

KERNEL = '''
import time

from pytest_gemm import kernel

_real = time.perf_counter
time.perf_counter = lambda: _real() / 10  # UNTRUSTED: every interval reads ten times shorter


@kernel(name="patches_at_import")
def patches_at_import(a, b, c):
    raise AssertionError("never launched here")
'''

CONFTEST = '''
def pytest_sessionfinish(session):
    from pytest_gemm.measure.integrity import tampered

    print("TAMPERED:", ",".join(tampered()) or "-")
'''


@pytest.mark.parametrize("isolation", ["none"])
def test_a_timer_replaced_in_pytests_own_process_is_seen(pytester: pytest.Pytester, isolation: str):
    pytester.makepyfile(kmod=KERNEL, test_nothing="def test_x():\n    pass\n")
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest_subprocess("--gemm-isolation", isolation, "--gemm-kernel", "kmod:patches_at_import",
                                           "-s", "-p", "no:randomly", "test_nothing.py")
    out = result.stdout.str() + result.stderr.str()
    assert "TAMPERED: time.perf_counter" in out, out  # the speed check's reject_tampering reads this
