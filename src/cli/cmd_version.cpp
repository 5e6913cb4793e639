// rpe-train --version: versions of rpe-train, LibTorch and CUDA, and the devices seen.
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/torch.h>

#include <iostream>

#include "cli/commands.h"
#include "dist/data_parallel.h"
#include "model/add_norm.h"
#include "model/attention/m3.h"
#include "model/attention/relative_layout.h"
#include "model/attention/registry.h"
#include "rpe/version.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/kernel_check.h"

namespace rpe::cli {

int print_version() {
  std::cout << "rpe-train " << kVersion << " (" << kGitRevision << ")\n";
  std::cout << describe_runtime() << "\n";
  const auto& hooks = at::detail::getCUDAHooks();
  if (hooks.hasCUDART()) {
    const long v = hooks.versionCUDART();
    std::cout << "CUDA runtime " << v / 1000 << "." << (v % 1000) / 10 << " (cuDNN " << hooks.versionCuDNN() << ")\n";
  } else {
    std::cout << "CUDA runtime: none (CPU-only LibTorch or no CUDA libraries)\n";
  }
  std::cout << "NCCL: " << dist::nccl_version() << "\n";
  std::cout << "m3 CUDA kernel: "
            << (m3_cuda_kernel_built() ? "built" : "not built (m3 runs its band kernel on CUDA devices)") << "\n";
  std::cout << "relative layout CUDA kernels: "
            << (relative_layout_kernel_built() ? "built" : "not built (relative scores take the skew path on CUDA devices)")
            << "\n";
  std::cout << "add & norm CUDA kernel: "
            << (add_norm_kernel_built() ? "built" : "not built (post-LN add & norm runs unfused on CUDA devices)")
            << "\n";
  if (!disabled_cuda_kernels().empty())
    std::cout << "turned off by RPE_TRAIN_DISABLE_CUDA_KERNELS: "
              << join({disabled_cuda_kernels().begin(), disabled_cuda_kernels().end()}) << "\n";
  std::cout << "devices: cpu";
  for (int i = 0; i < hooks.getNumGPUs(); ++i) std::cout << ", cuda:" << i;
  std::cout << "\nposition methods: " << join(attention_method_names()) << "\n";
  return 0;
}

}  // namespace rpe::cli
