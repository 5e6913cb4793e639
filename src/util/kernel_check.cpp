// cuda_kernel_agrees (kernel_check.h): one answer per (kernel, device index), kept for the process.
#include "util/kernel_check.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <map>
#include <mutex>
#include <utility>

#include "util/log.h"

namespace rpe {

bool cuda_kernel_agrees(const std::string& what, const torch::Device& device, const std::string& fallback,
                        const std::function<double(const torch::Device&)>& check) {
  if (!device.is_cuda()) return false;
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, bool> agrees;
  const std::lock_guard<std::mutex> lock(mutex);
  const int index = device.has_index() ? device.index()
                                       : c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index();
  const auto key = std::make_pair(what, index);
  if (const auto it = agrees.find(key); it != agrees.end()) return it->second;
  std::string why;
  try {
    const double off = check(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index)));
    if (!(off < 1)) why = fmt::format("disagrees with its reference ({:g} times the tolerance)", off);
  } catch (const std::exception& e) {
    why = std::string("did not run: ") + e.what();  // the kernels read (and so clear) their launch error
  }
  if (!why.empty()) {
    if (const auto nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
    log::warn("model", "{}: the CUDA kernel {} on cuda:{}; {}", what, why, index, fallback);
  }
  return agrees[key] = why.empty();
}

}  // namespace rpe
