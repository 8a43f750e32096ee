"""The shipped conformance suite: run against the kernels given with --gemm-kernel (or the
gemm_kernels ini key), or the reference ladder (`pytest --gemm-ladder`).

pytest-gemm collects these modules from its own installed files under the module names
``_pytest_gemm_shipped_conformance.<name>`` (runner/collection.py), so a project with its
own ``conformance`` package runs both. No conftest.py here: its fixtures live in the plugin."""
