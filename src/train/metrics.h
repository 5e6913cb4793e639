// Metrics as JSON lines (metrics.jsonl), one object per logged step or evaluation,
// written with an fsync per line so a crash loses nothing already reported. Also the
// resource figures of the final summary.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <utility>
#include <vector>

namespace rpe {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  explicit MetricsWriter(std::filesystem::path file) : file_(std::move(file)) {}
  void write(const nlohmann::json& row) const;
  // An evaluation's row: {"step": step, "split": "valid", "tokens_seen", "elapsed_s", ...fields}
  // (the dev / held-out curve). tokens_seen and elapsed_s mean what they mean in training rows
  // (tokens consumed by all ranks; the training loop's seconds, resumes added up), taken when
  // the evaluation began, so that the curve can be drawn against tokens or time as well.
  void write_evaluation(int64_t step, int64_t tokens_seen, double elapsed_s, const nlohmann::json& fields) const;
  bool enabled() const { return !file_.empty(); }

 private:
  std::filesystem::path file_;
};

// On resume from a checkpoint at `step`: rewrites `file` atomically without the rows of
// later steps (they were lost with the crash and will be redone), so every step appears
// once. A line that is not a JSON object with a "step" (e.g. torn by the crash) is dropped
// too. With `evaluations_at_step` the evaluation rows ("split") of `step` itself go as well:
// the final evaluation runs after the final checkpoint, so a run resumed from that checkpoint
// redoes it. Returns the number of rows dropped; no file = nothing to do.
int64_t drop_metrics_after(const std::filesystem::path& file, int64_t step, bool evaluations_at_step = false);

// The losses of the first and the last training rows (no "split", no "event") with a numeric
// loss, NaN if none: a resumed run reports its original first loss in summary.json, and one
// resumed from its final checkpoint (no step left to log) the last loss it logged. `elapsed_s`:
// the largest of any row's (training or evaluation; 0 if none), the training time a resumed run
// goes on from. Every row kept was written before the checkpoint, and an evaluation row is
// written after its step's training row: its time counts, or the resumed rows' elapsed_s would
// start below it.
struct LoggedLosses {
  double first = std::nan("");
  double last = std::nan("");
  double elapsed_s = 0.0;
};
LoggedLosses logged_losses(const std::filesystem::path& file);

// summary.json's world_sizes: the ranks that trained each stretch of a run's `steps`, from the
// stretches' starts {steps done when it began, world size} (TrainState::world_sizes), as
// 1-based steps the way metrics.jsonl counts them: e.g. [{"first_step": 1, "last_step": 6,
// "world_size": 2}, {"first_step": 7, "last_step": 10, "world_size": 1}] for 6 steps on 2 ranks
// resumed by one process (world_size, the processes of the last start, hides such a change).
// Steps before the first start (a checkpoint older than the record) have world_size null.
nlohmann::json world_size_stretches(const std::vector<std::pair<int64_t, int64_t>>& starts, int64_t steps);

// "3d02h", "1h02m", "3m20s", "12s" for ETAs.
std::string format_duration(double seconds);

// FLOP/s for the progress line with three significant digits: "142 TFLOP/s", "3.15 TFLOP/s",
// "86.2 GFLOP/s" (a CPU), "?" when not finite.
std::string flops_text(double flops_per_s);

// sum / count to `decimals` places for the progress line, or "none" when nothing was counted
// (an accuracy of a window whose batches masked no token, the loss and gradient norm of a
// window whose steps were all skipped as non-finite): a mean of nothing is no number, never "nan".
std::string mean_text(double sum, double count, int decimals);

// Peak resident set size of this process in bytes (getrusage), 0 where unknown.
int64_t peak_rss_bytes();
// Peak bytes allocated by LibTorch's CUDA caching allocator on `device`; -1 for CPU devices
// or builds without CUDA.
int64_t peak_device_bytes(const torch::Device& device);

}  // namespace rpe
