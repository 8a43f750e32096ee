"""The conformance checks: one module per check, the registry that declares them, the
cases they run on, dispatch and the sandboxed child process. May import every package above
(``model``, ``judges``, ``kernels``, ``measure``)."""
