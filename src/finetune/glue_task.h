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
  EvalOutputs eval_outputs(dist::DataParallel& dp) override;  // glue_dev_predictions
  nlohmann::json score(const EvalOutputs& outputs) override;  // glue_dev_metrics
  bool after_evaluation(int64_t step, const nlohmann::json& fields) override;

 protected:
  MicroBatch make_batch(const std::vector<int64_t>& items) override;

 private:
  const Prepared& p_;
  ClassifierModel model_;
  bool regression_;
};

// Predictions for encoded inputs: class ids, or scores for regression (STS-B), [n] float64 on
// the CPU, on every rank: batches of finetune.eval_batch_size under the config's precision,
// split over the ranks (dist/sharded_eval.h; a collective).
torch::Tensor glue_predictions(const Prepared& p, ClassifierModel& model, const std::vector<std::vector<int64_t>>& ids,
                               const torch::Device& device, dist::DataParallel& dp);
// The same in this process alone (rpe-train predict).
std::vector<double> predict_glue(const Prepared& p, ClassifierModel& model, const std::vector<std::vector<int64_t>>& ids,
                                 const torch::Device& device);
// glue_predictions for each dev split of p.dev (MNLI: matched, mismatched).
EvalOutputs glue_dev_predictions(const Prepared& p, ClassifierModel& model, const torch::Device& device,
                                 dist::DataParallel& dp);
// The task's metrics on every dev split from those predictions: "metric" keys, or
// "split/metric" when the task has several dev splits (MNLI).
nlohmann::json glue_dev_metrics(const Prepared& p, const EvalOutputs& predictions);

// The GLUE submission format: "index<TAB>prediction" with the label names (STS-B: the score in
// the shortest digits that read back as the same double: its metrics from the file are results.json's).
// `index` holds the input's own index column; empty = 0, 1, 2, ...
void write_glue_predictions(const std::filesystem::path& file, const std::vector<std::string>& labels,
                            const std::vector<double>& pred, const std::vector<std::string>& index = {});

// Trains one seed (every rank) and, on rank 0, evaluates each dev split and writes
// predictions_<split>.tsv and results.json to ctx.dir; returns rank 0's result rows.
std::vector<eval::ResultRow> run_glue_seed(const Prepared& p, const SeedContext& ctx);

}  // namespace rpe::finetune
