// What the fine-tuning tasks share: one seed's training through the engine (train/engine.h)
// and the order in which training items are drawn.
//
// Items: each epoch is a permutation of the n items drawn from one std::mt19937_64(seed)
// (the same on every rank); an optimizer step takes the next micro * grad_accum * W items of
// that stream, rank r takes its contiguous share [r*micro*grad_accum, (r+1)*micro*grad_accum)
// and cuts it into grad_accum micro-batches of `micro` items. With W = 1 this is the stream
// itself, micro-batch after micro-batch.
#pragma once
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dist/data_parallel.h"
#include "eval/results.h"
#include "finetune/prepare.h"
#include "finetune/saved_model.h"
#include "train/engine.h"

namespace rpe::finetune {

// Where a seed runs: this process's device and data-parallel group.
struct SeedContext {
  torch::Device device = torch::kCPU;
  dist::DataParallel* dp = nullptr;
  std::filesystem::path dir;  // seed<N>/ (rank 0 writes there)
  std::string run_id;
  int64_t seed = 0;
  // `finetune --resume`: continue from the seed's newest checkpoint, where it has one (resume.h).
  bool resume = false;
  std::string config_yaml;    // the resolved config, embedded in the seed's checkpoints
  std::string data_identity;  // the training items (count, CRC-32): what a checkpoint's data position indexes
  // train.time_limit_min: past this time the engine stops after a step, with a checkpoint.
  std::optional<std::chrono::steady_clock::time_point> stop_at;
  std::string resume_hint;  // the command that continues the run, for the stop's message
  bool chief() const { return dp->rank() == 0; }
};

// Base of the SQuAD and GLUE tasks: draws items as above and asks the task for their batch.
class ItemTask : public Task {
 public:
  // This process is `rank` of `world`; the order's generator is seeded with `seed`; dev
  // evaluations at each epoch's end unless `eval_each_epoch` is false (finetune.eval_each_epoch).
  ItemTask(int64_t n_items, const TrainOptions& t, int64_t seed, int64_t rank, int64_t world,
           bool eval_each_epoch = true);
  MicroBatch next_batch() final;
  torch::Tensor count(const MicroBatch& batch) final;  // examples: rows of tensors[0]
  // Resume after `cursor` (an optimizer step's end: {epoch, items of its order drawn}): the
  // generator reseeded and the epochs' shuffles replayed up to the cursor's, so the items come
  // in the order an uninterrupted run draws them.
  void restore(const LoaderCursor& cursor) final;
  // Rank 0: the model keeper's state (ModelKeeper::state), "" on the other ranks.
  std::string saved_state() const final { return keeper_ ? keeper_->state().dump() : ""; }
  // Rank 0: the keeper's state back from a checkpoint's (TrainState::task_state; "" = none).
  void restore_keeper(const std::string& state);
  // Fine-tuning also evaluates at each epoch's end (besides every finetune.eval_every steps).
  bool eval_due(int64_t step) const override { return eval_each_epoch_ && step % steps_per_epoch_ == 0; }

 protected:
  // Host tensors of the items' micro-batch; tensors[0] must have one row per item.
  virtual MicroBatch make_batch(const std::vector<int64_t>& items) = 0;
  ModelKeeper* keeper_ = nullptr;  // rank 0's (the tasks set it); null on other ranks

