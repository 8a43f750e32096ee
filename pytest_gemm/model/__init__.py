"""The vocabulary every other package speaks: failure categories, precisions, kernel
declarations (the contract) and shapes. Pure Python, no CUDA; imports nothing else of pytest_gemm."""
