// Transformer encoder layer: attention + feed-forward, post-LN as BERT (pre-LN optional).
//   post-LN: x = LN(x + Drop(Attn(x)));  x = LN(x + Drop(FFN(x)))
//   pre-LN:  x = x + Drop(Attn(LN(x)));  x = x + Drop(FFN(LN(x)))   (BertModel adds a final LN)
#pragma once
#include <torch/torch.h>

#include "model/attention/self_attention.h"

namespace rpe {

class EncoderLayerImpl : public torch::nn::Module {
 public:
  EncoderLayerImpl(const ModelOptions& options, std::shared_ptr<PositionTermImpl> position);
  // x: [B, L, D]; key_padding: [B, L] bool or undefined (no padding); shared_bias: see
  // SelfAttention::forward. Returns [B, L, D].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_padding, const torch::Tensor& shared_bias = {});

  // The stream between layers: x [B, L, D] (fp32 under autocast: LayerNorm's output) and, where
  // the fused add & norm made it (CUDA, post-LN, autocast), low: the same values in the
  // autocast dtype, which the next layer's projection reads instead of casting x (add_norm.h).
  struct Stream {
    torch::Tensor x, low;
  };
  Stream forward_stream(const Stream& in, const torch::Tensor& key_padding, const torch::Tensor& shared_bias = {});

  SelfAttention attention{nullptr};
  torch::nn::LayerNorm attention_norm{nullptr}, ffn_norm{nullptr};
  torch::nn::Linear ffn_in{nullptr}, ffn_out{nullptr};

 private:
  double dropout_p_;
  bool pre_ln_;
};
TORCH_MODULE(EncoderLayer);

}  // namespace rpe
