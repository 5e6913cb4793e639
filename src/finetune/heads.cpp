// SQuAD and GLUE heads (see heads.h).
#include "finetune/heads.h"

#include <algorithm>
#include <limits>

namespace rpe::finetune {

Batch make_batch(const std::vector<const std::vector<int64_t>*>& seqs, int64_t pad_id, const torch::Device& device,
                 int64_t sep_id, int64_t multiple, int64_t max_len) {
  int64_t longest = 0;
  for (const auto* s : seqs) longest = std::max<int64_t>(longest, static_cast<int64_t>(s->size()));
  // Up to a multiple (8: bf16 score rows start 16-byte aligned, as tensor-core kernels and the
  // fused kernels' bias want), never past max_len (nor below the longest sequence).
  const int64_t L = std::max(longest, std::min((longest + multiple - 1) / multiple * multiple, max_len));
  const int64_t B = static_cast<int64_t>(seqs.size());
  auto ids = torch::full({B, L}, pad_id, torch::kLong);  // [B, L]
  auto pad = torch::ones({B, L}, torch::kBool);          // [B, L]
  auto ia = ids.accessor<int64_t, 2>();
  auto pa = pad.accessor<bool, 2>();
  bool padded = false;  // known on the host: no device read to find out
  for (int64_t b = 0; b < B; ++b) {
    padded |= static_cast<int64_t>(seqs[b]->size()) < L;
    for (size_t t = 0; t < seqs[b]->size(); ++t) {
      ia[b][t] = (*seqs[b])[t];
      pa[b][t] = false;
    }
  }
  // No padding, no mask: SDPA may then pick its flash kernel for methods without a bias (the
  // MLM batches do the same; docs/attention.md).
  Batch batch{ids.to(device), padded ? pad.to(device) : torch::Tensor(), {}};
  if (sep_id >= 0) {
    // 1 from the token after the first [SEP] on (padding included): a running count of [SEP]s
    // seen before each position, capped at 1.
    auto sep_seen = ids.eq(sep_id).to(torch::kLong).cumsum(1) - ids.eq(sep_id).to(torch::kLong);  // [B, L]
    batch.types = sep_seen.clamp_max(1).to(device);
  }
  return batch;
}

namespace {
void init_linear(torch::nn::Linear& lin, double std) {
  torch::NoGradGuard no_grad;
  lin->weight.normal_(0.0, std);
  lin->bias.zero_();
}
}  // namespace

QaModelImpl::QaModelImpl(const ModelOptions& o) {
  bert = register_module("bert", BertModel(o));
  qa_outputs = register_module("qa_outputs", torch::nn::Linear(o.hidden, 2));
  init_linear(qa_outputs, o.init_std);
}

torch::Tensor QaModelImpl::forward(const Batch& batch) {
  auto h = bert->encode(batch.ids, batch.padding, batch.types);  // [B, L, D]
  return qa_outputs->forward(h).to(torch::kFloat);  // [B, L, 2]
}

torch::Tensor real_tokens(const torch::Tensor& ids, const torch::Tensor& padding) {
  if (padding.defined()) return padding.logical_not().sum();
  return torch::full({}, ids.numel(), ids.options().dtype(torch::kLong));
}

torch::Tensor qa_loss(const torch::Tensor& logits, const torch::Tensor& start, const torch::Tensor& end,
                      const torch::Tensor& padding) {
  namespace F = torch::nn::functional;
  auto starts = logits.select(-1, 0), ends = logits.select(-1, 1);  // [B, L] each
  if (padding.defined()) {  // exp(-inf) = 0: padding is no candidate, whatever the batch's length
    const auto none = -std::numeric_limits<float>::infinity();
    starts = starts.masked_fill(padding, none);
    ends = ends.masked_fill(padding, none);
  }
  return (F::cross_entropy(starts, start) + F::cross_entropy(ends, end)) / 2;
}

ClassifierModelImpl::ClassifierModelImpl(const ModelOptions& o, int64_t num_outputs) : dropout_(o.dropout) {
  bert = register_module("bert", BertModel(o));
  pooler = register_module("pooler", torch::nn::Linear(o.hidden, o.hidden));
  classifier = register_module("classifier", torch::nn::Linear(o.hidden, num_outputs));
  init_linear(pooler, o.init_std);
  init_linear(classifier, o.init_std);
}

torch::Tensor ClassifierModelImpl::forward(const Batch& batch) {
  auto h = bert->encode(batch.ids, batch.padding, batch.types);  // [B, L, D]
  auto pooled = torch::tanh(pooler->forward(h.select(1, 0)));  // [B, D] from [CLS]
  pooled = torch::dropout(pooled, dropout_, is_training());
  return classifier->forward(pooled).to(torch::kFloat);        // [B, C]
}

}  // namespace rpe::finetune
