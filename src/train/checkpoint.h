// Checkpoints: one LibTorch archive per save, <run>/checkpoints/step_<N>.pt, holding
//   model/<param or buffer name>   every parameter and buffer (fp32 master weights)
//   optim/<param>/<field>          optimizer state per parameter: step, exp_avg, exp_avg_sq
//                                  (+ max_exp_avg_sq for AMSGrad); options come from the config
//   optimizer_name, schedule       which optimizer/schedule wrote it (the lr is a function of step)
//   step, loader_epoch, loader_position, tokens_seen, nonfinite_total, nonfinite_in_a_row
//   rng_cpu, rng_cuda_<i>          torch's default CPU generator and each CUDA generator's state
//                                  (masking needs none: it is a function of (seed, epoch, index))
//   config, version                the resolved YAML config and "<version>+<git revision>"
// Each file is written atomically, then a sidecar step_<N>.pt.crc32 ("crc32 <hex> size <bytes>")
// records its checksum; `latest` names the newest one for people. Loading verifies the
// checksum; latest_checkpoint() skips (with a warning) files that are truncated or corrupt.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <string>

#include "data/mlm_dataset.h"

namespace rpe {

struct TrainState {
  int64_t step = 0;  // optimizer steps done (skipped non-finite steps included)
  LoaderCursor cursor;
  int64_t tokens_seen = 0;         // non-pad tokens consumed, all ranks together
  int64_t nonfinite_total = 0;     // steps skipped for a non-finite loss or gradient norm
  int64_t nonfinite_in_a_row = 0;  // of those, the current streak
  std::string optimizer_name, schedule;
};

struct CheckpointContents {
  TrainState state;
  std::string config_yaml;
  std::string version;
};

// Saves model (+ optimizer if given) and returns the file written. Keeps the newest keep_last.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, torch::nn::Module& model,
                                      torch::optim::Optimizer* optimizer, const TrainState& state,
                                      const std::string& config_yaml, int64_t keep_last = 3);

// The newest checkpoint of a run folder whose checksum verifies, or nullopt. Newer files that fail
// the check (or lack a sidecar) are skipped with a warning.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// True when `file` matches its sidecar (size and CRC32); `why` says what failed otherwise.
bool verify_checkpoint(const std::filesystem::path& file, std::string* why = nullptr);

// CRC-32 (IEEE 802.3, the zlib/PNG polynomial) of a whole file, streamed.
uint32_t file_crc32(const std::filesystem::path& file);

// Reads only the config text of a checkpoint (to build the model before loading).
std::string read_checkpoint_config(const std::filesystem::path& file);

// Loads parameters into `model` (shapes must match: UserError naming the tensor otherwise),
// and, if `optimizer` is given, the optimizer state and every RNG state.
CheckpointContents load_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                                   torch::optim::Optimizer* optimizer);

}  // namespace rpe
