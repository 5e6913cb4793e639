// Activation checkpointing (train.activation_checkpointing): a piece of the model that keeps
// only its inputs for backward and runs its forward once more there, instead of keeping every
// intermediate tensor from the forward pass (Chen et al. 2016, "Training deep nets with
// sublinear memory cost"; per layer as Megatron and Hugging Face do, or the attention core
// alone as Korthikanti et al. 2022's selective recomputation).
//
// What it trades, per BERT layer: `layers` keeps the layer's [B, L, D] input alone and
// recomputes all of it (one more forward pass a step, ~1/3 more compute); `attention` keeps
// q, k and v and recomputes the attention core, the part whose tensors grow as L^2 (scores,
// probabilities, dropout masks, the relative methods' [B, H, L, L] terms and bias) and whose
// FLOPs are few at BERT's lengths.
//
// Gradients are those of the pass that made the loss: the recomputation runs with the random
// generators (CPU, and the device's) set back to where the forward pass found them, so dropout
// draws the same masks, and under the autocast state that pass ran under. Both passes run with
// autograd on, so kernels whose choice depends on it (SDPA's backends, whose dropout draws
// differ) are chosen alike; the first pass drops its graph when it returns. Parameter gradients
// accumulate in the recomputed backward (a reentrant backward: their hooks fire as usual).
#pragma once
#include <torch/torch.h>

#include <functional>
#include <string>

namespace rpe {

// What train.activation_checkpointing recomputes.
// bias: only the fused attention kernel's saved [B, H, L, L] position bias, rebuilt from q and k
// (model/saved_mask.h): the relative methods' largest saved tensor, for a few thin GEMMs.
enum class Recompute { none, attention, layers, bias };
Recompute parse_recompute(const std::string& value);  // "none" | "attention" | "layers" | "bias"
// For the build log: "each encoder layer recomputed in backward", ...; "" for none.
std::string describe_recompute(Recompute what);

// fn(inputs), keeping only `inputs` for backward, where fn is run again. Inputs may be
// undefined (fn sees them undefined) and so may outputs (returned undefined). fn must be a
// function of its inputs, the parameters it reads and the random generators alone. Where no
// input requires a gradient, or autograd is off, fn just runs (nothing would carry the
// parameters' gradients back through a recomputed piece).
using RecomputedFn = std::function<torch::autograd::variable_list(const torch::autograd::variable_list&)>;
torch::autograd::variable_list recomputed(const RecomputedFn& fn, const torch::autograd::variable_list& inputs);

}  // namespace rpe
