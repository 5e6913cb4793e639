// Resuming a fine-tuning run (see resume.h).
#include "finetune/resume.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "dist/all_or_none.h"
#include "dist/replica_check.h"
#include "eval/results.h"
#include "train/run_dir.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/json_text.h"
#include "util/log.h"
#include "util/stop_signals.h"

namespace rpe::finetune {
namespace fs = std::filesystem;

void check_resumable(const fs::path& dir, const Config& cfg) {
  std::error_code ec;
  const std::string name = "--resume: " + dir.string();
  if (fs::exists(dir / "train.log", ec) || fs::exists(dir / "summary.json", ec))
    throw UserError(name + " is a pretraining run folder (train.log, summary.json), not a fine-tuning run's; name "
                    "the fine-tuning run with --run-dir");
  const fs::path file = dir / "config.yaml";
  if (!fs::is_regular_file(file, ec))
    throw UserError(name + " is not a fine-tuning run folder (no config.yaml); name the fine-tuning run with --run-dir");
  // Only how a job runs may differ, as the reproduction scripts' stamps allow (stamps.sh): a
  // job's time limit, how long ranks wait, CPU threads, the all-reduce's buckets, where the
  // pretraining's shards are (fine-tuning reads none), and how often checkpoints are kept.
  static const std::set<std::string> free = {"train.time_limit_min", "train.dist_timeout_s", "train.threads",
                                             "train.bucket_mb", "data.shards", "train.keep_checkpoints",
                                             "finetune.save_every"};
  std::vector<std::string> changes;
  for (auto& change : config_differences(config_from_yaml(read_file(file), file.string()), cfg))
    if (!free.count(change.substr(0, change.find(':')))) changes.push_back(std::move(change));
  if (changes.empty()) return;
  const std::string more = changes.size() > 1 ? " (and " + std::to_string(changes.size() - 1) + " more)" : "";
  throw UserError(name + ": the settings differ from " + file.string() + ", which the run was started with: " +
                  changes.front() + more + "; resume with the command that started it, or start a new run "
                  "(--run-dir, or --overwrite)");
}

namespace {
// The rows seed<N>/results.json records (its "rows": the seed's result lines); none in one of
// before the key. `file` exists.
std::vector<eval::ResultRow> recorded_rows(const fs::path& file) {
  const nlohmann::json j = read_json_file(file);
  std::vector<eval::ResultRow> rows;
  if (!j.is_object() || !j.contains("rows")) return rows;
  if (!j.at("rows").is_array()) throw UserError(file.string() + ": \"rows\" is not a list of result rows");
  for (const auto& row : j.at("rows")) rows.push_back(eval::result_from_json(row, file.string() + " (rows)"));
  return rows;
}

// What tells one result line from another of the same results file: its run (folder, and when
// that run made it: an --overwrite's old lines are of another run), its seed and what it scores
// (task, split, metric). The tables' rows are keyed within that too (eval::current_rows).
std::string line_identity(const eval::ResultRow& r) {
  return dump_json(nlohmann::json{r.run_dir, r.run_started, r.run_id, r.seed, r.task, r.split, r.metric});
}
}  // namespace

std::string resumed_run_started(const fs::path& results_file, const fs::path& dir) {
  std::error_code ec;
  std::string newest;
  // The rows' run_dir is the run folder as base_row writes it (absolute, lexically normal).
  const std::string run = fs::absolute(dir, ec).lexically_normal().string();
  auto consider = [&](const std::vector<eval::ResultRow>& rows) {
    for (const auto& row : rows)
      if (row.run_dir == run) newest = std::max(newest, row.run_started);
  };
  if (fs::is_regular_file(results_file, ec) && fs::file_size(results_file, ec) > 0)
    consider(eval::read_results(results_file));
  // A seed's results.json too: a kill right after it may have kept all of its lines from the
  // results file, which finished_seed puts back with the run_started they were made with.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const fs::path file = entry.path() / "results.json";
    if (fs::is_regular_file(file, ec)) consider(recorded_rows(file));
  }
  return newest.empty() ? eval::utc_now_ns() : newest;
}

bool finished_seed(const SeedContext& ctx, const fs::path& results_file) {
  std::error_code ec;
  const fs::path file = ctx.dir / "results.json";
  if (!fs::exists(file, ec)) return false;
  // Finished; its checkpoints go (a kill between its results and their removal left them).
  remove_tree(ctx.dir / "checkpoints");
  log::info("finetune", "seed {}: finished ({}), skipped", ctx.seed, file.string());
  // results.json is written before the rows are appended (finish_seed): a kill between the two
  // left the results file without some or all of them, which no later run would add.
  const std::vector<eval::ResultRow> recorded = recorded_rows(file);
  if (recorded.empty()) return true;
  std::set<std::string> present;
  if (fs::is_regular_file(results_file, ec) && fs::file_size(results_file, ec) > 0)
    for (const auto& row : eval::read_results(results_file)) present.insert(line_identity(row));
  std::vector<eval::ResultRow> missing;
  for (const auto& row : recorded)
    if (!present.count(line_identity(row))) missing.push_back(row);
  if (missing.empty()) return true;
  eval::append_results(results_file, missing);
  log::info("finetune", "seed {}: {} of its {} result line(s) were missing from {} (the run stopped after its "
            "results.json, before them): appended them from {}", ctx.seed, missing.size(), recorded.size(),
            results_file.string(), file.string());
  return true;
}

