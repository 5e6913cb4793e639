// GLUE fine-tuning: sentence (pairs) -> ClassifierModel [B, C] -> cross-entropy (C classes) or
// mean-squared error (STS-B, C = 1); evaluation with the task's official metrics per dev split
// (MNLI: matched and mismatched) and the predictions as GLUE TSVs.
#pragma once
#include <vector>

#include "eval/results.h"
#include "finetune/seed_run.h"

namespace rpe::finetune {

// Micro-batches of training pairs: tensors = {ids, padding, types (or undefined), labels [B] double}.
class GlueTrainTask : public ItemTask {
 public:
  GlueTrainTask(const Prepared& p, ClassifierModel model, const TrainOptions& t, const SeedContext& ctx);
  BatchSums forward(const MicroBatch& batch) override;
  std::string accuracy_name() const override { return regression_ ? "" : "accuracy"; }

 protected:
  MicroBatch make_batch(const std::vector<int64_t>& items) override;

 private:
  const Prepared& p_;
  ClassifierModel model_;
  bool regression_;
};

// Trains one seed (every rank) and, on rank 0, evaluates each dev split and writes
// predictions_<split>.tsv and results.json to ctx.dir; returns rank 0's result rows.
std::vector<eval::ResultRow> run_glue_seed(const Prepared& p, const SeedContext& ctx);

}  // namespace rpe::finetune
