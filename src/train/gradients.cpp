// Whole-model gradient operations (see gradients.h).
#include "train/gradients.h"

namespace rpe {

std::vector<torch::Tensor> defined_grads(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

torch::Tensor global_grad_norm(const std::vector<torch::Tensor>& params) {
  const auto grads = defined_grads(params);
  if (grads.empty()) {  // on the parameters' device, where the step's other statistics are
    return torch::zeros({}, torch::TensorOptions(torch::kFloat).device(params.empty() ? torch::Device(torch::kCPU)
                                                                                       : params.front().device()));
  }
  auto norms = at::_foreach_norm(grads, 2);               // one [ ] per tensor
  return torch::stack(norms).to(torch::kFloat).norm();   // [ ] = sqrt(sum of squares)
}

void clip_gradients(const std::vector<torch::Tensor>& params, const torch::Tensor& norm, double max_norm) {
  const auto grads = defined_grads(params);
  if (grads.empty()) return;
  // clamp to 1: no scaling below max_norm (multiplying by exactly 1 changes nothing)
  const auto coef = (max_norm / (norm + 1e-6)).clamp_max(1.0);  // [ ] float32
  at::_foreach_mul_(grads, coef);
}

bool all_finite(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flags;
  for (const auto& p : params) flags.push_back(torch::isfinite(p).all());
  return flags.empty() || torch::stack(flags).all().item<bool>();
}

}  // namespace rpe
