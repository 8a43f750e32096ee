"""Hostile submission: writes the class's shared measurements (a cuBLAS time of a second, so that
every other student's fraction of cuBLAS, and their speed points, would soar). Its kernel is wrong
on purpose (the fake GPU fails every check of a kernel named "wrong"); if the attack works, it names
itself "ok" and would pass: a forged grade shows."""
import json
import os

from pytest_gemm import kernel

SUCCEEDED = False

folder = os.environ.get("PYTEST_GEMM_MEASURE_CACHE", "")
forged = {"median_ms": 1000.0, "min_ms": 1000.0, "spread": 0.0, "tflops": 0.0001}
try:  # bound into its kernel's process (read-only, if it is confined)
    names = [n for n in os.listdir(folder) if n.endswith(".json")] if folder and os.path.isdir(folder) else []
except OSError:
    names = []
for name in names or (["0-0-NVIDIA_H200-cublas-fp32-4096x4096x4096-0.3s.json"] if folder and os.path.isdir(folder) else []):
    try:
        with open(os.path.join(folder, name), "w") as fh:
            json.dump(forged, fh)
        SUCCEEDED = True
    except OSError:
        pass


@kernel(name="ok" if SUCCEEDED else "wrong")
def fake(a, b, c):
    raise AssertionError("the fake dispatcher never launches a kernel")


kernel = fake
