// One fine-tuning seed through the engine (see seed_run.h).
#include "finetune/seed_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "dist/all_or_none.h"
#include "dist/rank0_only.h"
#include "dist/sharded_eval.h"
#include "eval/results.h"
#include "finetune/resume.h"
#include "train/metrics.h"
#include "train/optim.h"
#include "train/precision.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe::finetune {

ItemTask::ItemTask(int64_t n_items, const TrainOptions& t, int64_t seed, int64_t rank, int64_t world,
                   bool eval_each_epoch)
    : n_(n_items),
      accum_(t.grad_accum),
      rank_(rank),
      world_(world),
      seed_(seed),
      eval_each_epoch_(eval_each_epoch),
      rng_(static_cast<uint64_t>(seed)) {
  require(n_ > 0, "fine-tuning: no training examples");
  require(t.grad_accum >= 1, "train.grad_accum must be at least 1");
  micro_ = micro_batch_size(t, world_);
  steps_per_epoch_ = steps_per_epoch(n_, t.batch_size);
}

int64_t ItemTask::next_item() {
  if (cursor_ >= order_.size()) {  // new epoch: reshuffle
    order_.resize(static_cast<size_t>(n_));
    std::iota(order_.begin(), order_.end(), 0);
    std::shuffle(order_.begin(), order_.end(), rng_);
    cursor_ = 0;
    ++epoch_;
  }
  return order_[cursor_++];
}

void ItemTask::restore(const LoaderCursor& cursor) {
  // A fresh run's cursor {0, 0} gives the stream from its start: epoch 0's order, none of it taken.
  rng_.seed(static_cast<uint64_t>(seed_));
  order_.resize(static_cast<size_t>(n_));
  for (int64_t e = 0; e <= cursor.epoch; ++e) {  // as next_item draws each epoch's order
    std::iota(order_.begin(), order_.end(), 0);
    std::shuffle(order_.begin(), order_.end(), rng_);
  }
  require(cursor.position >= 0 && cursor.position <= n_, "fine-tuning: a data position past its epoch's items");
  cursor_ = static_cast<size_t>(cursor.position);
  epoch_ = cursor.epoch;
  micro_index_ = 0;  // checkpoints are taken at optimizer steps' ends
  share_.clear();
}

void ItemTask::restore_keeper(const std::string& state) {
  if (keeper_ && !state.empty()) keeper_->restore(nlohmann::json::parse(state));
}

MicroBatch ItemTask::next_batch() {
  if (micro_index_ == 0) {  // a new optimizer step: draw every rank's items, keep this rank's share
    share_.clear();
    const int64_t per_rank = micro_ * accum_;
    for (int64_t r = 0; r < world_; ++r)
      for (int64_t i = 0; i < per_rank; ++i) {
        const int64_t item = next_item();
        if (r == rank_) share_.push_back(item);
      }
  }
  const auto begin = share_.begin() + micro_index_ * micro_;
  const std::vector<int64_t> items(begin, begin + micro_);
  micro_index_ = (micro_index_ + 1) % accum_;
  MicroBatch b = make_batch(items);
  b.cursor = {epoch_, static_cast<int64_t>(cursor_)};
  return b;
}

torch::Tensor ItemTask::count(const MicroBatch& batch) {
  const auto& rows = batch.tensors.at(0);
  return torch::full({}, static_cast<double>(rows.size(0)), torch::TensorOptions(torch::kDouble).device(rows.device()));
}

namespace {
// A progress line for long evaluations and predictions: at most about ten per pass, none
// within kQuiet of the pass's start or the last line (a pass of seconds logs none), with rate and ETA.
class BatchProgress {
 public:
  static constexpr double kQuiet = 5.0;  // seconds
  BatchProgress(const char* what, size_t items, size_t batch)
      : what_(what), items_(items), every_(std::max<size_t>(1, (items + batch - 1) / batch / 10)) {}
  // After each batch, with its items.
  void done(size_t items) {
    done_ += items;
    if (++batches_ % every_ != 0 || done_ >= items_) return;
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - last_).count() < kQuiet) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = static_cast<double>(done_) / std::max(secs, 1e-9);
    log::info("eval", "{}: {}/{} | {:.0f}/s | ETA {}", what_, done_, items_, rate,
              format_duration(static_cast<double>(items_ - done_) / std::max(rate, 1e-9)));
  }

 private:
  const char* what_;
  size_t items_, every_, batches_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
};
}  // namespace

torch::Tensor dev_pass(const Prepared& p, torch::nn::Module& model, int64_t n,
                       const std::function<const std::vector<int64_t>&(int64_t)>& item, const char* what,
                       torch::IntArrayRef row_shape, torch::ScalarType dtype, const torch::Device& device,
                       dist::DataParallel& dp, const std::function<torch::Tensor(const Batch&)>& rows) {
  const int64_t batch = p.rc.cfg.finetune.eval_batch_size;
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(device, p.rc.cfg.train.precision);
  BatchProgress progress(what, static_cast<size_t>(dist::items_of_rank(dp, n, batch)), static_cast<size_t>(batch));
  auto out = dist::gather_batch_rows(dp, n, batch, row_shape, dtype, [&](int64_t b, int64_t e) {
    std::vector<const std::vector<int64_t>*> seqs;
    for (int64_t i = b; i < e; ++i) seqs.push_back(&item(i));
    auto r = rows(batch_of(p, seqs, device));
    progress.done(static_cast<size_t>(e - b));
    return r;
  });
  model.train(was_training);
  return out;
}

