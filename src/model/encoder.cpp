// BERT encoder layer (Vaswani et al. 2017; Devlin et al. 2019), GELU feed-forward.
#include "model/encoder.h"

#include "model/add_norm.h"
#include "util/torch_compat.h"

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
  return forward_stream({x, {}}, key_padding, shared_bias).x;
}

EncoderLayerImpl::Stream EncoderLayerImpl::forward_stream(const Stream& in, const torch::Tensor& key_padding,
                                                          const torch::Tensor& shared_bias) {
  const auto& x = in.x;
  auto ffn = [&](const torch::Tensor& t) { return ffn_out->forward(torch::gelu(ffn_in->forward(t))); };
  if (!pre_ln_) {  // add_norm: one kernel each way on CUDA, each also giving the next Linear its input
    const bool low = compat::autocast_enabled(x.device().type());
    const auto input = [](const AddNormOutput& s) { return s.y_low.defined() ? s.y_low : s.y; };
    auto h = add_norm(x, attention->forward(in.low.defined() ? in.low : x, key_padding, shared_bias), dropout_p_,
                      is_training(), attention_norm, low);
    auto out = add_norm(h.y, ffn(input(h)), dropout_p_, is_training(), ffn_norm, low);
    return {out.y, out.y_low};
  }
  auto drop = [&](const torch::Tensor& t) { return torch::dropout(t, dropout_p_, is_training()); };
  // x + y with y cast to x's dtype first. Under bf16 autocast the stream x is fp32 and y bf16
  // (a Linear's output): CUDA adds mixed dtypes with a non-vectorised casting kernel (the H100
  // profile: 110 us a call against 53 us for an fp32 add of the same size); a vectorised cast
  // and add compute the same sum. A no-op cast in fp32.
  auto residual = [](const torch::Tensor& x, const torch::Tensor& y) { return x + y.to(x.scalar_type()); };
  auto h = residual(x, drop(attention->forward(attention_norm->forward(x), key_padding, shared_bias)));
  return {residual(h, drop(ffn(ffn_norm->forward(h)))), {}};
}

}  // namespace rpe
