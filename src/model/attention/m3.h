// m3's trilinear scores, exposed so tests can check both of its kernels against the equation.
#pragma once
#include <torch/torch.h>

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

}  // namespace rpe
