// Task heads on the pretrained encoder (Devlin et al. 2019, sec. 4):
//   SQuAD:  [start, end] = H W + b,  W: D x 2 over every position; loss = (CE_start + CE_end) / 2
//   GLUE:   p = tanh(W_p h_[CLS] + b_p);  logits = W_c dropout(p) + b_c   (C classes, or 1 for
//           STS-B regression with a mean-squared-error loss)
// The pooler is new (our pretraining has no next-sentence task). Pairs carry BERT's token
// types: 0 up to and including the first [SEP] (question, or sentence A), 1 after it
// (context, or sentence B); finetune.token_types: false keeps type 0 everywhere, as in our
// single-segment pretraining.
#pragma once
#include <torch/torch.h>

#include <limits>

#include "model/bert.h"

namespace rpe::finetune {

// Padded batch: ids [B, L] int64, key padding [B, L] bool (true = padding), token types
// [B, L] int64 (undefined = type 0 everywhere).
struct Batch {
  torch::Tensor ids, padding, types;
};
// Pads id sequences with `pad_id` to L = the longest one's length rounded up to a multiple of
// `multiple` (finetune.pad_to_multiple), but not past max_len (finetune.max_seq_len) unless the
// longest is; `padding` ([B, L], true at pad tokens) is left undefined when no sequence is
// shorter than L. With sep_id >= 0, token types are 1 after the first sep_id of each sequence
// (padding included) and 0 up to it; with sep_id < 0 they are left undefined.
Batch make_batch(const std::vector<const std::vector<int64_t>*>& seqs, int64_t pad_id, const torch::Device& device,
                 int64_t sep_id = -1, int64_t multiple = 1,
                 int64_t max_len = std::numeric_limits<int64_t>::max());

class QaModelImpl : public torch::nn::Module {
 public:
  explicit QaModelImpl(const ModelOptions& options);
  // Returns logits [B, L, 2] (start, end) in float32.
  torch::Tensor forward(const Batch& batch);
  BertModel bert{nullptr};
  torch::nn::Linear qa_outputs{nullptr};
};
TORCH_MODULE(QaModel);

// Non-pad tokens of a batch, 0-dim int64 on the ids' device (no host read): every token when
// `padding` is undefined (a batch without padding carries no mask).
torch::Tensor real_tokens(const torch::Tensor& ids, const torch::Tensor& padding);
// Mean of the start and end cross-entropies; logits [B, L, 2], targets [B] each. Padding
// ([B, L], true at pad tokens; undefined: none) takes no part in either softmax, so a window's
// loss does not depend on how long its batch's longest window is.
torch::Tensor qa_loss(const torch::Tensor& logits, const torch::Tensor& start, const torch::Tensor& end,
                      const torch::Tensor& padding = {});

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
