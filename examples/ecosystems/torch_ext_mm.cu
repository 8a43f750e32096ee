// A torch CUDA extension (torch_extension.py builds it with torch.utils.cpp_extension.load_inline):
// the tiled SGEMM of examples/tiled.cu behind a host function that takes torch tensors and launches on
// torch's current stream, C (M x N) = A (M x K) @ B (K x N), row-major float32, any M, N, K.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#include "tiled.cu"  // examples/tiled.cu: extern "C" example_tiled, TILE x TILE tiles (16 by default)

void mm_into(torch::Tensor a, torch::Tensor b, torch::Tensor c) {
    TORCH_CHECK(a.is_cuda() && a.is_contiguous() && a.scalar_type() == torch::kFloat32, "a: contiguous float32 on the GPU");
    TORCH_CHECK(b.is_cuda() && b.is_contiguous() && b.scalar_type() == torch::kFloat32, "b: contiguous float32 on the GPU");
    TORCH_CHECK(c.is_cuda() && c.is_contiguous() && c.scalar_type() == torch::kFloat32, "c: contiguous float32 on the GPU");
    const int M = a.size(0), K = a.size(1), N = b.size(1);
    const dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    example_tiled<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                                      c.data_ptr<float>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
