// AdamW over whole parameter groups with _foreach kernels (equations in foreach_adamw.h).
#include "train/foreach_adamw.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "util/torch_compat.h"

namespace rpe {

namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

// One group's tensors with gradients, their moments, and per-tensor scalars of this step.
struct GroupStep {
  std::vector<torch::Tensor> params, grads, exp_avg, exp_avg_sq;
  std::vector<c10::Scalar> sqrt_correction2, neg_step_size;  // sqrt(1 - b2^t), -lr / (1 - b1^t)

  void add_scalars(const AdamWOptions& o, double t) {
    const auto [beta1, beta2] = o.betas();
    sqrt_correction2.emplace_back(std::sqrt(1 - std::pow(beta2, t)));
    neg_step_size.emplace_back(-(o.lr() / (1 - std::pow(beta1, t))));
  }
};

// AdamW's update (equations in foreach_adamw.h), op for op as LibTorch's AdamW, one _foreach
// kernel per op.
void update(GroupStep& s, const AdamWOptions& o) {
  const auto [beta1, beta2] = o.betas();
  if (o.weight_decay() != 0) at::_foreach_mul_(s.params, 1 - o.lr() * o.weight_decay());
  at::_foreach_mul_(s.exp_avg, beta1);
  at::_foreach_add_(s.exp_avg, s.grads, 1 - beta1);
  at::_foreach_mul_(s.exp_avg_sq, beta2);
  at::_foreach_addcmul_(s.exp_avg_sq, s.grads, s.grads, 1 - beta2);
  auto denom = at::_foreach_sqrt(s.exp_avg_sq);
  at::_foreach_div_(denom, s.sqrt_correction2);
  at::_foreach_add_(denom, o.eps());
  at::_foreach_addcdiv_(s.params, s.exp_avg, denom, s.neg_step_size);
}

}  // namespace

// AdamW's lazy initialisation: step 0, zero moments.
AdamWParamState& ForeachAdamW::state_of(const torch::Tensor& p) {
  auto& slot = state_[compat::optimizer_state_key(p)];
  if (!slot) {
    auto fresh = std::make_unique<AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    slot = std::move(fresh);
  }
  return static_cast<AdamWParamState&>(*slot);
}

torch::Tensor ForeachAdamW::step(LossClosure closure) {
  sync_host_state();  // after step_if: the counts this loop reads and advances
  for (const auto& group : param_groups_)
    if (static_cast<const AdamWOptions&>(group.options()).amsgrad()) return AdamW::step(closure);
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    GroupStep s;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "AdamW does not support sparse gradients");
      auto& st = state_of(p);
      st.step(st.step() + 1);
      s.params.push_back(p);
      s.grads.push_back(p.grad());
      s.exp_avg.push_back(st.exp_avg());
      s.exp_avg_sq.push_back(st.exp_avg_sq());
      s.add_scalars(o, static_cast<double>(st.step()));
    }
    if (!s.params.empty()) update(s, o);
  }
  return loss;
}

void ForeachAdamW::step_if(const torch::Tensor& finite) {
  torch::NoGradGuard no_grad;
  const auto found_inf = finite.logical_not().to(torch::kFloat);  // [] 1 = leave everything as it is
  const auto advance = finite.to(torch::kFloat);                  // [] 1 = count this step
  // The fused kernel where the device has one (asked once); else the host reads the flag (see the header).
  if (!device_has_fused_) device_has_fused_ = compat::has_kernel("aten::_fused_adamw_", finite.device());
  const bool fused = use_fused_ && *device_has_fused_;
  const bool take = fused || finite.item<bool>();
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    TORCH_CHECK(!o.amsgrad(), "ForeachAdamW::step_if: amsgrad is not supported");
    const auto [beta1, beta2] = o.betas();
    GroupStep s;
    std::vector<torch::Tensor> steps;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& st = state_of(p);
      s.params.push_back(p);
      s.grads.push_back(p.grad());
      s.exp_avg.push_back(st.exp_avg());
      s.exp_avg_sq.push_back(st.exp_avg_sq());
      steps.push_back(device_steps_[p.unsafeGetTensorImpl()].for_state(st.step(), p, host_stale_));
    }
    if (s.params.empty()) continue;
    at::_foreach_add_(steps, advance);  // t += finite, before the update that uses t
    if (fused) {
      at::_fused_adamw_(s.params, s.grads, s.exp_avg, s.exp_avg_sq, {}, steps, o.lr(), beta1, beta2,
                        o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/{},
                        found_inf);
    } else if (take) {
      for (const auto& t : steps) s.add_scalars(o, t.item<double>());
      update(s, o);
    }
  }
  host_stale_ = true;
}

void ForeachAdamW::sync_host_state() {
  if (!host_stale_) return;
  host_stale_ = false;
  std::vector<DeviceStepCount*> counts;
  for (auto& [key, d] : device_steps_) counts.push_back(&d);
  read_step_counts(counts);
  for (auto& [key, d] : device_steps_)
    if (auto it = state_.find(compat::optimizer_state_key(key)); it != state_.end())
      static_cast<AdamWParamState&>(*it->second).step(d.host_step);
}

}  // namespace rpe
