// Checkpoints: one LibTorch archive per save, written atomically, holding the model
// ("model/<param>"), the optimizer, step, loader cursor, RNG state and the resolved
// config (YAML text) plus the library version. <run>/checkpoints/step_<N>.pt, and
// <run>/checkpoints/latest naming the newest complete one.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <string>

#include "data/mlm_dataset.h"

namespace rpe {

struct TrainState {
  int64_t step = 0;  // optimizer steps done
  LoaderCursor cursor;
};

struct CheckpointContents {
  TrainState state;
  std::string config_yaml;
  std::string version;
};

// Saves model (+ optimizer if given) and returns the file written.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, torch::nn::Module& model,
                                      torch::optim::Optimizer* optimizer, const TrainState& state,
                                      const std::string& config_yaml, int64_t keep_last = 3);

// The newest checkpoint of a run folder, or nullopt.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// Reads only the config text of a checkpoint (to build the model before loading).
std::string read_checkpoint_config(const std::filesystem::path& file);

// Loads parameters into `model` (shapes must match: UserError naming the tensor otherwise),
// the optimizer state if `optimizer` is given, and the RNG state.
CheckpointContents load_checkpoint(const std::filesystem::path& file, torch::nn::Module& model,
                                   torch::optim::Optimizer* optimizer);

}  // namespace rpe
