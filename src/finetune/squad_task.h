// SQuAD v1.1/v2.0 fine-tuning: windows of (question, context) -> QaModel start/end logits
// [B, L, 2] -> (CE_start + CE_end) / 2 per window (heads.h); evaluation with the official
// EM/F1 over the dev questions (eval/squad_metrics.h), at each epoch's end, every
// finetune.eval_every steps and after the last step; the kept model goes to seed<N>/model/.
#pragma once
#include <map>
#include <vector>

#include "eval/results.h"
#include "eval/squad_metrics.h"
#include "finetune/saved_model.h"
#include "finetune/seed_run.h"
#include "finetune/squad_postprocess.h"

namespace rpe::finetune {

// Micro-batches of training windows: tensors = {ids, padding, types (or undefined), start, end}.
class SquadTask : public ItemTask {
 public:
  SquadTask(const Prepared& p, QaModel model, const TrainOptions& t, const SeedContext& ctx, ModelKeeper* keeper);
  BatchSums forward(const MicroBatch& batch) override;
  EvalOutputs eval_outputs(dist::DataParallel& dp) override;  // {squad_window_logits}
  nlohmann::json score(const EvalOutputs& outputs) override;  // {"exact", "f1"} on the dev set
  bool after_evaluation(int64_t step, const nlohmann::json& fields) override;

 protected:
  MicroBatch make_batch(const std::vector<int64_t>& items) override;

 private:
  const Prepared& p_;
  QaModel model_;
};

// Start and end logits of every window of p.dev_f, [windows, longest window, 2] float32 on the
// CPU (zero past a window's length), on every rank: batches of finetune.eval_batch_size under
// the config's precision, split over the ranks (dist/sharded_eval.h; a collective).
torch::Tensor squad_window_logits(const Prepared& p, QaModel& model, const torch::Device& device, dist::DataParallel& dp);
// The predictions for the examples p.dev_ex (features p.dev_f, offsets p.dev_off) from those logits.
std::map<std::string, SquadPrediction> squad_predictions_from(const Prepared& p, const torch::Tensor& logits);
// Both, in this process alone (rpe-train predict).
std::map<std::string, SquadPrediction> predict_squad(const Prepared& p, QaModel& model, const torch::Device& device);

// EM/F1 (and the v2.0 breakdown) of `preds` against p.dev_ex's answers, as (metric, value)
// pairs in the order results.json lists them.
std::vector<std::pair<std::string, double>> score_squad(const Prepared& p,
                                                        const std::map<std::string, SquadPrediction>& preds,
                                                        eval::SquadScores& scores);

// predictions.json, nbest_predictions.json and (v2.0) null_odds.json next to `predictions_file`.
void write_squad_predictions(const std::filesystem::path& predictions_file,
                             const std::map<std::string, SquadPrediction>& preds, bool v2);

// Trains one seed (every rank) and, on rank 0, keeps the model finetune.select asks for in
// ctx.dir/model, evaluates it on the dev set and writes its predictions and results.json to
// ctx.dir; returns rank 0's result rows (none on other ranks).
std::vector<eval::ResultRow> run_squad_seed(const Prepared& p, const SeedContext& ctx);

}  // namespace rpe::finetune
