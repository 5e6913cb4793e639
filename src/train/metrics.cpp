// JSON-lines metrics and peak-memory figures.
#include "train/metrics.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "util/atomic_file.h"

#if __has_include(<c10/cuda/CUDACachingAllocator.h>) && defined(USE_C10D_NCCL)
#define RPE_HAVE_CUDA_ALLOCATOR 1
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace rpe {

void MetricsWriter::write(const nlohmann::json& row) const {
  if (!file_.empty()) append_line_synced(file_, row.dump());
}

void MetricsWriter::write_evaluation(int64_t step, int64_t tokens_seen, double elapsed_s,
                                     const nlohmann::json& fields) const {
  nlohmann::json row = {{"step", step}, {"split", "valid"}, {"tokens_seen", tokens_seen}, {"elapsed_s", elapsed_s}};
  row.update(fields);
  write(row);
}

int64_t drop_metrics_after(const std::filesystem::path& file, int64_t step, bool evaluations_at_step) {
  if (!std::filesystem::exists(file)) return 0;
  std::istringstream in(read_file(file));
  std::string line, kept;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool has_step = row.is_object() && row.contains("step") && row["step"].is_number_integer();
    const int64_t at = has_step ? row["step"].get<int64_t>() : 0;
    const bool keep = has_step && (at < step || (at == step && !(evaluations_at_step && row.contains("split"))));
    if (keep) kept += line + "\n";
    else ++dropped;
  }
  if (dropped > 0) write_file_atomic(file, kept);
  return dropped;
}

LoggedLosses logged_losses(const std::filesystem::path& file) {
  LoggedLosses out;
  if (!std::filesystem::exists(file)) return out;
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object()) continue;
    if (row.contains("elapsed_s") && row["elapsed_s"].is_number())
      out.elapsed_s = std::max(out.elapsed_s, row["elapsed_s"].get<double>());
    if (row.contains("split") || row.contains("event")) continue;
    if (!row.contains("loss") || !row["loss"].is_number()) continue;
    out.last = row["loss"].get<double>();
    if (std::isnan(out.first)) out.first = out.last;
  }
  return out;
}

nlohmann::json world_size_stretches(const std::vector<std::pair<int64_t, int64_t>>& starts, int64_t steps) {
  auto stretches = nlohmann::json::array();
  auto add = [&](int64_t from, int64_t to, const nlohmann::json& world) {
    if (to > from) stretches.push_back({{"first_step", from + 1}, {"last_step", to}, {"world_size", world}});
  };
  add(0, starts.empty() ? steps : starts.front().first, nullptr);
  for (size_t i = 0; i < starts.size(); ++i)
    add(starts[i].first, i + 1 < starts.size() ? starts[i + 1].first : steps, starts[i].second);
  return stretches;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 86400) std::snprintf(buf, sizeof buf, "%ldd%02ldh", static_cast<long>(s / 86400), static_cast<long>(s % 86400 / 3600));
  else if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", static_cast<long>(s / 3600), static_cast<long>(s % 3600 / 60));
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", static_cast<long>(s / 60), static_cast<long>(s % 60));
  else std::snprintf(buf, sizeof buf, "%lds", static_cast<long>(s));
  return buf;
}

std::string flops_text(double flops_per_s) {
  if (!std::isfinite(flops_per_s) || flops_per_s < 0) return "?";
  const bool tera = flops_per_s >= 1e12;
  const double v = flops_per_s / (tera ? 1e12 : 1e9);
  return (v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v)) + (tera ? " TFLOP/s" : " GFLOP/s");
}

std::string mean_text(double sum, double count, int decimals) {
  if (!(count > 0)) return "none";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, sum / count);
  return buf;
}

int64_t peak_rss_bytes() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

int64_t peak_device_bytes(const torch::Device& device) {
#ifdef RPE_HAVE_CUDA_ALLOCATOR
  if (device.is_cuda() && torch::cuda::is_available()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.has_index() ? device.index() : 0);
    // allocated_bytes[StatType::AGGREGATE], index 0: the enum moved between LibTorch versions
    // (c10::cuda::CUDACachingAllocator in 2.4, c10::CachingAllocator in 2.11), its first entry did not.
    return stats.allocated_bytes[0].peak;
  }
#endif
  return -1;
}

}  // namespace rpe
