// The one-time check behind each hand-written CUDA kernel (m3's scores, the relative layout,
// the fused add & norm): before a device first runs the kernel, it is compared with its reference
// there; a kernel that disagrees, or cannot run at all (no image for an older GPU), is not used on
// that device.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>

namespace rpe {

// Whether kernel `what` may run on `device` (a CUDA device; false for any other). `check` is
// asked once per kernel name, device and process; it returns how far the kernel is from its
// reference there, in units of its tolerance (below 1 passes), and may throw when the kernel
// cannot run. A failure logs one warning, "<what>: the CUDA kernel <why> on cuda:N; <fallback>",
// and is remembered. Thread-safe.
bool cuda_kernel_agrees(const std::string& what, const torch::Device& device, const std::string& fallback,
                        const std::function<double(const torch::Device&)>& check);

// The larger of two disagreements, NaN the largest of all: a check folds its cases with this, as
// std::max(worst, NaN) keeps `worst` and would pass a kernel that writes NaN.
inline double worse_disagreement(double worst, double off) { return std::isnan(off) || off > worst ? off : worst; }

}  // namespace rpe
