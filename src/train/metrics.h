// Metrics as JSON lines (metrics.jsonl), one object per logged step or evaluation,
// written with an fsync per line so a crash loses nothing already reported. Also the
// resource figures of the final summary.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace rpe {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  explicit MetricsWriter(std::filesystem::path file) : file_(std::move(file)) {}
  void write(const nlohmann::json& row) const;
  bool enabled() const { return !file_.empty(); }

 private:
  std::filesystem::path file_;
};

// On resume from a checkpoint at `step`: rewrites `file` atomically without the rows of
// later steps (they were lost with the crash and will be redone), so every step appears
// once. A line that is not a JSON object with a "step" (e.g. torn by the crash) is dropped
// too. Returns the number of rows dropped; no file = nothing to do.
int64_t drop_metrics_after(const std::filesystem::path& file, int64_t step);

// The loss of the first training row (no "split", no "event") with a numeric loss, NaN if none:
// a resumed run reports its original first loss in summary.json.
double first_logged_loss(const std::filesystem::path& file);

// "1h02m", "3m20s", "12s" for ETAs.
std::string format_duration(double seconds);

// Peak resident set size of this process in bytes (getrusage), 0 where unknown.
int64_t peak_rss_bytes();
// Peak bytes allocated by LibTorch's CUDA caching allocator on `device`; -1 for CPU devices
// or builds without CUDA.
int64_t peak_device_bytes(const torch::Device& device);

}  // namespace rpe
