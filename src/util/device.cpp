// Device selection and runtime description.
#include "util/device.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#include "util/errors.h"
#include "util/log.h"

namespace rpe {

torch::Device resolve_device(const std::string& name, const std::string& key) {
  if (name == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (name.rfind("cuda", 0) == 0) {
    require(torch::cuda::is_available(),
            key + " is '" + name + "' but LibTorch sees no CUDA device (use 'cpu' or 'auto')");
    try {
      return torch::Device(name);
    } catch (const std::exception&) {
    }
  }
  throw UserError(key + ": '" + name + "' is not a device; valid: auto, cpu, cuda, cuda:N");
}

int64_t rank_gpu(int64_t local_rank, int64_t visible) {
  if (local_rank < visible) return local_rank;
  if (visible == 1) return 0;  // this process's own GPU, the only one it sees
  throw UserError("rank-local process " + std::to_string(local_rank) + " (LOCAL_RANK) needs GPU cuda:" +
                  std::to_string(local_rank) + " but sees only " + std::to_string(visible) +
                  " (CUDA_VISIBLE_DEVICES): start at most one process per visible GPU");
}

torch::Device training_device(const std::string& name, int64_t local_rank, int64_t group_ranks,
                              const std::string& key) {
  if (group_ranks > 1 && name.rfind("cuda:", 0) == 0)
    throw UserError(key + ": '" + name + "' would put every process of this multi-process run on one GPU "
                    "(NCCL refuses that): use 'cuda' or 'auto', and each process takes its own (cuda:LOCAL_RANK)");
  torch::Device d = resolve_device(name, key);
  if (d.is_cuda() && !d.has_index() && group_ranks > 0)
    d = torch::Device(torch::kCUDA,
                      static_cast<c10::DeviceIndex>(rank_gpu(local_rank, torch::cuda::device_count())));
  if (name == "auto") {  // say which device and why, never a silent fallback
    if (d.is_cuda())
      log::info("device", "train.device auto: chose {} (LibTorch sees {} CUDA device(s))", d.str(),
                torch::cuda::device_count());
    else
      log::warn("device", "train.device auto: chose the CPU because {} (set train.device: cpu to silence this)",
                at::detail::getCUDAHooks().hasCUDART()
                    ? "this CUDA LibTorch sees no GPU (no driver, or CUDA_VISIBLE_DEVICES hides them)"
                    : "this LibTorch build has no CUDA support");
  }
  return d;
}

bool use_fused_attention(const torch::Device& device, const std::string& backend) {
  return device.is_cuda() && backend != "plain";
}

std::string describe_runtime() {
  std::string s = std::string("LibTorch ") + TORCH_VERSION;
  const bool cuda = torch::cuda::is_available();
  s += cuda ? ", CUDA available, " + std::to_string(torch::cuda::device_count()) + " GPU(s)"
            : ", no CUDA device (CPU only)";
  return s;
}

}  // namespace rpe
