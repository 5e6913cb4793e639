// BERT: embeddings (+ method's input positions) -> encoder layers -> MLM head.
#include "model/bert.h"

#include <ATen/autocast_mode.h>

#include <limits>

#include "model/attention/registry.h"
#include "util/torch_compat.h"

namespace rpe {

BertModelImpl::BertModelImpl(const ModelOptions& o) : options_(o) {
  auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.hidden}).eps(o.layer_norm_eps)); };
  word_embeddings = register_module("word_embeddings", torch::nn::Embedding(o.vocab_size, o.hidden));
  token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(o.type_vocab_size, o.hidden));
  embeddings_norm = register_module("embeddings_norm", ln());
  position = register_module("position", make_position_method(o));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.layers; ++i) {
    layer_list_.emplace_back(o, position->make_layer_term(i));
    layers->push_back(layer_list_.back());
  }
  if (o.pre_ln) final_norm = register_module("final_norm", ln());
  mlm_transform = register_module("mlm_transform", torch::nn::Linear(o.hidden, o.hidden));
  mlm_norm = register_module("mlm_norm", ln());
  mlm_bias = register_parameter("mlm_bias", torch::zeros({o.vocab_size}));
  init_weights();
}

void BertModelImpl::init_weights() {
  // BERT's init: N(0, init_std) for linear and embedding weights, zero biases. Position
  // methods initialise their own parameters (some start at 1, e.g. m1/m2 scalars).
  torch::NoGradGuard no_grad;
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* lin = m->as<torch::nn::Linear>()) {
      lin->weight.normal_(0.0, options_.init_std);
      if (lin->bias.defined()) lin->bias.zero_();
    } else if (auto* emb = m->as<torch::nn::Embedding>()) {
      emb->weight.normal_(0.0, options_.init_std);
    }
  }
}

torch::Tensor BertModelImpl::encode(const torch::Tensor& ids, const torch::Tensor& key_padding,
                                    const torch::Tensor& token_types) {
  const int64_t B = ids.size(0), L = ids.size(1);
  auto types = token_types.defined() ? token_type_embeddings->forward(token_types)  // [B, L, D]
                                     : token_type_embeddings->weight[0];             // [D]
  auto x = word_embeddings->forward(ids) + types;                                    // [B, L, D]
  auto pos = position->input_embeddings(L);                                   // [L, D] or undefined
  if (pos.defined()) x = x + pos.to(x.dtype()).unsqueeze(0);
  x = torch::dropout(embeddings_norm->forward(x), options_.dropout, is_training());
  // Built once per forward for all layers: the method's position-only bias [1, H|1, L, L]
  // (broadcast over the batch) in the dtype the logits will have (autocast's, else x's); with
  // padding, folded into it as -inf once ([B, H|1, L, L]) instead of once per layer.
  torch::Tensor pad = key_padding;
  const auto type = x.device().type();
  const auto dtype = compat::autocast_enabled(type) ? compat::get_autocast_dtype(type) : x.scalar_type();
  auto bias = position->position_bias(L, x.device(), dtype);
  if (bias.defined() && pad.defined()) {
    bias = bias + torch::zeros({B, 1, 1, L}, bias.options())
                      .masked_fill(pad.view({B, 1, 1, L}), -std::numeric_limits<float>::infinity());
    pad = torch::Tensor();
  }
  EncoderLayerImpl::Stream stream{x, {}};
  for (auto& layer : layer_list_) {
    if (recompute_ != Recompute::layers || !is_training()) {
      stream = layer->forward_stream(stream, pad, bias);
      continue;
    }
    auto out = recomputed(  // the layer keeps only its inputs; the copies captured outlive the graph
        [layer = layer.ptr(), pad](const torch::autograd::variable_list& in) -> torch::autograd::variable_list {
          // Replayed in backward as it ran: in training mode (its dropout), which nothing may switch off between.
          TORCH_CHECK(layer->is_training(), "recomputed encoder layer: the model left training mode before its backward");
          auto s = layer->forward_stream({in[0], in[1]}, pad, in[2]);
          return {s.x, s.low};
        },
        {stream.x, stream.low, bias});
    stream = {out[0], out[1]};
  }
  return final_norm ? final_norm->forward(stream.x) : stream.x;
}

torch::Tensor BertModelImpl::mlm_logits(const torch::Tensor& hidden) {
  auto h = mlm_norm->forward(torch::gelu(mlm_transform->forward(hidden)));  // [N, D]
  return torch::nn::functional::linear(h, word_embeddings->weight, mlm_bias);  // [N, V], tied decoder
}

void BertModelImpl::capture_attention(int64_t layer) {
  for (size_t i = 0; i < layer_list_.size(); ++i) {
    layer_list_[i]->attention->capture = static_cast<int64_t>(i) == layer;
    layer_list_[i]->attention->captured_probs = torch::Tensor();
  }
}

torch::Tensor BertModelImpl::captured_attention() const {
  for (const auto& layer : layer_list_)
    if (layer->attention->capture) return layer->attention->captured_probs;
  return {};
}

void BertModelImpl::set_activation_checkpointing(Recompute what) {
  recompute_ = what;
  for (auto& layer : layer_list_) {
    layer->attention->set_recompute(what == Recompute::attention);
    layer->attention->set_recompute_bias(what == Recompute::bias);
  }
}

void BertModelImpl::set_fused_attention(bool fused) {
  for (auto& layer : layer_list_) layer->attention->set_fused(fused);
}

int64_t BertModelImpl::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

int64_t BertModelImpl::position_parameter_count() const {
  int64_t n = 0;
  for (const auto& p : position->parameters()) n += p.numel();
  for (const auto& layer : layer_list_)
    for (const auto& p : layer->attention->position->parameters()) n += p.numel();
  return n;
}

}  // namespace rpe
