// train.activation_checkpointing: bias — the attention mask that a fused SDPA kernel keeps for
// its backward, rebuilt there instead of kept.
//
// SDPA's fused kernels (CUDA's memory-efficient and cuDNN ones, the CPU's flash kernel) save
// their float mask for backward, where they read it again to recompute the probabilities. For
// the relative methods (Shaw, Transformer-XL, m4, DeBERTa) that mask is the [B, H, L, L] position
// bias, the largest tensor a layer keeps: 201 MB a layer for BERT-base in bf16 at B = 32, L = 512,
// 2.4 GB over 12 layers, nearly all that m4 keeps beyond what absolute keeps. The bias is cheap
// to make again from q and k (two thin GEMMs and a layout), which the kernel keeps anyway.
//
// How: the SDPA node's saved mask gets a pair of saved-tensor hooks (SavedVariable::register_hooks,
// what torch.autograd.graph.saved_tensors_hooks does from Python): the pack hook lets the tensor
// go after the forward, the unpack hook makes it again, from a recipe, when the backward asks.
// The mask's own gradient (to q, k and the position tables) flows through the graph that built
// it in the forward, which this leaves alone: only the node's copy of the values goes.
#pragma once
#include <torch/torch.h>

#include <functional>

namespace rpe {

// `context`: what torch's scaled_dot_product_attention returned for a float `mask`; `rebuild`:
// makes that mask again, equal to the bit, when backward needs it (it runs with autograd off,
// under the autocast state of this call, on the backward's thread). Returns whether the node's
// saved mask will be rebuilt: false when autograd recorded no SDPA node that keeps a mask (SDPA's
// math path keeps the probabilities instead; a LibTorch before 2.11, whose generated node types
// this was not checked against, is not looked into) or the node keeps a tensor other than `mask`
// itself (SDPA padded a length that is no multiple of 8 into a copy, or broadcast a small mask):
// then it keeps it as before.
bool rebuild_mask_in_backward(const torch::Tensor& context, const torch::Tensor& mask,
                              std::function<torch::Tensor()> rebuild);

}  // namespace rpe
