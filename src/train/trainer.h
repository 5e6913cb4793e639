// MLM pretraining: data -> model -> the training engine (train/engine.h) -> metrics and
// checkpoints in a run folder.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "config/config.h"
#include "train/engine.h"
#include "train/run_dir.h"

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
  int64_t parameters = 0;           // the model's, all of them
  int64_t position_parameters = 0;  // the position method's share (the cost table's column)
};

// Observation points for tests and tools (see EngineHooks).
using PretrainHooks = EngineHooks;

// Trains per `cfg` in `run_dir`, which rank 0 readies once every rank has joined
// (prepare_run_dir: an existing run is refused without folder.resume or folder.overwrite, and
// the refusal stops every rank at once). With folder.resume the latest valid checkpoint in
// run_dir is loaded and training continues from it bitwise exactly. A new run that fails on its
// inputs before its first checkpoint leaves no folder behind. Multi-process when launched by
// torchrun/Slurm/mpirun (dist/data_parallel.h); a start-up step that fails on one rank stops
// them all with its reason (dist/all_or_none.h).
PretrainResult pretrain(const Config& cfg, const std::filesystem::path& run_dir, const RunDirRequest& folder,
                        const PretrainHooks& hooks = {});

}  // namespace rpe
