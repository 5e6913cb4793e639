// The MLM task and loss (see mlm_task.h).
#include "train/mlm_task.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dist/all_or_none.h"
#include "dist/sharded_eval.h"

namespace rpe {

MlmSelection mlm_selection(const torch::Tensor& labels) {
  auto flat = labels.reshape({-1});                          // [B*L], host
  auto index = flat.ne(kIgnoreLabel).nonzero().view({-1});   // [N]
  return {index, flat.index_select(0, index)};
}

MlmSelection pad_selection(const MlmSelection& sel, int64_t capacity) {
  const int64_t n = sel.index.size(0);
  if (n > capacity)  // masking selects at most the capacity (mlm_task.h): a broken bound, not bad input
    throw std::logic_error("pad_selection: " + std::to_string(n) + " selected tokens exceed the capacity " +
                           std::to_string(capacity));
  return {torch::cat({sel.index, torch::zeros({capacity - n}, sel.index.options())}),
          torch::cat({sel.targets, torch::full({capacity - n}, kIgnoreLabel, sel.targets.options())})};
}

MlmSums mlm_loss(BertModel& model, const torch::Tensor& ids, const torch::Tensor& padding, const torch::Tensor& index,
                 const torch::Tensor& targets) {
  auto hidden = model->encode(ids, padding);                             // [B, L, D]
  auto h = hidden.reshape({-1, hidden.size(-1)}).index_select(0, index);  // [N, D]
  auto logits = model->mlm_logits(h).to(torch::kFloat);                  // [N, V]
  namespace F = torch::nn::functional;
  MlmSums s;
  s.loss = F::cross_entropy(logits, targets, F::CrossEntropyFuncOptions().reduction(torch::kSum));
  s.correct = logits.detach().argmax(-1).eq(targets).sum();
  return s;
}

MlmTask::MlmTask(BertModel model, std::shared_ptr<const SequenceSource> train,
                 std::shared_ptr<const SequenceSource> valid, const Tokenizer& tokenizer, const Config& cfg,
                 int64_t micro_batch, int64_t rank, int64_t world, const torch::Device& device)
    : model_(std::move(model)),
      valid_(std::move(valid)),
      tokenizer_(tokenizer),
      cfg_(cfg),
      device_(device),
      loader_(std::move(train), tokenizer,
              LoaderOptions{MaskingOptions::from(cfg.data), micro_batch, static_cast<uint64_t>(cfg.train.seed),
                            /*shuffle=*/true, rank, world, cfg.data.prefetch, /*pin_memory=*/device.is_cuda()}) {}

MicroBatch MlmTask::next_batch() {
  MlmBatch b = loader_.next();
  auto sel = mlm_selection(b.labels);
  const int64_t selected = sel.index.size(0);
  if (fixed_) {
    const auto per_sequence = std::max<int64_t>(1, std::llround(static_cast<double>(b.ids.size(1)) * cfg_.data.mask_prob));
    sel = pad_selection(sel, b.ids.size(0) * per_sequence);
  }
  MicroBatch out;
  // A batch without padding (packed pretraining sequences) carries no mask at all, so
  // attention can take SDPA's fastest kernel (checked on the host batch: no device sync).
  auto padding = b.padding.any().item<bool>() ? b.padding : torch::Tensor();
  out.tensors = {b.ids, padding, sel.index, sel.targets, torch::full({}, static_cast<double>(b.tokens), torch::kDouble),
                 torch::full({}, static_cast<double>(selected), torch::kDouble)};
  out.cursor = loader_.cursor();
  return out;
}

torch::Tensor MlmTask::count(const MicroBatch& batch) {
  return batch.tensors[5];  // N, counted on the host and copied with the batch: nothing read back
}

BatchSums MlmTask::forward(const MicroBatch& b) {
  const auto& t = b.tensors;
  const MlmSums s = mlm_loss(model_, t[0], t[1], t[2], t[3]);
  return {s.loss, s.correct, t[4]};
}

EvalOutputs MlmTask::eval_outputs(dist::DataParallel& dp) {
  if (!valid_ || valid_->size() == 0) return {};
  // The same held-out sequences and masks whatever the number of ranks and micro-batches:
  // eval_batches batches of one micro-batch of all ranks together (batch_size / grad_accum), drawn across
  // the whole held-out set by a fixed shuffle (not the first file's only), read kChunk at a time.
  // Every rank draws every chunk (the masks follow the draws), and scores its own (chunk k:
  // rank k mod W, dist/sharded_eval.h).
  constexpr int64_t kChunk = 8;
  const int64_t wanted =
      std::min(cfg_.train.eval_batches * (cfg_.train.batch_size / cfg_.train.grad_accum), valid_->size());
  const int64_t batches = (wanted + kChunk - 1) / kChunk;  // the last one narrowed to what is left
  MlmLoader loader(valid_, tokenizer_,
                   LoaderOptions{MaskingOptions::from(cfg_.data), kChunk, static_cast<uint64_t>(cfg_.train.seed) + 1,
                                 /*shuffle=*/true});
  const auto dopt = torch::TensorOptions(torch::kDouble).device(device_);
  auto sums = torch::zeros({3}, dopt);  // [loss, correct, selected] on the device until the end
  dist::all_or_none(dp, "computing its share of the held-out MLM loss", [&] {  // one rank failing stops all
    for (int64_t i = 0; i < batches; ++i) {
      MlmBatch b = loader.next();
      if (!dist::owns_batch(dp, i)) continue;
      const int64_t rows = std::min(kChunk, wanted - i * kChunk);
      if (rows < kChunk) b = {b.ids.narrow(0, 0, rows), b.labels.narrow(0, 0, rows), b.padding.narrow(0, 0, rows), 0};
      const auto sel = mlm_selection(b.labels);
      const auto padding = b.padding.any().item<bool>() ? b.padding.to(device_) : torch::Tensor();  // none: no mask
      const MlmSums s = mlm_loss(model_, b.ids.to(device_), padding, sel.index.to(device_), sel.targets.to(device_));
      sums.slice(0, 0, 2) += torch::stack({s.loss.to(torch::kDouble), s.correct.to(torch::kDouble)});
      sums[2] += static_cast<double>(sel.index.size(0));
    }
  });
  dp.all_reduce_sum(sums);
  return {sums.cpu()};
}

nlohmann::json MlmTask::score(const EvalOutputs& outputs) {
  // Nothing held out, or no held-out token masked: no score (0/0 is no accuracy, and a clamped
  // count a loss of 0); the trainer reports "none".
  if (outputs.empty() || outputs.at(0)[2].item<double>() <= 0.0) return nlohmann::json::object();
  const auto h = outputs.at(0);
  const double total = h[2].item<double>();
  const double loss = h[0].item<double>() / total;
  const double acc = h[1].item<double>() / total;
  return {{"loss", loss}, {"mlm_accuracy", acc}, {"perplexity", std::exp(loss)}};
}

}  // namespace rpe
