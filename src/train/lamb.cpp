// LAMB step over whole parameter groups with _foreach kernels (equations in lamb.h).
#include "train/lamb.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "util/torch_compat.h"

namespace rpe {

void LambOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta1);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, beta2);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, layer_adaptation);
}
void LambOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta1);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta2);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(layer_adaptation);
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

namespace {

// p += -lr * trust * update per tensor, trust = ||p|| / ||update|| (1 when either is 0), computed
// for all tensors at once on the device ([N] norms -> [N] factors); then one scaling op per
// tensor, since _foreach ops take per-tensor factors only as host scalars. `keep` ([] bool,
// optional): where false every factor is exactly 0 (a skipped step), whatever the ratio.
// Without layer adaptation (trust = 1) one factor serves all tensors: no norms, no per-tensor op.
void apply_trust_scaled(std::vector<torch::Tensor>& params, std::vector<torch::Tensor>& update, double lr,
                        const torch::Tensor& keep, bool adapt) {
  if (!adapt) {
    if (keep.defined()) at::_foreach_mul_(update, torch::where(keep, -lr, 0.0).to(update[0].scalar_type()));
    else at::_foreach_mul_(update, -lr);
    at::_foreach_add_(params, update);
    return;
  }
  const auto p_norms = torch::stack(at::_foreach_norm(params));  // [N]
  const auto r_norms = torch::stack(at::_foreach_norm(update));  // [N]
  const auto trust = torch::where(p_norms.gt(0).logical_and(r_norms.gt(0)), p_norms / r_norms, 1.0);
  auto factor = trust * (-lr);
  if (keep.defined()) factor = torch::where(keep, factor, 0.0);
  const auto factors = factor.to(update[0].scalar_type()).unbind(0);  // N x [ ]
  for (size_t i = 0; i < update.size(); ++i) update[i].mul_(factors[i]);
  at::_foreach_add_(params, update);
}

}  // namespace

LambParamState& Lamb::state_of(const torch::Tensor& p) {
  auto& slot = state_[compat::optimizer_state_key(p)];
  if (!slot) {
    auto s = std::make_unique<LambParamState>();
    s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    slot = std::move(s);
  }
  return static_cast<LambParamState&>(*slot);
}

Lamb::GroupTensors Lamb::collect(torch::optim::OptimizerParamGroup& group) {
  GroupTensors g;
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto& s = state_of(p);
    g.params.push_back(p);
    g.grads.push_back(p.grad());
    g.m.push_back(s.exp_avg());
    g.v.push_back(s.exp_avg_sq());
  }
  return g;
}

torch::Tensor Lamb::step(LossClosure closure) {
  sync_host_state();  // after step_if: the counts this step reads and advances
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const LambOptions&>(group.options());
    auto g = collect(group);
    if (g.params.empty()) continue;
    int64_t step = 0;
    for (const auto& p : g.params) {
      auto& s = state_of(p);
      s.step(s.step() + 1);
      step = s.step();  // all tensors of a group step together
    }
    const double bc1 = 1.0 - std::pow(o.beta1(), static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(o.beta2(), static_cast<double>(step));
    at::_foreach_lerp_(g.m, g.grads, 1.0 - o.beta1());            // m = b1 m + (1-b1) g
    at::_foreach_mul_(g.v, o.beta2());
    at::_foreach_addcmul_(g.v, g.grads, g.grads, 1.0 - o.beta2());  // v = b2 v + (1-b2) g^2
    auto denom = at::_foreach_div(g.v, bc2);
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, o.eps());                              // sqrt(v_hat) + eps
    auto update = at::_foreach_div(g.m, bc1);
    at::_foreach_div_(update, denom);                               // m_hat / (sqrt(v_hat) + eps)
    if (o.weight_decay() != 0.0) at::_foreach_add_(update, g.params, o.weight_decay());
    apply_trust_scaled(g.params, update, o.lr(), torch::Tensor(), o.layer_adaptation());
  }
  return loss;
}

void Lamb::step_if(const torch::Tensor& finite) {
  torch::NoGradGuard no_grad;
  const auto keep = finite.to(torch::kFloat);  // [] 1 = apply, 0 = leave everything as it is
  const auto skip = finite.logical_not();
  for (size_t i = 0; i < param_groups_.size(); ++i) {
    const auto& o = static_cast<const LambOptions&>(param_groups_[i].options());
    auto g = collect(param_groups_[i]);
    if (g.params.empty()) continue;
    if (device_steps_.size() <= i) device_steps_.resize(i + 1);
    auto& t = device_steps_[i].for_state(state_of(g.params.front()).step(), g.params.front(), host_stale_);
    t.add_(keep);                                // t += finite, before the update that uses it
    const auto t1 = t.clamp_min(1.0);            // a skipped first step: no 1 - b^0 = 0 to divide by
    const auto bc1 = 1.0 - torch::pow(o.beta1(), t1), bc2 = 1.0 - torch::pow(o.beta2(), t1);  // [] float32
    // A skipped step's gradients may be NaN/inf: zeroed, so the updates below, multiplied by 0,
    // are exact no-ops (0 * NaN would be NaN).
    for (auto& grad : g.grads) grad.masked_fill_(skip, 0.0);
    auto dm = at::_foreach_sub(g.grads, g.m);    // m += f (1-b1) (g - m)
    at::_foreach_mul_(dm, keep * (1.0 - o.beta1()));
    at::_foreach_add_(g.m, dm);
    auto dv = at::_foreach_mul(g.grads, g.grads);  // v += f (1-b2) (g^2 - v)
    at::_foreach_sub_(dv, g.v);
    at::_foreach_mul_(dv, keep * (1.0 - o.beta2()));
    at::_foreach_add_(g.v, dv);
    auto denom = at::_foreach_div(g.v, bc2);
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, o.eps());
    auto update = at::_foreach_div(g.m, bc1);
    at::_foreach_div_(update, denom);
    if (o.weight_decay() != 0.0) at::_foreach_add_(update, g.params, o.weight_decay());
    apply_trust_scaled(g.params, update, o.lr(), finite, o.layer_adaptation());
  }
  host_stale_ = true;
}

void Lamb::sync_host_state() {
  if (!host_stale_) return;
  host_stale_ = false;
  std::vector<DeviceStepCount*> counts;
  for (auto& d : device_steps_)
    if (d.count.defined()) counts.push_back(&d);
  read_step_counts(counts);
  for (size_t i = 0; i < device_steps_.size(); ++i) {
    if (!device_steps_[i].count.defined()) continue;
    for (const auto& p : param_groups_[i].params())
      if (auto it = state_.find(compat::optimizer_state_key(p)); it != state_.end())
        static_cast<LambParamState&>(*it->second).step(device_steps_[i].host_step);
  }
}

void Lamb::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}
void Lamb::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<LambParamState, LambOptions>(archive, *this);
}

}  // namespace rpe
