// LAMB step over whole parameter groups with _foreach kernels (equations in lamb.h).
#include "train/lamb.h"

#include <ATen/ATen.h>

#include <cmath>

namespace rpe {

void LambOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta1);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta2);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
}
void LambOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta1);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta2);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
}
void LambParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq);
}
void LambParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
}

torch::Tensor Lamb::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const LambOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, m, v;
    int64_t step = 0;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto s = std::make_unique<LambParamState>();
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(s);
      }
      auto& s = static_cast<LambParamState&>(*slot);
      s.step(s.step() + 1);
      step = s.step();  // all tensors of a group step together
      params.push_back(p);
      grads.push_back(p.grad());
      m.push_back(s.exp_avg());
      v.push_back(s.exp_avg_sq());
    }
    if (params.empty()) continue;
    const double bc1 = 1.0 - std::pow(o.beta1(), static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(o.beta2(), static_cast<double>(step));
    at::_foreach_lerp_(m, grads, 1.0 - o.beta1());          // m = b1 m + (1-b1) g
    at::_foreach_mul_(v, o.beta2());
    at::_foreach_addcmul_(v, grads, grads, 1.0 - o.beta2());  // v = b2 v + (1-b2) g^2
    auto denom = at::_foreach_div(v, bc2);
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, o.eps());                        // sqrt(v_hat) + eps
    auto update = at::_foreach_div(m, bc1);
    at::_foreach_div_(update, denom);                         // m_hat / (sqrt(v_hat) + eps)
    if (o.weight_decay() != 0.0) at::_foreach_add_(update, params, o.weight_decay());
    // Per-tensor step size -lr * trust, computed for all tensors at once on the device (no host
    // sync on CUDA): [N] norms -> [N] factors; then one scaling op per tensor, since _foreach ops
    // take per-tensor factors only as host scalars.
    const auto p_norms = torch::stack(at::_foreach_norm(params));  // [N]
    const auto r_norms = torch::stack(at::_foreach_norm(update));  // [N]
    const auto trust = torch::where(p_norms.gt(0).logical_and(r_norms.gt(0)), p_norms / r_norms, 1.0);
    const auto factors = (trust * (-o.lr())).to(update[0].scalar_type()).unbind(0);  // N x [ ]
    for (size_t i = 0; i < update.size(); ++i) update[i].mul_(factors[i]);
    at::_foreach_add_(params, update);
  }
  return loss;
}

void Lamb::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}
void Lamb::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}

}  // namespace rpe
