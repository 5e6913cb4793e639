// Dynamic loss scaling (see loss_scaler.h).
#include "train/loss_scaler.h"

#include <algorithm>

namespace rpe {

LossScaler::LossScaler(const TrainOptions& t, const torch::Device& device)
    : enabled_(t.precision == "fp16"), window_(t.fp16_scale_window) {
  const auto f32 = torch::TensorOptions(torch::kFloat).device(device);
  scale_ = torch::full({}, enabled_ ? t.fp16_init_scale : 1.0, f32);
  streak_ = torch::zeros({}, f32.dtype(torch::kInt));
}

torch::Tensor LossScaler::scaled(const torch::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;  // float32 at least (an fp16 loss times 2^16 would overflow)
}

torch::Tensor LossScaler::unscale_(const std::vector<torch::Tensor>& grads) const {
  if (!enabled_) return {};  // nothing launched in fp32/bf16
  auto found_inf = torch::zeros({}, scale_.options());
  if (grads.empty()) return found_inf;
  // The kernel wants 1-element tensors for the flag and 1/S; grads are fp32 on one device.
  auto flag = found_inf.view({1});
  at::_amp_foreach_non_finite_check_and_unscale_(grads, flag, scale_.reciprocal().view({1}));
  return found_inf;
}

void LossScaler::update(const torch::Tensor& found_inf) {
  if (!enabled_ || !found_inf.defined()) return;
  auto s = scale_.view({1}), streak = streak_.view({1});  // views: updated in place
  at::_amp_update_scale_(s, streak, found_inf.view({1}), kGrowth, kBackoff, window_);
}

torch::Tensor LossScaler::snapshot() const {
  return torch::stack({scale_.to(torch::kDouble), streak_.to(torch::kDouble)});
}

void LossScaler::restore(const torch::Tensor& snapshot) {
  scale_.copy_(snapshot[0]);
  streak_.copy_(snapshot[1]);
}

void LossScaler::save(TrainState& state) const {
  if (!enabled_) {  // a bf16 run resumed from an fp16 checkpoint keeps no stale scale
    state.loss_scale = 0.0;
    state.loss_scale_streak = 0;
    return;
  }
  const auto host = snapshot().cpu();  // one read
  state.loss_scale = host[0].item<double>();
  state.loss_scale_streak = static_cast<int64_t>(host[1].item<double>());
}

void LossScaler::load(const TrainState& state) {
  if (!enabled_ || !(state.loss_scale > 0.0)) return;
  scale_.fill_(state.loss_scale);
  // The rule doubles S when the streak reaches the window exactly: a streak saved under a longer
  // window than this run's would never reach it.
  streak_.fill_(std::clamp<int64_t>(state.loss_scale_streak, 0, window_ - 1));
}

}  // namespace rpe
