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