 private:
  int64_t next_item();
  int64_t n_, micro_, accum_, rank_, world_, seed_;
  int64_t steps_per_epoch_ = 1;  // optimizer steps in one pass over the n items
  bool eval_each_epoch_ = true;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_, share_;
  size_t cursor_ = 0;
  int64_t micro_index_ = 0;
  int64_t epoch_ = -1;
};

// Optimizer steps in one pass over n items: ceil(n / batch_size).
inline int64_t steps_per_epoch(int64_t n_items, int64_t batch_size) { return (n_items + batch_size - 1) / batch_size; }

// The model's outputs for n items (a dev set, or inputs to predict), on every rank: batches of
// finetune.eval_batch_size in eval mode, without gradients, under the config's precision, split
// over the ranks and gathered (dist/sharded_eval.h; a collective), with a progress line for this
// rank's share (`what`: "SQuAD windows"). `item(i)` is item i's token ids; `rows(batch)` runs
// the model on one batch and returns its [B, row_shape...] rows. Returns [n, row_shape...] in
// `dtype` on the CPU.
torch::Tensor dev_pass(const Prepared& p, torch::nn::Module& model, int64_t n,
                       const std::function<const std::vector<int64_t>&(int64_t)>& item, const char* what,
                       torch::IntArrayRef row_shape, torch::ScalarType dtype, const torch::Device& device,
                       dist::DataParallel& dp, const std::function<torch::Tensor(const Batch&)>& rows);

// Fine-tuning steps per seed: ceil(epochs * steps_per_epoch), warmup a fraction of them; dev
// evaluations every finetune.eval_every steps (the tasks add each epoch's end unless
// finetune.eval_each_epoch is false).
TrainOptions finetune_schedule(const Config& cfg, int64_t n_items);

struct TrainOutcome {
  double final_loss = 0.0;     // mean loss of the last logged window
  int64_t steps = 0;           // optimizer steps taken
  bool stopped_early = false;  // finetune.early_stopping ended the training before its last step
  int64_t tokens_seen = 0;     // at the end of training, all ranks (the final evaluation's row)
  double train_seconds = 0.0;  // the training loop's seconds (the final evaluation's elapsed_s)
};

// Trains `model` on `task` for the fine-tuning schedule with AdamW (train/optim.h) through the
// engine: bf16 autocast per train.precision, the non-finite guard, the progress line, the dev
// evaluations the task asks for, rank 0's seed<N>/metrics.jsonl (training and dev curves).
TrainOutcome train_seed(torch::nn::Module& model, ItemTask& task, const TrainOptions& t, const SeedContext& ctx);

// The final evaluation's row in seed<N>/metrics.jsonl ({"step", "split": "valid", "tokens_seen",
// "elapsed_s", ...fields}, the last two where training ended): the dev curve's last point,
// scored on the final weights whichever model is kept. Rank 0 only.
// None after early stopping: the evaluation that stopped it wrote that step's row already.
void write_final_evaluation(const SeedContext& ctx, const TrainOutcome& trained, const nlohmann::json& fields);

// A task's final evaluation (finish_seed), in parts that run where they must.
struct FinalEvaluation {
  // Every rank together: the dev pass's outputs, split over the ranks (the collective part).
  std::function<EvalOutputs()> outputs;
  // Rank 0: the dev fields of `outputs` (the metrics.jsonl row), with `metric`, the model
  // selection's, among them.
  std::function<nlohmann::json(const EvalOutputs&)> score;
  std::string metric;
  // Rank 0: predictions, results.json and result rows of the kept model's outputs (of optimizer
  // step `kept_step`). results.json records the rows too (result_rows_json), before they are appended.
  std::function<std::vector<eval::ResultRow>(const EvalOutputs&, int64_t kept_step)> record;
};

// results.json's "rows": the seed's result lines (eval::to_json of each), as finish_seed appends
// them to finetune.results_file. results.json is written first and marks the seed finished, so
// it is where `--resume` finds the lines a kill between the two writes kept from the results
// file (resume.h, finished_seed).
nlohmann::json result_rows_json(const std::vector<eval::ResultRow>& rows);

// After a seed's training, on every rank: the dev set scored on the final weights (the curve's
// last row in metrics.jsonl, offered to rank 0's `keeper`); when the keeper holds an earlier
// model (select: best), rank 0 reloads it, every rank takes it from rank 0 and the dev set is
// scored again, so the files describe seed<N>/model/; then rank 0 records them and appends the
// rows to finetune.results_file. Each part of rank 0's is agreed by every rank
// (dist/all_or_none.h): a failure there stops them all at once, not at the next seed's first
// collective. Returns the rows on rank 0, {} elsewhere.
std::vector<eval::ResultRow> finish_seed(const Prepared& p, const SeedContext& ctx, const TrainOutcome& trained,
                                         ModelKeeper* keeper, torch::nn::Module& model, const FinalEvaluation& e);

}  // namespace rpe::finetune
