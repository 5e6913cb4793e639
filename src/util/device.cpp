// Device selection and runtime description.
#include "util/device.h"

#include <torch/version.h>

#include "util/errors.h"

namespace rpe {

torch::Device resolve_device(const std::string& name) {
  if (name == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (name.rfind("cuda", 0) == 0) {
    require(torch::cuda::is_available(),
            "train.device is '" + name + "' but LibTorch sees no CUDA device (use 'cpu' or 'auto')");
    try {
      return torch::Device(name);
    } catch (const std::exception&) {
    }
  }
  throw UserError("train.device: '" + name + "' is not a device; valid: auto, cpu, cuda, cuda:N");
}

std::string describe_runtime() {
  std::string s = std::string("LibTorch ") + TORCH_VERSION;
  const bool cuda = torch::cuda::is_available();
  s += cuda ? ", CUDA available, " + std::to_string(torch::cuda::device_count()) + " GPU(s)"
            : ", no CUDA device (CPU only)";
  return s;
}

}  // namespace rpe
