// MLM pretraining loop: data -> model -> AdamW -> metrics/checkpoints in a run folder.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <functional>

#include "config/config.h"

namespace rpe {

struct PretrainResult {
  std::filesystem::path run_dir;
  int64_t steps = 0;
  double first_loss = 0.0;   // mean training loss of the first logged window
  double final_loss = 0.0;   // mean training loss of the last logged window
  double valid_loss = 0.0;   // held-out MLM loss
  double valid_accuracy = 0.0;
  double seconds = 0.0;
};

// Observation points for tests and tools; all optional.
struct PretrainHooks {
  // Sees (and may replace, e.g. by NaN) each micro-batch's loss before backward; step is 0-based.
  std::function<void(int64_t step, torch::Tensor& loss)> on_loss;
  // After each optimizer step (1-based count) with that step's MLM loss over all ranks.
  std::function<void(int64_t step, double loss)> on_step;
};

// Trains per `cfg` in `run_dir` (which the caller created or chose to resume). With
// resume=true the latest valid checkpoint in run_dir is loaded and training continues from it
// bitwise exactly. Multi-process when launched by torchrun/Slurm/mpirun (dist/data_parallel.h).
PretrainResult pretrain(const Config& cfg, const std::filesystem::path& run_dir, bool resume,
                        const PretrainHooks& hooks = {});

}  // namespace rpe
