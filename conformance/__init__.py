"""The shipped conformance suite: run against the kernels given with --gemm-kernel,
or the reference ladder. `pytest --gemm-kernel mymod:kernel` (no path) or
`pytest --pyargs conformance`."""
