// MLM pretraining: data -> model -> the training engine (train/engine.h) -> metrics and
// checkpoints in a run folder.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "config/config.h"
#include "train/engine.h"

namespace rpe {

struct PretrainResult {
  std::filesystem::path run_dir;
  int64_t steps = 0;
  // Mean training loss of the first / last logged window with an update (a resumed run keeps its
  // original first); NaN when every step was skipped (non-finite, fp16 overflows): not 0.
  double first_loss = std::nan("");
  double final_loss = std::nan("");
  double valid_loss = 0.0;   // held-out MLM loss
  double valid_accuracy = 0.0;
  double seconds = 0.0;
};

// Observation points for tests and tools (see EngineHooks).
using PretrainHooks = EngineHooks;

// Trains per `cfg` in `run_dir` (which the caller created or chose to resume). With
// resume=true the latest valid checkpoint in run_dir is loaded and training continues from it
// bitwise exactly. Multi-process when launched by torchrun/Slurm/mpirun (dist/data_parallel.h).
PretrainResult pretrain(const Config& cfg, const std::filesystem::path& run_dir, bool resume,
                        const PretrainHooks& hooks = {});

}  // namespace rpe
