// AdamW over whole parameter groups with _foreach kernels (equations in foreach_adamw.h).
#include "train/foreach_adamw.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace rpe {

namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

// One group's tensors with gradients, their moments, and per-tensor scalars of this step.
struct GroupStep {
  std::vector<torch::Tensor> params, grads, exp_avg, exp_avg_sq;
  std::vector<c10::Scalar> sqrt_correction2, neg_step_size;  // sqrt(1 - b2^t), -lr / (1 - b1^t)
};

}  // namespace

torch::Tensor ForeachAdamW::step(LossClosure closure) {
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
    const auto [beta1, beta2] = o.betas();
    GroupStep s;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "AdamW does not support sparse gradients");
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {  // AdamW's lazy initialisation: step 0, zero moments
        auto fresh = std::make_unique<AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& st = static_cast<AdamWParamState&>(*slot);
      st.step(st.step() + 1);
      s.params.push_back(p);
      s.grads.push_back(p.grad());
      s.exp_avg.push_back(st.exp_avg());
      s.exp_avg_sq.push_back(st.exp_avg_sq());
      s.sqrt_correction2.emplace_back(std::sqrt(1 - std::pow(beta2, st.step())));
      s.neg_step_size.emplace_back(-(o.lr() / (1 - std::pow(beta1, st.step()))));
    }
    if (s.params.empty()) continue;
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
  return loss;
}

}  // namespace rpe
