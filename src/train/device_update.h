// An optimizer whose step the device can apply or skip on its own: the engine's non-finite
// guard (train/engine.h) hands it the step's on-device flag and never waits for it.
// ForeachAdamW (train/foreach_adamw.h) and Lamb (train/lamb.h) implement it.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "util/torch_compat.h"

namespace rpe {

class DeviceSkippableStep {
 public:
  virtual ~DeviceSkippableStep() = default;
  // finite: [] bool on the parameters' device. True: one optimizer step; false: weights, moments
  // and step counts stay exactly as they were. Step counts live on the device meanwhile.
  virtual void step_if(const torch::Tensor& finite) = 0;
  // Copies the device step counts into the optimizer's state (one host read), before the
  // state is saved; a no-op when nothing changed since the last call.
  virtual void sync_host_state() = 0;
};

// A step count kept on the device (float32: exact to 2^24 steps) for such an optimizer, beside
// the optimizer state's step it was made from or last synced to.
struct DeviceStepCount {
  torch::Tensor count;    // [] float32 on the parameters' device
  int64_t host_step = 0;  // the state's step when `count` was made or last synced
  // The count for a state now at step `host`: (re)made, on `like`'s device, when never made or
  // when the state changed behind its back (a checkpoint loaded) while the device was not ahead.
  torch::Tensor& for_state(int64_t host, const torch::Tensor& like, bool device_ahead) {
    if (!count.defined() || (!device_ahead && host_step != host)) {
      count = torch::full({}, static_cast<double>(host), like.options().dtype(torch::kFloat));
      host_step = host;
    }
    return count;
  }
};

// Brings every count's value into its host_step with one device -> host copy.
inline void read_step_counts(const std::vector<DeviceStepCount*>& counts) {
  if (counts.empty()) return;
  std::vector<torch::Tensor> values;
  for (const auto* c : counts) values.push_back(c->count);
  const auto host = torch::stack(values).to(torch::kCPU, torch::kDouble).contiguous();  // the one host read
  const double* v = compat::const_data_ptr<double>(host);
  for (size_t i = 0; i < counts.size(); ++i) counts[i]->host_step = std::llround(v[i]);
}

}  // namespace rpe
