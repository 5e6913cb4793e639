// BERT encoder with a pluggable position method and the MLM head (decoder tied to the
// word embeddings). Pretraining uses one segment (token type 0, no NSP); fine-tuning on
// pairs passes token types as BERT does, and the type table loads from BERT checkpoints.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "config/config.h"
#include "model/attention/position_method.h"
#include "model/encoder.h"
#include "model/recompute.h"

namespace rpe {

class BertModelImpl : public torch::nn::Module {
 public:
  explicit BertModelImpl(const ModelOptions& options);

  // ids: [B, L] int64; key_padding: [B, L] bool (true = padding; undefined = none); token_types: [B, L] int64
  // in [0, type_vocab_size), or undefined for type 0 everywhere. Returns hidden [B, L, D].
  torch::Tensor encode(const torch::Tensor& ids, const torch::Tensor& key_padding,
                       const torch::Tensor& token_types = {});

  // MLM logits for selected hidden states: [N, D] -> [N, V].
  torch::Tensor mlm_logits(const torch::Tensor& hidden);

  // Keep the attention probabilities of `layer` on the next forward (-1 = none).
  void capture_attention(int64_t layer);
  torch::Tensor captured_attention() const;  // [B, H, L, L] or undefined

  // Uses the fused attention kernel where each layer's method allows it.
  void set_fused_attention(bool fused);

  // train.activation_checkpointing: while training with autograd on, each encoder layer (or
  // each layer's attention core) keeps only its inputs and runs again in backward
  // (model/recompute.h). Recompute::none by default.
  void set_activation_checkpointing(Recompute what);
  Recompute activation_checkpointing() const { return recompute_; }

  // Number of parameters, all of them and those owned by the position method (all layers): the
  // build log and summary.json (the cost table's columns).
  int64_t parameter_count() const;
  int64_t position_parameter_count() const;

  const ModelOptions& options() const { return options_; }

  torch::nn::Embedding word_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm embeddings_norm{nullptr};
  std::shared_ptr<PositionMethodImpl> position;
  torch::nn::ModuleList layers{nullptr};
  // Pre-LN only: the LayerNorm after the last layer (pre-LN layers leave the residual stream
  // unnormalised, and the heads expect normalised states, as in GPT-2 or Xiong et al. 2020).
  torch::nn::LayerNorm final_norm{nullptr};
  torch::nn::Linear mlm_transform{nullptr};
  torch::nn::LayerNorm mlm_norm{nullptr};
  torch::Tensor mlm_bias;  // [V]

 private:
  void init_weights();
  ModelOptions options_;
  std::vector<EncoderLayer> layer_list_;
  Recompute recompute_ = Recompute::none;
};
TORCH_MODULE(BertModel);

}  // namespace rpe
