// m3's trilinear scores, exposed so tests can check each of its kernels against the equation,
// and its CUDA kernel on LibTorch tensors (m3_cuda_tensors.cpp; m3_cuda.cu).
#pragma once
#include <torch/torch.h>

#include <array>

namespace rpe {

// How m3 evaluates e_ij = sum_t q_it k_jt w_{clip(j-i,k)+k, t}:
//   loop: fused loops over (i, j, t) in fp32/fp64, threads over (batch, head) (CPU only);
//   band: tensor ops over groups of diagonals (any device);
//   cuda: one CUDA thread per output element (m3_cuda.cu; builds with a CUDA LibTorch and nvcc);
//   automatic: loop on CPU; on CUDA the cuda kernel where it is built and agrees with the
//   equation on that device (m3_cuda_usable), else band.
enum class M3Kernel { automatic, loop, band, cuda };

// Unscaled scores [B, H, L, L] with a hand-written backward that saves only q, k, w.
// q, k: [B, H, L, d]; w: [H|1, 2k+1, d]; clip = k. band_group > 0 sets the band's diagonals
// per group (tests); 0 sizes them by device (m3.cpp's group_size).
torch::Tensor m3_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w, int64_t clip,
                        M3Kernel kernel = M3Kernel::automatic, int64_t band_group = 0);

// --- shared by m3's kernels (m3.cpp, m3_cuda_tensors.cpp)
namespace m3_detail {
// The expanded table's row of every offset r = j - i in [-(L-1), L-1]: clip(r, k) + k, [2L-1].
torch::Tensor offset_rows(int64_t L, int64_t clip, const torch::Device& device);
// fp64 stays fp64 (exact tests); every other dtype computes in fp32 and rounds once.
torch::ScalarType compute_dtype(const torch::Tensor& q);
}  // namespace m3_detail

// --- the CUDA kernel (m3_cuda_tensors.cpp): declared in every build; with a CUDA LibTorch
// and nvcc (RPE_WITH_M3_CUDA) it runs, elsewhere m3_cuda_usable is false.

// Whether this build has the kernel.
bool m3_cuda_kernel_built();

// True when the kernel is built and, on this device, agrees with the equation (small fp64 and
// fp32 problems against the [B, H, L, L, d] product, checked once per device and process; a
// disagreement or a failure to run is logged once and m3 keeps its band kernel there).
bool m3_cuda_usable(const torch::Device& device);

// Unscaled scores [B, H, L, L] from q, k [B, H, L, d] (on a CUDA device) and w [H|1, 2k+1, d],
// clip = k; fp64 stays fp64, other dtypes compute in fp32 and round once.
torch::Tensor m3_cuda_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w, int64_t clip);

// {dq, dk, dw} given g = dL/de [B, H, L, L].
std::array<torch::Tensor, 3> m3_cuda_grads(const torch::Tensor& g, const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& w, int64_t clip);

}  // namespace rpe
