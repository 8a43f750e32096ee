"""Another package's ops: a matmul wrapper that imports its Triton kernel when first called."""
