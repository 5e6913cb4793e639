// An optimizer whose step the device can apply or skip on its own: the engine's non-finite
// guard (train/engine.h) hands it the step's on-device flag and never waits for it.
// ForeachAdamW (train/foreach_adamw.h) and Lamb (train/lamb.h) implement it.
#pragma once
#include <torch/torch.h>

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

}  // namespace rpe
