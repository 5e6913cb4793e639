// The [L, L] layout of relative scores on CUDA, one kernel each way (relative_layout_cuda.cu):
// given s = x . table rows of every slot ([B, H, L, W], slot c = clip(distance, k) + k), it
// writes relative_scores' or relative_key_scores' [B, H, L, L] directly, where the skew path
// (position_method.cpp) multiplies per query block, copies the skewed views together and, for
// the key side, hands on a transposed view that the next add reads across. Backward sums each
// slot's gradient without atomics. The CPU and builds without nvcc keep the skew path; a device
// uses the kernels only after they agree there with ATen's gather (cuda_kernel_agrees).
#pragma once
#include <torch/torch.h>

namespace rpe {

// Whether this build has the kernels (a CUDA LibTorch and nvcc).
bool relative_layout_kernel_built();

// Whether relative_scores uses the kernels on `device`: a CUDA device where they agree with the
// reference (checked once), unless turned off by set_relative_layout_kernel(false).
bool relative_layout_usable(const torch::Device& device);

// Whether the kernels suit a length L and reach k' = relative_reach(k, L): the backward sums each
// clipped end's run (the L - k' distances at or past the clip) in one thread, serially, which is
// fine for the default unclipped tables (a run of one) and slow for small clips at long lengths
// (the paper's Table 4: k = 2 at L = 512 sums ~510 elements a thread); past kMaxClippedRun
// elements the skew path (its gather for short tables) runs instead.
inline constexpr int64_t kMaxClippedRun = 64;
inline bool relative_layout_suits(int64_t L, int64_t reach) { return L > 0 && L - reach <= kMaxClippedRun; }

// Turns the kernels off (or on again) for every later call in the process: the benchmarks'
// --no-relative-kernel, to time the skew path on the same device.
void set_relative_layout_kernel(bool on);

// out[b, h, i, j] = s[b, h, key_side ? j : i, clip(j - i, k) + k], as one autograd node.
// s: [B, H, L, W] on a CUDA device, W >= 2k + 1, each [L, W] block row-major; returns a
// contiguous [B, H, L, L] in s's dtype.
torch::Tensor relative_layout(const torch::Tensor& s, int64_t k, bool key_side);

// The same with ATen ops (gather), any device: the kernels' reference.
torch::Tensor relative_layout_reference(const torch::Tensor& s, int64_t k, bool key_side);

}  // namespace rpe
