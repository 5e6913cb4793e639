// `rpe-train finetune ... --resume`: a fine-tuning run that was stopped (a signal, the time
// limit, a kill) continues in its folder as if it had not been. The run folder must be a
// fine-tuning run's, made with the same settings (its config.yaml); a seed with
// seed<N>/results.json finished and is skipped (its result lines are in finetune.results_file
// already, or are put back from results.json where a kill kept them out); an unfinished one
// continues from its newest valid checkpoint (seed<N>/checkpoints/, written when the run was
// stopped and every finetune.save_every steps: weights, optimizer, lr schedule position, data
// position, log window and the model keeper's state), or starts over in its folder when it has none.
#pragma once
#include <filesystem>
#include <string>

#include "config/config.h"
#include "finetune/seed_run.h"
#include "train/checkpoint.h"

namespace rpe::finetune {

// Rank 0, before the inputs are read: UserError (one line, naming the folder or the key) when `dir`
// is no fine-tuning run folder (a pretraining run's; one without config.yaml) or when `cfg`
// differs from its config.yaml (config_differences; the first key that differs is named). Keys
// of how a job runs may differ: train.time_limit_min, train.dist_timeout_s, train.threads,
// train.bucket_mb, data.shards, train.keep_checkpoints, finetune.save_every.
void check_resumable(const std::filesystem::path& dir, const Config& cfg);

// The run_started of the run in `dir` (its result rows' in `results_file` and in its seeds'
// results.json, the newest), so that the rows a resumed run adds are of the same run as those of
// the seeds before; now (eval::utc_now_ns) when it has none yet.
std::string resumed_run_started(const std::filesystem::path& results_file, const std::filesystem::path& dir);

// Rank 0, before a seed of a resumed run: true for a seed that finished (seed<N>/results.json).
// Its checkpoints are removed if a kill left them, and the result rows its results.json records
// ("rows", seed_run.h) that `results_file` lacks (a kill between the two writes) are appended
// there, with a line saying so; rows it has already are not added again. A results.json of before
// "rows" is taken as it is (skipped). UserError naming the file when results.json is not JSON.
bool finished_seed(const SeedContext& ctx, const std::filesystem::path& results_file);

// Rank 0, before an unfinished seed: its folder made ready. With `resume`, an unfinished seed
// without a checkpoint to resume from starts over: its folder (metrics rows, a kept model) is emptied.
void ready_seed_folder(const SeedContext& ctx, bool resume);

// Every rank, before each seed it would train: when this or another rank was asked to stop by a
// signal (StopSignals, held over the seeds: one that came in the previous seed's final
// evaluation), or, after the first seed this process trained (`trained_one`), is past
// ctx.stop_at (train.time_limit_min), the run stops as the engine's stop does (StopRequested:
// ended by that signal, or exit code 75 at the time limit; the line saying where it stopped and
// what continues it), before the seed has a folder, so `--resume` starts it afresh. (The time
// limit only once a seed was trained: a restart whose startup outlasted it still gets on.) A
// collective: every rank calls it at the same point.
void stop_between_seeds(const SeedContext& ctx, bool trained_one, double time_limit_min);

// Every rank: the training state a seed starts from. Step 0, or with ctx.resume the seed's
// newest valid checkpoint loaded into `model` and `optimizer` (weights, optimizer state, random
// streams) and the model keeper's state into `task`'s (rank 0). UserError when the checkpoint
// trained on other items (ctx.data_identity) or with another optimizer. The ranks must agree on
// the step (a stale copy of the folder on one node stops them all).
TrainState seed_start_state(torch::nn::Module& model, torch::optim::Optimizer& optimizer, ItemTask& task,
                            const TrainOptions& t, const SeedContext& ctx);

}  // namespace rpe::finetune