TrainOptions finetune_schedule(const Config& cfg, int64_t n_items) {
  TrainOptions t = cfg.train;
  const int64_t per_epoch = steps_per_epoch(n_items, t.batch_size);
  t.max_steps = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cfg.finetune.epochs * static_cast<double>(per_epoch))));
  t.warmup_steps = static_cast<int64_t>(std::llround(cfg.finetune.warmup_fraction * static_cast<double>(t.max_steps)));
  t.eval_every = cfg.finetune.eval_every;  // and at each epoch's end (the task's eval_due) if eval_each_epoch
  // Checkpoints are for `finetune --resume` only, and a seed's go when it ends: two at most (the
  // newest, and the one before should the newest fail its checksum), each ~3x the model.
  t.save_every = cfg.finetune.save_every;
  t.keep_checkpoints = std::min<int64_t>(t.keep_checkpoints, 2);
  return t;
}

TrainOutcome train_seed(torch::nn::Module& model, ItemTask& task, const TrainOptions& t, const SeedContext& ctx) {
  auto optimizer = make_adamw(model, t);
  TrainState state = seed_start_state(model, *optimizer, task, t, ctx);  // step 0, or a checkpoint's (--resume)
  ctx.dp->broadcast_parameters(model);  // every rank starts from rank 0's head initialisation
  const int64_t world = ctx.dp->world();
  log::info("finetune", "seed {}: {} steps, batch {} ({} x {} micro-batches x {} rank{}), lr {}, warmup {}, {}", ctx.seed,
            t.max_steps, t.batch_size, t.batch_size / (t.grad_accum * world), t.grad_accum, world, world == 1 ? "" : "s",
            t.lr, t.warmup_steps, t.precision);
  EngineSetup setup;
  setup.train = t;
  setup.device = ctx.device;
  setup.dp = ctx.dp;
  setup.log_tag = "finetune";
  // Checkpoints in seed<N>/ (every rank names it; rank 0 writes), and a signal or the time
  // limit stops the run after a step with one, for `finetune --resume` to continue.
  setup.run_dir = ctx.dir;
  setup.config_yaml = ctx.config_yaml;
  setup.stop_on_signals = true;
  setup.stop_at = ctx.stop_at;
  setup.resume_hint = ctx.resume_hint;
  // Early stopping ended the training before the run stopped (in its final evaluation): done.
  const bool stopped_early = ModelKeeper::stopped_in(state.task_state);
  dist::all_or_none(*ctx.dp, "opening " + (ctx.dir / "metrics.jsonl").string(), [&] {
    if (ctx.chief()) continue_metrics(ctx.dir / "metrics.jsonl", state, state.step >= t.max_steps && !stopped_early, setup);
  });
  if (stopped_early) {
    model.eval();
    return TrainOutcome{setup.last_loss, state.step, true, state.tokens_seen, state.train_seconds};
  }
  Engine engine(std::move(setup), model, *optimizer, task);
  const EngineResult r = engine.run(state);
  model.eval();
  return TrainOutcome{r.final_loss, r.state.step, r.stopped_early, r.state.tokens_seen, r.state.train_seconds};
}

nlohmann::json result_rows_json(const std::vector<eval::ResultRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) out.push_back(eval::to_json(r));
  return out;
}

void write_final_evaluation(const SeedContext& ctx, const TrainOutcome& trained, const nlohmann::json& fields) {
  if (trained.stopped_early) return;
  MetricsWriter(ctx.dir / "metrics.jsonl").write_evaluation(trained.steps, trained.tokens_seen, trained.train_seconds, fields);
}

std::vector<eval::ResultRow> finish_seed(const Prepared& p, const SeedContext& ctx, const TrainOutcome& trained,
                                         ModelKeeper* keeper, torch::nn::Module& model, const FinalEvaluation& e) {
  auto& dp = *ctx.dp;
  const std::string what = "evaluating seed " + std::to_string(ctx.seed);
  EvalOutputs outputs = e.outputs();
  // Rank 0's work here (scoring, the kept model's write, predictions and results) waits on its
  // heartbeat (dist/rank0_only.h), not inside a collective: a slow shared file system may take
  // longer than train.dist_timeout_s to take a model, as it may a checkpoint.
  bool kept_earlier = false;
  dist::rank0_only(dp, what, [&] {
    const nlohmann::json fields = e.score(outputs);
    write_final_evaluation(ctx, trained, fields);
    keeper->offer(trained.steps, fields.at(e.metric).get<double>(), /*final=*/true, model);
    kept_earlier = keeper->kept().step != trained.steps;
  });
  const bool earlier_kept = dp.any(kept_earlier);
  if (earlier_kept) {  // score the kept model, so that the files describe it
    dist::all_or_none(dp, "reloading seed " + std::to_string(ctx.seed) + "'s kept model", [&] {
      if (ctx.chief()) load_saved_weights(read_saved_model(keeper->dir()), model);
    });
    dp.broadcast_parameters(model);
    outputs = e.outputs();
  }
  std::vector<eval::ResultRow> rows;  // rank 0's
  dist::rank0_only(dp, what, [&] {
    rows = e.record(outputs, keeper->kept().step);
    eval::append_results(p.rc.cfg.finetune.results_file, rows);
  });
  return rows;
}

}  // namespace rpe::finetune
