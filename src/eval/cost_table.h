// The cost table of a reproduction: per pretraining run, the parameters its position method
// adds, throughput, peak memory, steps, wall time and held-out MLM loss. Read from the run
// folder: summary.json (required: the run has finished; its parameter counts), metrics.jsonl
// (tokens/s per logging window) and, for summaries written before they held parameter counts,
// train.log (the "<total>M parameters, <n> in position method" line, optional).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "eval/text_table.h"

namespace rpe::eval {

// A logged training window: the step it ended at (0 when the row has none) and its tokens/s
// (every rank's tokens together).
struct SpeedWindow {
  int64_t step = 0;
  double tokens_per_s = 0;
};

// Steps first_step..last_step ran on `world` ranks (nullopt: not recorded, a run begun before
// summaries named it). summary.json's world_sizes, or its world_size for the whole run.
struct RankStretch {
  int64_t first_step = 0, last_step = 0;
  std::optional<int64_t> world;
};

struct RunCost {
  std::string method;  // summary.json "method" (else the folder name)
  std::string run;     // the run folder's name
  std::optional<int64_t> position_params;
  std::optional<double> total_params_m;  // millions
  std::vector<SpeedWindow> tokens_per_s;  // training windows in log order (held-out rows excluded)
  std::vector<RankStretch> ranks;         // empty when summary.json names no world size
  int64_t peak_device_bytes = 0, peak_rss_bytes = 0;
  std::optional<int64_t> steps;
  double wall_s = 0;
  std::optional<double> valid_loss;  // null in summary.json when the loss was not finite
};

// UserError naming the file (summary.json missing or malformed, metrics.jsonl missing or a
// malformed line, a field of the wrong type).
RunCost read_run_cost(const std::filesystem::path& run_dir);

// Table "cost": one row per run, in the given order. tokens/s is the median over the windows
// after the first (which includes start-up; the only one when there is one), one median per
// number of ranks when a resumed run changed it; tokens/s per rank divides each window by the
// ranks it ran on, so runs on different numbers of GPUs compare; peak memory is rank 0's,
// the device's when the run measured one, else the process's resident set.
TextTable cost_table(const std::vector<RunCost>& runs);

}  // namespace rpe::eval
