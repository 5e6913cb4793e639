// Whole-model gradient operations of the training step, on the device and without host reads
// (except all_finite): the engine's norm, clipping and the check before saving weights.
#pragma once
#include <torch/torch.h>

#include <vector>

namespace rpe {

// The gradients of `params` that exist (a parameter outside the graph has none).
std::vector<torch::Tensor> defined_grads(const std::vector<torch::Tensor>& params);
// L2 norm of all gradients together (0-dim float32, on their device): per-tensor norms with
// _foreach_norm, stacked, one more norm; no host read.
torch::Tensor global_grad_norm(const std::vector<torch::Tensor>& params);
// Scales the gradients by min(1, max_norm / (norm + 1e-6)) on the device (clip_grad_norm_'s
// rule, without its host read of the norm).
void clip_gradients(const std::vector<torch::Tensor>& params, const torch::Tensor& norm, double max_norm);
// True when every parameter is finite (one host read).
bool all_finite(const std::vector<torch::Tensor>& params);

}  // namespace rpe
