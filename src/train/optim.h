// Optimizer and learning-rate schedule. AdamW (Loshchilov & Hutter 2019) with weight
// decay on weight matrices only (not on biases, LayerNorm or position tables), linear
// warmup then linear decay to 0 (BERT's schedule).
#pragma once
#include <torch/torch.h>

#include <memory>

#include "config/config.h"

namespace rpe {

// Two parameter groups: decayed (matrices, embeddings) and not decayed (1-D tensors).
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const TrainOptions& options);

// lr at optimizer step `step` (0-based): peak * step/warmup during warmup, then linear to 0.
double learning_rate(const TrainOptions& options, int64_t step);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace rpe
