// Multi-head self-attention with position hooks (see position_method.h for the equation).
#include "model/attention/self_attention.h"

#include <limits>
#include <mutex>
#include <tuple>

#include "model/attention/probabilities.h"
#include "model/recompute.h"
#include "model/saved_mask.h"
#include "util/log.h"
#include "util/torch_compat.h"

namespace rpe {
namespace {

// train.activation_checkpointing: bias where it has nothing to rebuild, said once a process for
// each reason (the same holds for every layer and step).
enum class IdleBias { no_own_bias, copied_mask, unfused, count };
void warn_bias_mode_saves_nothing(IdleBias why) {
  static std::once_flag once[static_cast<int>(IdleBias::count)];
  std::call_once(once[static_cast<int>(why)], [why] {
    const char* reason =
        why == IdleBias::no_own_bias ? "this method keeps no [B, H, L, L] bias of a layer's own in its fused attention"
        : why == IdleBias::unfused   ? "the attention runs unfused here (m1-m3, shaw_values, or backend plain)"
        : RPE_TORCH_BEFORE(11)       ? "this LibTorch is older than 2.11, whose autograd nodes it reads"
                                     : "SDPA keeps a copy of its own of the mask (a length that is no multiple of 8, "
                                       "or its math kernel)";
    log::warn("model", "train.activation_checkpointing bias: {}: no memory saved", reason);
  });
}

}  // namespace

SelfAttentionImpl::SelfAttentionImpl(const ModelOptions& o, std::shared_ptr<PositionTermImpl> pos)
    : position(std::move(pos)), heads_(o.heads), head_size_(o.hidden / o.heads), dropout_p_(o.attention_dropout) {
  query = register_module("query", torch::nn::Linear(o.hidden, o.hidden));
  key = register_module("key", torch::nn::Linear(o.hidden, o.hidden));
  value = register_module("value", torch::nn::Linear(o.hidden, o.hidden));
  output = register_module("output", torch::nn::Linear(o.hidden, o.hidden));
  register_module("position", position);
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& key_padding,
                                         const torch::Tensor& shared_bias) {
  const int64_t B = x.size(0), L = x.size(1);
  auto split = [&](const torch::Tensor& t) { return t.view({B, L, heads_, head_size_}).transpose(1, 2); };
  // One GEMM for q, k and v against the three weights stacked ([3D, D]): x is read (and, under
  // autocast, cast to bf16) once instead of three times, and backward's three input-gradient
  // GEMMs and their two sums become one GEMM. The parameters stay three (checkpoints, HF names).
  const auto qkv = torch::linear(x, torch::cat({query->weight, key->weight, value->weight}),
                                 torch::cat({query->bias, key->bias, value->bias}))
                       .chunk(3, -1);  // 3 x [B, L, D], views with row stride 3D
  auto q = split(qkv[0]);             // [B, H, L, d]
  auto k = split(qkv[1]);             // [B, H, L, d]
  auto v = split(qkv[2]);             // [B, H, L, d]
  torch::Tensor context;              // [B, H, L, d]
  if (recompute_ && is_training()) {
    // The graph holds the module (a shared pointer) until its backward has run.
    auto self = std::static_pointer_cast<SelfAttentionImpl>(shared_from_this());
    context = recomputed([self, key_padding](const torch::autograd::variable_list& in) -> torch::autograd::variable_list {
                // Replayed in backward as it ran: in training mode (its dropout), which nothing may switch off between.
                TORCH_CHECK(self->is_training(), "recomputed attention: the model left training mode before its backward");
                return {self->core(in[0], in[1], in[2], key_padding, in[3])};
              },
              {q, k, v, shared_bias})[0];
  } else {
    context = core(q, k, v, key_padding, shared_bias);
  }
  return output->forward(context.transpose(1, 2).reshape({B, L, heads_ * head_size_}));
}

torch::Tensor SelfAttentionImpl::core(torch::Tensor q, torch::Tensor k, const torch::Tensor& v,
                                      const torch::Tensor& key_padding, const torch::Tensor& shared_bias) {
  const int64_t B = q.size(0), L = q.size(2);
  position->transform_qk(q, k);
  const double scale = position->scale(head_size_);
  const double p = is_training() ? dropout_p_ : 0.0;
  const auto inf = std::numeric_limits<float>::infinity();
  torch::Tensor pad;  // [B, 1, 1, L], broadcast over heads and queries; undefined = no padding
  if (key_padding.defined()) pad = key_padding.view({B, 1, 1, L});
  torch::Tensor context;  // [B, H, L, d]
  if (fused_ && position->fusable() && !capture) {
    const auto mask = fused_mask(q, k, pad, shared_bias);
    context = compat::scaled_dot_product_attention(q, k, v, mask, p, scale);
    // The layer's own [B, H, L, L] mask (the relative methods' bias), not a shared bias (T5's,
    // ALiBi's: made once a forward, padding folded in), which every layer reads and which stays:
    // rebuilt in backward rather than kept (saved_mask.h).
    if (recompute_bias_ && is_training() && torch::GradMode::is_enabled()) {
      const bool own = mask.defined() && !mask.is_same(shared_bias) && mask.numel() == B * q.size(1) * L * L;
      bool rebuilt = false;
      if (own) {
        auto self = std::static_pointer_cast<SelfAttentionImpl>(shared_from_this());
        rebuilt = rebuild_mask_in_backward(context, mask, [self, q, k, pad, shared_bias] {
          return self->fused_mask(q, k, pad, shared_bias);
        });
      }
      if (!rebuilt && q.is_cuda()) warn_bias_mode_saves_nothing(own ? IdleBias::copied_mask : IdleBias::no_own_bias);
    }
  } else {
    if (recompute_bias_ && is_training() && torch::GradMode::is_enabled() && q.is_cuda())
      warn_bias_mode_saves_nothing(IdleBias::unfused);
    const auto bias = layer_bias(q, k, shared_bias);
    // Content scores are linear in q, so scaling q ([B, H, L, d]) spares a pass over [B, H, L, L].
    auto logits = position->content_scores(q * scale, k);  // [B, H, L, L]
    if (bias.defined()) logits = logits + bias;
    if (pad.defined()) logits = logits.masked_fill(pad, -inf);
    auto probs = softmax_kept_in_autocast_type(logits);  // [B, H, L, L]; padded keys get exactly 0
    if (capture) captured_probs = probs.detach();
    std::tie(context, probs) = dropout_then_values(probs, v, p);  // probs: after dropout, for a value term
    auto extra = position->value_term(probs);
    if (extra.defined()) context = context + extra;
  }
  return context;
}

torch::Tensor SelfAttentionImpl::layer_bias(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& shared_bias) {
  auto bias = shared_bias.defined() ? shared_bias : position->score_bias(q, k);  // broadcastable to [B, H, L, L]
  if (bias.defined() && bias.scalar_type() != q.scalar_type()) bias = bias.to(q.scalar_type());
  return bias;
}

torch::Tensor SelfAttentionImpl::fused_mask(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& pad,
                                            const torch::Tensor& shared_bias) {
  // Padding and the method's bias travel as one float mask; with neither, no mask at all, which
  // leaves SDPA free to pick its fastest kernel (FlashAttention).
  const int64_t B = q.size(0), L = q.size(2);
  const auto bias = layer_bias(q, k, shared_bias);
  torch::Tensor mask;  // undefined = none
  if (pad.defined())
    mask = torch::zeros({B, 1, 1, L}, q.options()).masked_fill(pad, -std::numeric_limits<float>::infinity());
  if (bias.defined()) mask = mask.defined() ? mask + bias : bias;
  // CUDA's flash/memory-efficient/cuDNN kernels need unit stride along keys, else SDPA
  // silently takes its math kernel; every method's bias has it (AttentionDispatch test).
  if (mask.defined() && mask.stride(-1) != 1) mask = mask.contiguous();
  return mask;
}

}  // namespace rpe
