// Task heads on the pretrained encoder (Devlin et al. 2019, sec. 4):
//   SQuAD:  [start, end] = H W + b,  W: D x 2 over every position; loss = (CE_start + CE_end) / 2
//   GLUE:   p = tanh(W_p h_[CLS] + b_p);  logits = W_c dropout(p) + b_c   (C classes, or 1 for
//           STS-B regression with a mean-squared-error loss)
// The pooler is new (our pretraining has no next-sentence task) and the whole input is one
// segment (token type 0), as in pretraining; [SEP] separates question/context and pairs.
#pragma once
#include <torch/torch.h>

#include "model/bert.h"

namespace rpe::finetune {

// Padded batch: ids [B, L] int64 and key padding [B, L] bool (true = padding).
struct Batch {
  torch::Tensor ids, padding;
};
// Pads id sequences to the longest one with `pad_id`.
Batch make_batch(const std::vector<const std::vector<int64_t>*>& seqs, int64_t pad_id, const torch::Device& device);

class QaModelImpl : public torch::nn::Module {
 public:
  explicit QaModelImpl(const ModelOptions& options);
  // Returns logits [B, L, 2] (start, end) in float32.
  torch::Tensor forward(const Batch& batch);
  BertModel bert{nullptr};
  torch::nn::Linear qa_outputs{nullptr};
};
TORCH_MODULE(QaModel);

// Mean of the start and end cross-entropies; logits [B, L, 2], targets [B] each.
torch::Tensor qa_loss(const torch::Tensor& logits, const torch::Tensor& start, const torch::Tensor& end);

class ClassifierModelImpl : public torch::nn::Module {
 public:
  ClassifierModelImpl(const ModelOptions& options, int64_t num_outputs);
  // Returns [B, C] logits (C = 1: regression scores) in float32.
  torch::Tensor forward(const Batch& batch);
  BertModel bert{nullptr};
  torch::nn::Linear pooler{nullptr}, classifier{nullptr};

 private:
  double dropout_;
};
TORCH_MODULE(ClassifierModel);

}  // namespace rpe::finetune
