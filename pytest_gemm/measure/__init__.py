"""Timing: CUDA events, the launch guard, roofs, cuBLAS baselines, timed runs of a
harness and the sweep's sizes. May import ``model``, ``judges`` and ``kernels``."""
