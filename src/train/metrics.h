// Metrics as JSON lines (metrics.jsonl), one object per logged step or evaluation,
// written with an fsync per line so a crash loses nothing already reported.
#pragma once
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

// "1h02m", "3m20s", "12s" for ETAs.
std::string format_duration(double seconds);

}  // namespace rpe
