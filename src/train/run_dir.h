// Run folders and the checkpoints in them, in one place: turning what a user names (a run
// folder or a checkpoint file) into the file to load, choosing the checkpoint that --resume
// continues from, and creating, refusing or replacing the folder of a new run.
//   <run>/config.yaml, tokenizer.model, train.log, metrics.jsonl, summary.json
//   <run>/checkpoints/step_<N>.pt (+ `latest`), see train/checkpoint.h
#pragma once
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace rpe::log {
class FileSink;
}  // namespace rpe::log

namespace rpe {

struct CheckpointSource {
  std::filesystem::path checkpoint;  // the file to load
  std::filesystem::path run_dir;     // its run (tokenizer.model, config.yaml): the folder named,
                                     // <run> for <run>/checkpoints/x.pt, else the file's folder
};

// `what` is a run folder (its newest checkpoint that verifies; its checkpoints/ folder works
// too) or a checkpoint file (verified when it is loaded). UserError, prefixed with `label`
// ("--init") and `what`, when it does not exist or holds no usable checkpoint (saying why).
CheckpointSource resolve_checkpoint(const std::string& what, const std::string& label = "");

struct RunDirRequest {
  bool resume = false;     // --resume: continue the run in an existing folder
  bool overwrite = false;  // --overwrite: delete an existing folder first
  bool can_resume = true;  // false for commands without --resume (the message then offers --overwrite only)
  std::vector<std::filesystem::path> inputs = {};  // what the run reads: --overwrite never deletes one
};

// Readies `dir` for a run and locks it for this process's lifetime (flock on the folder: a
// second process on the same run stops at once); true when an existing run is to be continued
// (--resume on a folder with content). UserError for --resume with --overwrite, a path that is
// not a folder, an existing non-empty folder without --resume/--overwrite, a run in use by
// another process, and a folder that cannot be created or written. --overwrite deletes the old
// folder (remove_tree, not fs::remove_all) only when it is an rpe-train run folder (its log, or
// config.yaml with metrics or checkpoints) that holds neither the working directory nor an input.
bool prepare_run_dir(const std::filesystem::path& dir, const RunDirRequest& request);

// prepare_run_dir's refusals only, nothing created or deleted: for a command that checks its
// output before long work and creates the folder after it.
void check_run_dir(const std::filesystem::path& dir, const RunDirRequest& request);

// Removes the folder of a new run that failed on its inputs, so the corrected command is not
// refused as "already exists": the folder itself when prepare_run_dir created it in this
// process, else only what it holds (an empty folder a job script made, a symlink to a scratch
// disk, a run --overwrite emptied: left as found, empty). A failure to remove it is logged, not
// thrown: the input error being handled is the one to report.
void discard_new_run_folder(const std::filesystem::path& dir);

// The end of a run (pretraining, fine-tuning) that stopped on `e`: a bad-input stop (UserError)
// of a new run with nothing of a run in it (`nothing_kept`: the caller's rank 0 alone says so)
// removes its folder (discard_new_run_folder), so the corrected command is not refused as
// "already exists"; any other keeps the folder and ends its log (`sink`) with the error, without
// LibTorch's backtrace, as main prints it.
void close_failed_run(const std::exception& e, bool nothing_kept, log::FileSink& sink, const std::filesystem::path& dir);

// The checkpoint that --resume continues from: the newest one that verifies (newer broken ones
// are skipped with a warning). nullopt when the run never wrote one (stopped before its first
// save): it starts again from step 0, redoing the metrics rows up to that point. UserError when
// checkpoints exist and none verifies, or when the run shows that it had one that is gone:
// checkpoints/latest exists, or metrics.jsonl has a row past the first save (step > save_every,
// save_every > 0; with save_every 0 the only save is the final one).
std::optional<std::filesystem::path> checkpoint_to_resume(const std::filesystem::path& run_dir, int64_t save_every);

// The newest finished pretraining run among the folders in `runs`: one with summary.json (written
// when a run completes) and at least one checkpoint, newest by summary.json's time. nullopt when
// there is none (or `runs` does not exist).
std::optional<std::filesystem::path> newest_finished_run(const std::filesystem::path& runs);

}  // namespace rpe
