// BERT encoder layer (Vaswani et al. 2017; Devlin et al. 2019), GELU feed-forward.
#include "model/encoder.h"

namespace rpe {

EncoderLayerImpl::EncoderLayerImpl(const ModelOptions& o, std::shared_ptr<PositionTermImpl> position)
    : dropout_p_(o.dropout), pre_ln_(o.pre_ln) {
  auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.hidden}).eps(o.layer_norm_eps)); };
  attention = register_module("attention", SelfAttention(o, std::move(position)));
  attention_norm = register_module("attention_norm", ln());
  ffn_in = register_module("ffn_in", torch::nn::Linear(o.hidden, o.ffn));
  ffn_out = register_module("ffn_out", torch::nn::Linear(o.ffn, o.hidden));
  ffn_norm = register_module("ffn_norm", ln());
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& key_padding,
                                        const torch::Tensor& shared_bias) {
  auto drop = [&](const torch::Tensor& t) { return torch::dropout(t, dropout_p_, is_training()); };
  auto ffn = [&](const torch::Tensor& t) { return ffn_out->forward(torch::gelu(ffn_in->forward(t))); };
  if (pre_ln_) {
    auto h = x + drop(attention->forward(attention_norm->forward(x), key_padding, shared_bias));
    return h + drop(ffn(ffn_norm->forward(h)));
  }
  auto h = attention_norm->forward(x + drop(attention->forward(x, key_padding, shared_bias)));
  return ffn_norm->forward(h + drop(ffn(h)));
}

}  // namespace rpe
