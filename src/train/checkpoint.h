// Checkpoints: one LibTorch archive per save, <run>/checkpoints/step_<N>.pt, holding
//   model/<param or buffer name>   every parameter and buffer (fp32 master weights)
//   optim/<param>/<field>          optimizer state per parameter: step, exp_avg, exp_avg_sq
//                                  (+ max_exp_avg_sq for AMSGrad); options come from the config
//   optimizer_name, schedule       which optimizer/schedule wrote it (the lr is a function of step)
//   step, loader_epoch, loader_position, tokens_seen, nonfinite_total, nonfinite_in_a_row
//   world_sizes                    [n, 2] int64: where each stretch of ranks began (TrainState)
//   rng_cpu, rng_device            torch's default CPU generator and, on a GPU, the training
//                                  device's (dropout), restored into each rank's own device's
//                                  (masking needs none: it is a function of (seed, epoch, index))
//   task_state                     the task's own state (Task::saved_state), where it has one
//   config, version                the resolved YAML config and "<version>+<git revision>"
// Each file carries its own CRC-32 and is written atomically (train/checkpoint_file.h); `latest`
// names the newest one for people. Every load verifies the checksum first and reads the file into
// host memory, whichever device wrote it; latest_checkpoint() skips (with a warning) files that
// are truncated or corrupt. A model-only file (import-hf, swap-method's source) has the same
// layout with step 0 and no optimizer, loader or RNG state.
// Finding a run's checkpoint and preparing run folders: train/run_dir.h.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/mlm_dataset.h"
#include "train/checkpoint_file.h"

namespace rpe {
namespace dist {
class DataParallel;
}

struct TrainState {
  int64_t step = 0;  // optimizer steps done (skipped non-finite steps included)
  LoaderCursor cursor;
  int64_t tokens_seen = 0;         // non-pad tokens consumed, all ranks together
  int64_t nonfinite_total = 0;     // steps skipped for a non-finite loss or gradient norm
  int64_t nonfinite_in_a_row = 0;  // of those, the current streak
  double loss_scale = 0.0;         // fp16: the dynamic loss scale (0: none, another precision)
  int64_t loss_scale_streak = 0;   // fp16: overflow-free steps since the scale last changed
  std::vector<double> log_window;  // the log window up to `step` (LogWindow::snapshot); empty: none
  // Training-loop time up to `step`, every process of the run (resumes add up). Not in the
  // checkpoint (identical runs write identical files): a resume reads it from metrics.jsonl.
  double train_seconds = 0.0;
  // What `cursor` counts in: the training sequences, their tokens, length, packing and the
  // tokenizer ("" in checkpoints older than the field). Resume refuses other data.
  std::string data_identity;
  std::string optimizer_name, schedule;
  // The number of ranks that trained each stretch of the run: {steps done when it began, world
  // size}, oldest first; a resume on another number of ranks begins a stretch, one on as many
  // continues the last (so that such a run writes an uninterrupted run's files, and identical
  // runs identical files). Empty in a checkpoint older than the field (note_world_size).
  std::vector<std::pair<int64_t, int64_t>> world_sizes;
  // Multi-GPU runs: every rank's device stream, [W, n] uint8, a row per rank (else undefined).
  // The ranks seed alike, yet SDPA draws dropout differently in its flash kernel (a batch
  // without padding) than in its masked ones, so their streams can part: each resumes its own.
  torch::Tensor rng_device_ranks;
  // The task's own state at `step` (Task::saved_state; fine-tuning: the model keeper's best score
  // and early-stopping count), written with the weights so that the two always match; "" = none.
  std::string task_state;
};

// Records in state.world_sizes that the steps from `from_step` (where this process began) to
// state.step ran on `world` ranks; nothing while no step has (a restart with no step left
// trains nothing). Idempotent: every save of a process calls it.
void note_world_size(TrainState& state, int64_t from_step, int64_t world);

// The random streams a training step draws from (dropout): torch's default CPU generator and,
// on a GPU, the training device's, as host tensors (reading them needs no device sync).
struct RandomStates {
  torch::Tensor cpu, device;  // undefined: not captured / not a CUDA run
  torch::Device where = torch::kCPU;
  static RandomStates capture(const torch::Device& device);
  void restore() const;  // sets the captured streams back; nothing for an undefined one
};

// Every rank's `row` (a uint8 vector of one length on every rank) in rank order: [W, n]; [1, n]
// in a single process. A collective: every rank calls it at the same point.
torch::Tensor every_rank_row(dist::DataParallel& dp, const torch::Tensor& row);
// This rank's own device stream from state.rng_device_ranks, where the checkpoint has one per
// rank of this world size (load_checkpoint set rank 0's, which a changed world size keeps).
void restore_rank_device_rng(const TrainState& state, int64_t rank, int64_t world, const torch::Device& device);

struct CheckpointContents {
  TrainState state;
  std::string config_yaml;
  std::string version;
};

// The one checkpoint writer: every checkpoint and model file is written here. Parameters and
// buffers of `model`, the optimizer state if `optimizer` is given, the training state (counters,
// loader cursor, RNG states) if `state` is given, else step 0 only; then config and version.
// Atomic, checksummed; UserError naming `file` on a write error (a full disk included).
void write_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                      torch::optim::Optimizer* optimizer, const TrainState* state, const std::string& config_yaml);

// <run_dir>/checkpoints/step_<N>.pt (N = step, 8 digits): where save_checkpoint writes step N.
std::filesystem::path checkpoint_file(const std::filesystem::path& run_dir, int64_t step);

// Writes checkpoint_file(run_dir, state.step), points `latest` at it and
// keeps the newest keep_last. Returns the file written.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, torch::nn::Module& model,
                                      torch::optim::Optimizer* optimizer, const TrainState& state,
                                      const std::string& config_yaml, int64_t keep_last = 3);

// The step_<N>.pt files of a run folder's checkpoints/, oldest first, verified or not.
std::vector<std::pair<int64_t, std::filesystem::path>> list_checkpoints(const std::filesystem::path& run_dir);

// The newest checkpoint of a run folder whose checksum verifies, or nullopt. Newer files that fail
// the check are skipped with a warning.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// What a checkpoint says of itself, read (and verified) without its tensors: the config text (to
// build the model before loading) and the tokenizer it was pretrained with, the CRC-32 of its
// pieces (tokenizer_crc32) from its data identity; none for files without one (imports,
// fine-tuned models, checkpoints older than the identity).
struct CheckpointHeader {
  std::string config;
  std::optional<uint32_t> tokenizer_crc;
};
CheckpointHeader read_checkpoint_header(const std::filesystem::path& file);
// Its config text alone.
std::string read_checkpoint_config(const std::filesystem::path& file);

// Verifies the file, loads parameters into `model` (shapes must match: UserError naming the
// tensor otherwise) and, if `optimizer` is given, the optimizer state and every RNG state.
CheckpointContents load_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                                   torch::optim::Optimizer* optimizer);

}  // namespace rpe
