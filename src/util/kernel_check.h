// The one-time check behind each hand-written CUDA kernel (m3's scores, the relative layout,
// the fused add & norm): before a device first runs the kernel, it is compared with its reference
// there; a kernel that disagrees, or cannot run at all (no image for an older GPU), is not used on
// that device.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

namespace rpe {

// Whether kernel `what` may run on `device` (a CUDA device; false for any other). `check` is
// asked once per kernel name, device and process; it returns how far the kernel is from its
// reference there, in units of its tolerance (below 1 passes), and may throw when the kernel
// cannot run. A failure logs one warning, "<what>: the CUDA kernel <why> on cuda:N; <fallback>",
// and is remembered. Thread-safe.
bool cuda_kernel_agrees(const std::string& what, const torch::Device& device, const std::string& fallback,
                        const std::function<double(const torch::Device&)>& check);

// The kernels' names for RPE_TRAIN_DISABLE_CUDA_KERNELS: a `what` above in lower case, each run of
// other characters one '_' ("add & norm" is add_norm).
std::string cuda_kernel_id(const std::string& what);
inline const std::set<std::string>& cuda_kernel_ids() {
  static const std::set<std::string> ids{"add_norm", "m3", "relative_layout"};
  return ids;
}
// RPE_TRAIN_DISABLE_CUDA_KERNELS=add_norm,m3 (or all): those kernels are not used, unchecked, and
// their fallback runs. A device fault (an illegal address) is not an error a check can catch: it
// ends the process, so this is the way to run on a device where a kernel brings the process
// down, without a rebuild. The value as parsed (the ids; UserError naming the variable for an
// unknown one); disabled_cuda_kernels() parses the environment once per process.
std::set<std::string> parse_disabled_cuda_kernels(const char* value);
const std::set<std::string>& disabled_cuda_kernels();

// The larger of two disagreements, NaN the largest of all: a check folds its cases with this, as
// std::max(worst, NaN) keeps `worst` and would pass a kernel that writes NaN.
inline double worse_disagreement(double worst, double off) { return std::isnan(off) || off > worst ? off : worst; }

}  // namespace rpe
