"""Loading, compiling and launching a kernel: the spec loader, NVRTC, device discovery,
the guarded launch harness. May import ``model`` and ``judges``."""
