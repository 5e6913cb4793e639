// m3's CUDA kernels (m3_cuda.cu) on LibTorch tensors. Declared in every build; with a CUDA
// LibTorch and nvcc (RPE_WITH_M3_CUDA) they run, elsewhere m3_cuda_usable is false.
#pragma once
#include <torch/torch.h>

#include <array>

namespace rpe {

// Whether this build has the kernels.
bool m3_cuda_kernel_built();

// True when the kernels are built and, on this device, agree with the equation (a small fp64
// problem against the [B, H, L, L, d] product, checked once per device and process; a
// disagreement is logged once and m3 keeps its band kernel there).
bool m3_cuda_usable(const torch::Device& device);

// Unscaled scores [B, H, L, L] from q, k [B, H, L, d] (on a CUDA device) and w [H|1, 2k+1, d],
// clip = k; fp64 stays fp64, other dtypes compute in fp32 and round once.
torch::Tensor m3_cuda_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w, int64_t clip);

// {dq, dk, dw} given g = dL/de [B, H, L, L].
std::array<torch::Tensor, 3> m3_cuda_grads(const torch::Tensor& g, const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& w, int64_t clip);

}  // namespace rpe
