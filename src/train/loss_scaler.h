// Dynamic loss scaling for train.precision = fp16 (Micikevicius et al. 2018, the rule of
// torch.amp.GradScaler). fp16's smallest normal is 6e-5: most activation gradients of a BERT
// would underflow, so the backward pass runs on loss * S, and the fp32 gradients are divided by
// S before clipping and the update. S starts at train.fp16_init_scale; a step whose gradients
// overflow (inf/NaN) is skipped and halves S; train.fp16_scale_window overflow-free steps in a
// row double it. Powers of two keep scaling and unscaling exact.
//
// Everything stays on the device: S [] float32, the overflow-free streak [] int32, the overflow
// flag [] float32; ATen's fused amp kernels unscale every gradient and test it in one launch
// and update S in another. Every rank holds the same all-reduced gradients, hence the same
// flag and S, with no communication of its own.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "config/config.h"
#include "train/checkpoint.h"

namespace rpe {

class LossScaler {
 public:
  // Enabled iff t.precision is fp16; otherwise every call below is a no-op passthrough.
  LossScaler(const TrainOptions& t, const torch::Device& device);
  bool enabled() const { return enabled_; }
  // The loss to differentiate: loss * S ([], float32 or wider).
  torch::Tensor scaled(const torch::Tensor& loss) const;
  // grads <- grads / S in place; returns [] float32, 1 if any gradient holds an inf or NaN
  // (the division leaves them non-finite), else 0. Disabled: undefined, nothing launched.
  torch::Tensor unscale_(const std::vector<torch::Tensor>& grads) const;
  // After a step: found_inf = 1 halves S and restarts the streak; otherwise the streak grows
  // and S doubles when it reaches the window. Undefined found_inf: nothing.
  void update(const torch::Tensor& found_inf);
  // [] float32, on the device.
  const torch::Tensor& scale() const { return scale_; }
  // [2] float64 on the device: (S, streak) now, for a step settled later (no host read);
  // restore() puts them back (a run that stops as it was after that step).
  torch::Tensor snapshot() const;
  void restore(const torch::Tensor& snapshot);
  // Checkpoints: S and the streak into/from TrainState (one host read; at save only; 0 and 0
  // when disabled). A state without a saved scale (another precision, an older checkpoint)
  // keeps the initial scale; a streak at or past this run's window restarts one step short of it.
  void save(TrainState& state) const;
  void load(const TrainState& state);

 private:
  static constexpr double kGrowth = 2.0, kBackoff = 0.5;  // powers of two: S stays one
  bool enabled_ = false;
  int64_t window_ = 2000;
  torch::Tensor scale_;   // [] float32
  torch::Tensor streak_;  // [] int32: steps since the last overflow (GradScaler's growth tracker)
};

}  // namespace rpe
