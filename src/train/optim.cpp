// Parameter groups, optimizer construction and the warmup + linear/cosine schedule.
#include "train/optim.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>
#include <string>

#include "model/attention/position_method.h"
#include "train/foreach_adamw.h"
#include "train/lamb.h"

namespace rpe {

namespace {

// Biases by role, whatever their shape: every 1-D tensor (Linear biases, LayerNorm, mlm_bias)
// and what a position method names as such (PositionTermImpl::bias_parameters: transformer_xl's
// u, v). Never decayed, under either setting. Full parameter names, as named_parameters gives them.
std::set<std::string> named_biases(torch::nn::Module& model) {
  std::set<std::string> names;
  auto add = [&](const torch::nn::Module& m, const std::string& prefix) {
    if (const auto* term = dynamic_cast<const PositionTermImpl*>(&m))
      for (const auto& name : term->bias_parameters()) names.insert(prefix + name);
  };
  add(model, "");  // by reference: the model need not be held by a shared_ptr (include_self=false below)
  for (const auto& m : model.named_modules("", /*include_self=*/false)) add(*m.value(), m.key() + ".");
  return names;
}

}  // namespace

ParamGroups split_decay_groups(torch::nn::Module& model, bool decay_position_params) {
  ParamGroups g;
  const std::set<std::string> biases = named_biases(model);
  for (const auto& p : model.named_parameters()) {
    // Every position-method parameter (tables absolute and relative, gates, projections alike)
    // is exempt unless train.decay_position_params asks for the paper's recipe, where each is
    // decayed as any other matrix (docs/training.md).
    const bool position = p.key().find("position") != std::string::npos;
    const bool is_bias = p.value().dim() < 2 || biases.count(p.key()) > 0;
    const bool decayed = !is_bias && (decay_position_params || !position);
    (decayed ? g.decay : g.no_decay).push_back(p.value());
  }
  return g;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const TrainOptions& o) {
  auto g = split_decay_groups(model, o.decay_position_params);
  auto opts = torch::optim::AdamWOptions(o.lr).betas({o.adam_beta1, o.adam_beta2}).eps(o.adam_eps);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(g.decay, std::make_unique<torch::optim::AdamWOptions>(opts.weight_decay(o.weight_decay)));
  groups.emplace_back(g.no_decay, std::make_unique<torch::optim::AdamWOptions>(opts.weight_decay(0.0)));
  return std::make_unique<ForeachAdamW>(groups, opts);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(torch::nn::Module& model, const TrainOptions& o) {
  if (o.optimizer == "adamw") return make_adamw(model, o);
  auto g = split_decay_groups(model, o.decay_position_params);
  // Layer adaptation for matrices only (lamb.h), decayed or not: the undecayed tensors of two or
  // more dimensions keep it (the position tables and projections by default; with
  // train.decay_position_params, which moves those into the decayed group, only transformer_xl's
  // u, v), the vectors (biases, LayerNorms, scalars) take the plain Adam step. Either setting
  // adapts the same tensors; only their decay differs.
  std::vector<torch::Tensor> tables, vectors;
  for (const auto& p : g.no_decay) (p.dim() >= 2 ? tables : vectors).push_back(p);
  auto opts = LambOptions(o.lr).beta1(o.adam_beta1).beta2(o.adam_beta2).eps(o.adam_eps);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto add = [&](std::vector<torch::Tensor> params, const LambOptions& group) {
    if (!params.empty()) groups.emplace_back(std::move(params), std::make_unique<LambOptions>(group));
  };
  add(g.decay, LambOptions(opts).weight_decay(o.weight_decay));
  add(tables, LambOptions(opts).weight_decay(0.0));
  add(vectors, LambOptions(opts).weight_decay(0.0).layer_adaptation(false));
  return std::make_unique<Lamb>(groups, opts);
}

double learning_rate(const TrainOptions& o, int64_t step) {
  if (o.warmup_steps > 0 && step < o.warmup_steps)
    return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  const double floor = o.lr * o.min_lr_ratio;
  const double span = static_cast<double>(std::max<int64_t>(1, o.max_steps - o.warmup_steps));
  const double done = std::clamp(static_cast<double>(step - o.warmup_steps) / span, 0.0, 1.0);
  const double remaining = o.schedule == "cosine" ? 0.5 * (1.0 + std::cos(std::numbers::pi * done)) : 1.0 - done;
  return floor + (o.lr - floor) * remaining;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace rpe
