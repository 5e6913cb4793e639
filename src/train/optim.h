// Optimizers and learning-rate schedules. AdamW (Loshchilov & Hutter 2019) or LAMB (You et
// al. 2019, train/lamb.h), both with weight decay on weight matrices only (not on biases or
// LayerNorm, nor, unless train.decay_position_params, on the position methods' parameters).
// Schedule: linear warmup to the peak lr over warmup_steps, then decay to lr * min_lr_ratio at
// max_steps, linearly (BERT's schedule) or along a cosine:
//   warmup:  lr(s) = peak * (s + 1) / warmup
//   linear:  lr(s) = floor + (peak - floor) * (T - s) / (T - warmup)
//   cosine:  lr(s) = floor + (peak - floor) * (1 + cos(pi * (s - warmup) / (T - warmup))) / 2
// The schedule is a pure function of the step, so the step alone restores it on resume.
#pragma once
#include <torch/torch.h>

#include <memory>

#include "config/config.h"

namespace rpe {

// Two parameter groups: decayed and not decayed. Never decayed: 1-D tensors (biases, LayerNorm,
// mlm_bias) and those a position method names as biases (PositionTermImpl::bias_parameters:
// transformer_xl's u, v, of shape [H, 1, d]). Decayed: every other tensor
// (matrices, embeddings) whose name has no "position"; the position methods' tensors (named
// "position": tables absolute and relative, gates, projections; docs/training.md lists them
// per method) only with decay_position_params.
struct ParamGroups {
  std::vector<torch::Tensor> decay, no_decay;
};
ParamGroups split_decay_groups(torch::nn::Module& model, bool decay_position_params);

// The optimizer named by options.optimizer (adamw | lamb) over
// split_decay_groups(model, options.decay_position_params).
// Both step whole parameter groups with the _foreach kernels (AdamW: train/foreach_adamw.h,
// LibTorch's AdamW op for op; LAMB: train/lamb.h).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(torch::nn::Module& model, const TrainOptions& options);
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const TrainOptions& options);

// lr at optimizer step `step` (0-based), per the equations above.
double learning_rate(const TrainOptions& options, int64_t step);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace rpe
