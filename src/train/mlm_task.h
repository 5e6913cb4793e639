// Masked language modelling as an engine task (train/engine.h), and the one MLM loss of the
// project (pretraining, held-out evaluation, `rpe-train inspect`).
//
// Selecting the masked positions: the loss needs only the ~15% of positions that carry a label,
// so the hidden states are gathered there before the vocabulary projection ([N, D] x [D, V]
// instead of [B*L, D] x [D, V]: at BERT-base the projection over all positions would cost about
// as much as three more encoder layers). The index of those positions is computed on the HOST,
// where the loader builds the labels anyway (mlm_selection: a CPU nonzero over B*L labels, a few
// microseconds), and travels to the device with the batch. So the device never reports a count
// back (no nonzero() on the device, no host sync), and the selection stays exact, unlike a
// fixed-capacity gather that must either waste work or drop tokens.
//
// Except under train.cuda_graphs, where a replayed graph needs the same shapes every time: then
// the selection is padded to a capacity no batch can exceed, B x max(1, round(L x mask_prob))
// (masking selects at most that many tokens a sequence: data/masking.cpp's budget), with
// index 0 and target kIgnoreLabel, which the cross-entropy and the accuracy leave out. At
// L = 128 and 15% that is 19 rows a sequence against ~18.5 selected: ~3% more head rows.
#pragma once
#include <torch/torch.h>

#include <memory>

#include "config/config.h"
#include "data/mlm_dataset.h"
#include "model/bert.h"
#include "train/engine.h"

namespace rpe {

// Masked positions of a batch's labels [B, L] (host): flat indices into B*L and their targets.
struct MlmSelection {
  torch::Tensor index;    // [N] int64
  torch::Tensor targets;  // [N] int64 original token ids
};
MlmSelection mlm_selection(const torch::Tensor& labels);
// `sel` padded to `capacity` rows (index 0, target kIgnoreLabel); std::logic_error if it has more.
MlmSelection pad_selection(const MlmSelection& sel, int64_t capacity);

struct MlmSums {
  torch::Tensor loss;     // 0-dim float32: sum of the CE over the N selected positions
  torch::Tensor correct;  // 0-dim int64: argmax hits among them
};
// The MLM loss: encode [B, L] -> gather the selected hidden states [N, D] -> logits [N, V]
// (fp32) -> summed cross-entropy. All tensors on the model's device. Rows whose target is
// kIgnoreLabel (padding: pad_selection) count in neither sum.
MlmSums mlm_loss(BertModel& model, const torch::Tensor& ids, const torch::Tensor& padding,
                 const torch::Tensor& index, const torch::Tensor& targets);

// Pretraining data as engine micro-batches: tensors = {ids [B, L], padding [B, L], index [N],
// targets [N], tokens [ ], count [ ] (N selected, without pad_selection's rows)}. The evaluation
// is the held-out MLM loss over train.eval_batches batches of one process's micro-batch, the
// same sequences and masks whatever the number of ranks, its chunks split over the ranks.
class MlmTask : public Task {
 public:
  MlmTask(BertModel model, std::shared_ptr<const SequenceSource> train, std::shared_ptr<const SequenceSource> valid,
          const Tokenizer& tokenizer, const Config& cfg, int64_t micro_batch, int64_t rank, int64_t world,
          const torch::Device& device);
  MicroBatch next_batch() override;
  torch::Tensor count(const MicroBatch& batch) override;
  BatchSums forward(const MicroBatch& batch) override;
  void restore(const LoaderCursor& cursor) override { loader_.restore(cursor); }
  std::string accuracy_name() const override { return "mlm_accuracy"; }
  bool fixed_shapes() const override { return fixed_; }
  // Pads every batch's selection to its capacity (see the top); on under train.cuda_graphs.
  void set_fixed_shapes(bool fixed) { fixed_ = fixed; }
  // {[loss sum, correct, selected] float64 over all ranks}; score: loss, accuracy, perplexity.
  EvalOutputs eval_outputs(dist::DataParallel& dp) override;
  nlohmann::json score(const EvalOutputs& outputs) override;

 private:
  BertModel model_;
  std::shared_ptr<const SequenceSource> valid_;
  const Tokenizer& tokenizer_;
  const Config& cfg_;
  torch::Device device_;
  MlmLoader loader_;
  bool fixed_ = false;
};

}  // namespace rpe
