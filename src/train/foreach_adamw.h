// AdamW (Loshchilov & Hutter 2019) over whole parameter groups, two ways. LibTorch's C++ AdamW
// (no foreach/fused switch; Python's has one) runs ~7 kernels per tensor: ~1,400 launches per
// BERT-base step, as long as a step's matrix work at small batches.
//   step():          LibTorch's AdamW op for op with the _foreach kernels (one multi-tensor
//                    launch per ~100 tensors on CUDA; on CPU a per-tensor loop, bitwise AdamW's).
//   step_if(finite): the training loop's step (train/engine.h): one at::_fused_adamw_ kernel per
//                    group (AdamW to float rounding) that leaves everything as it was when the
//                    on-device flag `finite` is false (found_inf), so the host never waits for it.
//                    Its step counts live on the device (float, exact to 2^24 steps) and reach
//                    AdamWParamState::step() at sync_host_state(), which checkpoint saving calls;
//                    state loaded into AdamWParamState (a resumed checkpoint) is picked up by the
//                    next step_if. Where the device has no fused kernel (the CPU before LibTorch
//                    2.4), or with use_fused_kernel(false), step()'s _foreach update runs instead
//                    after reading the flag and counts on the host: such a device computes
//                    synchronously, so the read waits for nothing.
// The state is AdamW's own (AdamWParamState), so checkpoints load in either class. Per tensor p
// with gradient g at step t (lr, betas b1 b2, eps, weight decay wd of its group):
//   p = p (1 - lr wd)                                (decoupled weight decay, before the update)
//   m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
//   p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Tensors without a gradient are skipped (not decayed), as AdamW does; amsgrad runs AdamW's loop
// (step) or is refused (step_if; the engine then decides on the host).
#pragma once
#include <torch/optim/adamw.h>

#include <optional>
#include <unordered_map>

#include "train/device_update.h"

namespace rpe {

class ForeachAdamW : public torch::optim::AdamW, public DeviceSkippableStep {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
  // finite: [] bool on the parameters' device. Not for amsgrad.
  void step_if(const torch::Tensor& finite) override;
  // Off: step_if takes the _foreach path even where the fused kernel exists (the tests run it so).
  void use_fused_kernel(bool on) { use_fused_ = on; }
  // Copies the device step counts into the state (one host read); a no-op when in step.
  void sync_host_state() override;

 private:
  torch::optim::AdamWParamState& state_of(const torch::Tensor& p);
  std::unordered_map<c10::TensorImpl*, DeviceStepCount> device_steps_;  // per parameter
  bool host_stale_ = false;                                             // device counts ahead of the state
  bool use_fused_ = true;
  std::optional<bool> device_has_fused_;  // the parameters' device has _fused_adamw_; asked at the first step_if
};

}  // namespace rpe
