// Autocast for one scope: the guard every forward pass runs under (train/precision.h says what
// train.precision means by it) and encoder layers recomputed in backward re-enter
// (model/recompute.h), on whichever thread runs them.
#pragma once
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <string>

#include "util/torch_compat.h"

namespace rpe {

// The autocast type of a train.precision value: kBFloat16, kHalf, or kFloat for fp32 (no autocast).
inline at::ScalarType autocast_dtype(const std::string& precision) {
  if (precision == "bf16") return at::kBFloat16;
  if (precision == "fp16") return at::kHalf;
  return at::kFloat;
}

// Enables autocast to `dtype` on `device`'s type for its lifetime (kFloat: does nothing);
// scoped to one forward pass (the backward pass replays the recorded dtypes on its own).
class AutocastGuard {
 public:
  AutocastGuard(const torch::Device& device, at::ScalarType dtype)
      : type_(device.type()), enabled_(dtype != at::kFloat) {
    if (!enabled_) return;
    previous_ = compat::autocast_enabled(type_);
    previous_dtype_ = compat::get_autocast_dtype(type_);
    compat::set_autocast(type_, true, dtype);
    at::autocast::increment_nesting();
  }
  // train.precision's autocast (see autocast_dtype).
  AutocastGuard(const torch::Device& device, const std::string& precision)
      : AutocastGuard(device, autocast_dtype(precision)) {}
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();  // drop cached half weight casts
    compat::set_autocast(type_, previous_, previous_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  at::DeviceType type_;
  bool enabled_;
  bool previous_ = false;
  at::ScalarType previous_dtype_ = at::kBFloat16;
};

}  // namespace rpe
