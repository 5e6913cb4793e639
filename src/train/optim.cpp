// AdamW parameter groups and the warmup + linear decay schedule.
#include "train/optim.h"

namespace rpe {

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const TrainOptions& o) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : model.named_parameters()) {
    const bool is_matrix = p.value().dim() >= 2;
    const bool position = p.key().find("position") != std::string::npos;  // relative tables, absolute table
    (is_matrix && !position ? decay : no_decay).push_back(p.value());
  }
  auto opts = torch::optim::AdamWOptions(o.lr).betas({o.adam_beta1, o.adam_beta2}).eps(o.adam_eps);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(opts.weight_decay(o.weight_decay)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(opts.weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(groups, opts);
}

double learning_rate(const TrainOptions& o, int64_t step) {
  const double s = static_cast<double>(step + 1);
  if (o.warmup_steps > 0 && step < o.warmup_steps) return o.lr * s / static_cast<double>(o.warmup_steps);
  const double rest = static_cast<double>(std::max<int64_t>(1, o.max_steps - o.warmup_steps));
  return o.lr * std::max(0.0, static_cast<double>(o.max_steps - step) / rest);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

}  // namespace rpe
