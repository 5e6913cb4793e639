// Mixed precision: train.precision = bf16 runs the forward pass under LibTorch autocast
// (matmuls in bfloat16, reductions/softmax/loss in fp32 per autocast's op lists) while the
// parameters, gradients and optimizer state stay fp32 ("master weights"). bf16 has fp32's
// exponent range, so no loss scaling is needed (unlike fp16).
#pragma once
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace rpe {

// Enables autocast to bf16 on `device`'s type for its lifetime when `enabled`; scoped to one
// forward pass (the backward pass replays the recorded dtypes on its own).
class AutocastGuard {
 public:
  AutocastGuard(const torch::Device& device, bool enabled) : type_(device.type()), enabled_(enabled) {
    if (!enabled_) return;
    previous_ = at::autocast::is_autocast_enabled(type_);
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();  // drop cached bf16 weight casts
    at::autocast::set_autocast_enabled(type_, previous_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  at::DeviceType type_;
  bool enabled_;
  bool previous_ = false;
};

}  // namespace rpe
