// The shared multi-head self-attention core. Position methods plug in through
// PositionTermImpl hooks only; there is no per-method branch here.
#pragma once
#include <torch/torch.h>

#include <memory>

#include "config/config.h"
#include "model/attention/position_method.h"

namespace rpe {

class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(const ModelOptions& options, std::shared_ptr<PositionTermImpl> position);

  // x: [B, L, D]; key_padding: [B, L] bool, true where the token is padding, or undefined when
  // no token is (no mask at all: SDPA may then pick FlashAttention). shared_bias: the method's
  // position-only bias for this forward ([1|B, H|1, L, L], padding possibly folded in as -inf),
  // used instead of the term's score_bias; undefined = ask the term. Returns [B, L, D].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_padding,
                        const torch::Tensor& shared_bias = {});

  // Uses scaled_dot_product_attention when the method is fusable (see PositionTermImpl).
  void set_fused(bool fused) { fused_ = fused; }
  bool fused() const { return fused_; }

  // While training with autograd on, keep only q, k, v (and the shared bias) for backward and
  // run the attention core again there (train.activation_checkpointing: attention; recompute.h).
  void set_recompute(bool on) { recompute_ = on; }
  // While training with autograd on, let the fused kernel's saved [B, H, L, L] bias go and
  // rebuild it from q and k in backward (train.activation_checkpointing: bias; saved_mask.h).
  void set_recompute_bias(bool on) { recompute_bias_ = on; }

  // When set, the next forward keeps its attention probabilities [B, H, L, L] (plain path).
  bool capture = false;
  torch::Tensor captured_probs;

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, output{nullptr};
  std::shared_ptr<PositionTermImpl> position;

 private:
  // The core, from the projections to the context: q, k, v [B, H, L, d] -> [B, H, L, d].
  torch::Tensor core(torch::Tensor q, torch::Tensor k, const torch::Tensor& v, const torch::Tensor& key_padding,
                     const torch::Tensor& shared_bias);

  // The method's bias for this layer, in q's dtype: the shared one if given, else the term's
  // score_bias of q, k (broadcastable to [B, H, L, L]; undefined = none).
  torch::Tensor layer_bias(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& shared_bias);
  // The fused path's float mask: padding ([B, 1, 1, L] -> -inf) plus layer_bias; undefined = none.
  torch::Tensor fused_mask(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& pad,
                           const torch::Tensor& shared_bias);

  int64_t heads_, head_size_;
  double dropout_p_;
  bool fused_ = false;
  bool recompute_ = false, recompute_bias_ = false;
};
TORCH_MODULE(SelfAttention);

}  // namespace rpe
