// cuda_kernel_agrees (kernel_check.h): one answer per (kernel, device index), kept for the process.
#include "util/kernel_check.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "util/errors.h"
#include "util/log.h"

namespace rpe {

std::string cuda_kernel_id(const std::string& what) {
  std::string id;
  for (const char c : what) {
    if (std::isalnum(static_cast<unsigned char>(c))) id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!id.empty() && id.back() != '_') id += '_';
  }
  while (!id.empty() && id.back() == '_') id.pop_back();
  return id;
}

std::set<std::string> parse_disabled_cuda_kernels(const char* value) {
  std::set<std::string> ids;
  if (value == nullptr) return ids;
  std::stringstream items(value);
  for (std::string item; std::getline(items, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    if (item == "all") return cuda_kernel_ids();
    require(cuda_kernel_ids().count(item) == 1,
            "RPE_TRAIN_DISABLE_CUDA_KERNELS: unknown kernel '" + item + "' (known: all, " +
                join({cuda_kernel_ids().begin(), cuda_kernel_ids().end()}) + ")");
    ids.insert(item);
  }
  return ids;
}

const std::set<std::string>& disabled_cuda_kernels() {
  static const std::set<std::string> ids = parse_disabled_cuda_kernels(std::getenv("RPE_TRAIN_DISABLE_CUDA_KERNELS"));
  return ids;
}

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
  if (disabled_cuda_kernels().count(cuda_kernel_id(what)) == 1) {
    log::info("model", "{}: the CUDA kernel is turned off by RPE_TRAIN_DISABLE_CUDA_KERNELS; {}", what, fallback);
    return agrees[key] = false;
  }
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
