// GLUE fine-tuning: sentence (pairs) -> ClassifierModel [B, C] -> cross-entropy (C classes) or
// mean-squared error (STS-B, C = 1); evaluation with the task's official metrics per dev split
// (MNLI: matched and mismatched) at each epoch's end, every finetune.eval_every steps and after
// the last step; the kept model goes to seed<N>/model/, the predictions to GLUE TSVs.
#pragma once
#include <vector>

#include "eval/results.h"
#include "finetune/saved_model.h"
#include "finetune/seed_run.h"

namespace rpe::finetune {

// Micro-batches of training pairs: tensors = {ids, padding, types (or undefined), labels [B] double}.
class GlueTrainTask : public ItemTask {
 public:
  GlueTrainTask(const Prepared& p, ClassifierModel model, const TrainOptions& t, const SeedContext& ctx,
                ModelKeeper* keeper);
  BatchSums forward(const MicroBatch& batch) override;
  std::string accuracy_name() const override { return regression_ ? "" : "accuracy"; }
  nlohmann::json evaluate() override;  // glue_dev_metrics (rank 0)
  bool after_evaluation(int64_t step, const nlohmann::json& fields) override;

 protected:
  MicroBatch make_batch(const std::vector<int64_t>& items) override;

 private:
  const Prepared& p_;
  ClassifierModel model_;
  bool regression_;
  ModelKeeper* keeper_;  // rank 0's; null on other ranks
};

// Predictions for encoded inputs: class ids, or scores for regression (STS-B); batched, under
// the config's precision.
std::vector<double> predict_glue(const Prepared& p, ClassifierModel& model, const std::vector<std::vector<int64_t>>& ids,
                                 const torch::Device& device);

// The task's metrics on every dev split of p.dev: "metric" keys, or "split/metric" when the task
// has several dev splits (MNLI). Predictions per split go to `predictions` when given.
nlohmann::json glue_dev_metrics(const Prepared& p, ClassifierModel& model, const torch::Device& device,
                                std::vector<std::vector<double>>* predictions = nullptr);

// The GLUE submission format: "index<TAB>prediction" with the label names (STS-B: the score).
// `index` holds the input's own index column; empty = 0, 1, 2, ...
void write_glue_predictions(const std::filesystem::path& file, const std::vector<std::string>& labels,
                            const std::vector<double>& pred, const std::vector<std::string>& index = {});

// Trains one seed (every rank) and, on rank 0, evaluates each dev split and writes
// predictions_<split>.tsv and results.json to ctx.dir; returns rank 0's result rows.
std::vector<eval::ResultRow> run_glue_seed(const Prepared& p, const SeedContext& ctx);

}  // namespace rpe::finetune
