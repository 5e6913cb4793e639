// MLM pretraining loop: data -> model -> AdamW -> metrics/checkpoints in a run folder.
#pragma once
#include <filesystem>

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

// Trains per `cfg` in `run_dir` (which the caller created or chose to resume). With
// resume=true the latest checkpoint in run_dir is loaded and training continues from it.
PretrainResult pretrain(const Config& cfg, const std::filesystem::path& run_dir, bool resume);

}  // namespace rpe