void ready_seed_folder(const SeedContext& ctx, bool resume) {
  std::error_code ec;
  // Unfinished and nothing to continue from (stopped before a checkpoint, e.g. killed): redone
  // from its start in an empty folder, so no row or kept model of the first attempt remains.
  if (resume && fs::is_directory(ctx.dir, ec) && !checkpoint_to_resume(ctx.dir, 0)) {
    log::warn("finetune", "seed {}: unfinished, with no checkpoint in {}: starting it over", ctx.seed, ctx.dir.string());
    remove_tree(ctx.dir);
  }
  fs::create_directories(ctx.dir);
}

void stop_between_seeds(const SeedContext& ctx, bool trained_one, double time_limit_min) {
  // A signal that came after the previous seed's training (in its final evaluation, which it let
  // finish) stops the run as one in training does: every rank ends by one signal.
  const int own = StopSignals::requested();
  if (ctx.dp->any(own != 0)) {
    const std::string message = fmt::format("stopped {} before seed {} (the seeds before it finished); {}",
                                            StopSignals::reason(own), ctx.seed, ctx.resume_hint);
    log::info("finetune", "{}", message);
    throw StopRequested(message, StopSignals::ends_by(own));
  }
  if (!trained_one || !ctx.stop_at) return;
  // Each rank reads its own clock, as in the engine: one rank past the limit stops them all.
  if (!ctx.dp->any(std::chrono::steady_clock::now() >= *ctx.stop_at)) return;
  const std::string message = fmt::format("stopped at the time limit (train.time_limit_min {:g}) before seed {} (the "
                                          "seeds before it finished); {}", time_limit_min, ctx.seed, ctx.resume_hint);
  log::info("finetune", "{}", message);
  throw StopRequested(message, 0);  // exit code 75 (cli/main.cpp), as the engine's stop at the limit
}

namespace {
// The checkpoint's state on this rank: the weights, optimizer and random streams loaded.
TrainState load_seed_checkpoint(const fs::path& file, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                const TrainOptions& t, const SeedContext& ctx) {
  TrainState loaded = load_checkpoint(file, model, &optimizer).state;
  if (!loaded.optimizer_name.empty() && loaded.optimizer_name != t.optimizer)
    throw UserError(file.string() + ": written by optimizer '" + loaded.optimizer_name + "' but train.optimizer is '" +
                    t.optimizer + "'");
  // Its data position indexes these items in the order the seed shuffles them: in others it
  // would mean other items (a training file edited in place since).
  if (loaded.data_identity != ctx.data_identity)
    throw UserError(file.string() + ": trained on " + loaded.data_identity + ", but the training items are now " +
                    ctx.data_identity + ": its data position would mean other items (start the run anew: --overwrite)");
  loaded.optimizer_name = t.optimizer;
  loaded.schedule = t.schedule;
  log::info("finetune", "seed {}: resumed from {} at step {} of {}", ctx.seed, file.string(), loaded.step, t.max_steps);
  return loaded;
}
}  // namespace

TrainState seed_start_state(torch::nn::Module& model, torch::optim::Optimizer& optimizer, ItemTask& task,
                            const TrainOptions& t, const SeedContext& ctx) {
  auto& dp = *ctx.dp;
  TrainState state = dist::all_or_none(dp, "loading seed " + std::to_string(ctx.seed) + "'s checkpoint", [&] {
    TrainState s;
    s.optimizer_name = t.optimizer;
    s.schedule = t.schedule;
    s.data_identity = ctx.data_identity;
    const auto file = ctx.resume ? checkpoint_to_resume(ctx.dir, t.save_every) : std::nullopt;
    if (file) s = load_seed_checkpoint(*file, model, optimizer, t, ctx);
    if (ctx.chief()) task.restore_keeper(s.task_state);
    return s;
  });
  restore_rank_device_rng(state, dp.rank(), dp.world(), ctx.device);  // multi-GPU: each rank's own dropout stream
  dist::require_same_on_every_rank(dp, {{"the step seed " + std::to_string(ctx.seed) + " resumes from", state.step}});
  return state;
}

}  // namespace rpe::finetune
