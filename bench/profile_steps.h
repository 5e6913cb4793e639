// Where a training step's time goes, for rpe-bench-model --profile-steps: runs `step` under
// LibTorch's Kineto profiler and sums, per name, what the device ran.
//   CUDA: the kernels, copies and memsets of the GPU (what MFU is lost to: GEMMs against
//         elementwise, normalisation, attention, the optimizer), and the GPU's busy time, the
//         union of those intervals: busy well under the wall time means the host does not
//         launch work fast enough.
//   CPU:  the ATen ops at every depth, each with its inclusive time (a caller's total holds
//         its callees'), busy = the steps' wall time. Enough to keep the path from rotting.
// Result: {"steps", "wall_ms", "busy_ms", "ops": [{"name", "ms", "calls"}...]}, per step,
// the `top` largest by time (all of them by default), names cut to 120 characters (CUDA
// kernels' template names).
#pragma once
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace rpe::bench {

namespace profiler = torch::autograd::profiler;

// An event's start and length in ns: LibTorch 2.x before the nanosecond accessors had the
// microsecond ones (startUs, durationUs).
template <class E> uint64_t start_ns(const E& e) {
  if constexpr (requires { e.startNs(); })
    return e.startNs();
  else
    return e.startUs() * 1000;
}
template <class E> uint64_t duration_ns(const E& e) {
  if constexpr (requires { e.durationNs(); })
    return e.durationNs();
  else
    return e.durationUs() * 1000;
}

// Total length of the union of [start, end) intervals, in ns.
inline double union_ns(std::vector<std::pair<uint64_t, uint64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  double total = 0;
  uint64_t lo = 0, hi = 0;
  bool open = false;
  for (const auto& [s, e] : spans) {
    if (open && s <= hi) {
      hi = std::max(hi, e);
      continue;
    }
    if (open) total += static_cast<double>(hi - lo);
    lo = s, hi = e, open = true;
  }
  if (open) total += static_cast<double>(hi - lo);
  return total;
}

inline nlohmann::json profile_steps(const torch::Device& device, int steps, const std::function<void()>& step,
                                    const std::function<void()>& sync, size_t top = 100000) {
  const bool cuda = device.is_cuda();
  std::set<torch::profiler::impl::ActivityType> activities{torch::profiler::impl::ActivityType::CPU};
  if (cuda) activities.insert(torch::profiler::impl::ActivityType::CUDA);
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  profiler::prepareProfiler(config, activities);
  sync();
  profiler::enableProfiler(config, activities);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  sync();
  const double wall_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  const auto result = profiler::disableProfiler();

  const auto want = cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  std::map<std::string, std::pair<double, int64_t>> by_name;  // name -> (ns, calls)
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& e : result->events()) {
    const uint64_t start = start_ns(e), length = duration_ns(e);
    if (e.deviceType() != want || length == 0) continue;
    auto& slot = by_name[e.name().substr(0, 120)];
    slot.first += static_cast<double>(length);
    ++slot.second;
    spans.emplace_back(start, start + length);
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> ops(by_name.begin(), by_name.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  const double n = std::max(steps, 1), ms = 1e-6;
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < std::min(top, ops.size()); ++i)
    list.push_back({{"name", ops[i].first},
                    {"ms", ops[i].second.first * ms / n},
                    {"calls", static_cast<double>(ops[i].second.second) / n}});
  return {{"steps", steps},
          {"wall_ms", wall_ns * ms / n},
          {"busy_ms", (cuda ? union_ns(spans) : wall_ns) * ms / n},
          {"ops", list}};
}

}  // namespace rpe::bench
