// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning", Algorithm 2), the
// layer-wise adaptive optimizer used for large-batch BERT pretraining. Per parameter tensor p
// with gradient g at step t (bias-corrected Adam moments, decoupled weight decay):
//   m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
//   r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * p
//   trust = ||p|| / ||r||  (1 when either norm is 0; always 1 in a group without layer_adaptation)
//   p = p - lr * trust * r
// The training loop's groups (make_optimizer) adapt the matrices only: biases, LayerNorm and
// other vectors take the plain Adam step, as the reference implementations for BERT do (TF's
// exclude_from_layer_adaptation defaults to the no-decay list; apex's FusedLAMB adapts only
// decayed tensors unless use_nvlamb): a vector's norm says little about its scale (a LayerNorm
// bias starts at 0, where the ratio would be 1 anyway, then grows by lr * ||r|| steps).
// The step runs on whole parameter lists with LibTorch's _foreach kernels (one fused launch per
// op on CUDA; a loop on CPU) and computes every tensor's trust ratio in one [N] vector; only the
// scaling of each update by its ratio is one op per tensor (_foreach ops take per-tensor factors
// only as host scalars, and reading them would sync the host every step).
// step_if(finite), the training loop's step, is the same update with the step count t on the
// device and every change multiplied by the on-device flag (m += f (1-b1)(g - m), v likewise,
// p += f * step), the gradients of a skipped step zeroed first: a skipped step leaves weights,
// moments and t exactly as they were, and the host never waits. A group's tensors step together.
#pragma once
#include <torch/optim/optimizer.h>
#include <torch/optim/serialize.h>

#include <vector>

#include "train/device_update.h"

namespace rpe {

struct LambOptions : public torch::optim::OptimizerCloneableOptions<LambOptions> {
  LambOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0.01;
  TORCH_ARG(bool, layer_adaptation) = true;  // scale by the trust ratio (false: trust = 1)

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LambParamState : public torch::optim::OptimizerCloneableParamState<LambParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(torch::Tensor, exp_avg);     // m, shape of the parameter
  TORCH_ARG(torch::Tensor, exp_avg_sq);  // v, shape of the parameter

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

class Lamb : public torch::optim::Optimizer, public DeviceSkippableStep {
 public:
  explicit Lamb(const std::vector<torch::optim::OptimizerParamGroup>& groups, LambOptions defaults = {})
      : Optimizer(groups, std::make_unique<LambOptions>(defaults)) {}
  explicit Lamb(std::vector<torch::Tensor> params, LambOptions defaults = {})
      : Lamb({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;
  void step_if(const torch::Tensor& finite) override;
  void sync_host_state() override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  struct GroupTensors {  // one group's tensors that have gradients, and their moments
    std::vector<torch::Tensor> params, grads, m, v;
  };
  GroupTensors collect(torch::optim::OptimizerParamGroup& group);  // creates missing state
  LambParamState& state_of(const torch::Tensor& p);
  std::vector<DeviceStepCount> device_steps_;  // by group index (a group's tensors step together)
  bool host_stale_ = false;                    // device counts ahead of the state
};

}  // namespace rpe
