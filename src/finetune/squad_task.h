// SQuAD v1.1/v2.0 fine-tuning: windows of (question, context) -> QaModel start/end logits
// [B, L, 2] -> (CE_start + CE_end) / 2 per window (heads.h); evaluation with the official
// EM/F1 over the dev questions (eval/squad_metrics.h).
#pragma once
#include <vector>

#include "eval/results.h"
#include "finetune/seed_run.h"

namespace rpe::finetune {

// Micro-batches of training windows: tensors = {ids, padding, types (or undefined), start, end}.
class SquadTask : public ItemTask {
 public:
  SquadTask(const Prepared& p, QaModel model, const TrainOptions& t, const SeedContext& ctx);
  BatchSums forward(const MicroBatch& batch) override;

 protected:
  MicroBatch make_batch(const std::vector<int64_t>& items) override;

 private:
  const Prepared& p_;
  QaModel model_;
};

// Trains one seed (every rank) and, on rank 0, evaluates on the dev set and writes
// predictions.json (+ null_odds.json for v2.0) and results.json to ctx.dir; returns rank 0's
// result rows (none on other ranks).
std::vector<eval::ResultRow> run_squad_seed(const Prepared& p, const SeedContext& ctx);

}  // namespace rpe::finetune
