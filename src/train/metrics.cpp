// JSON-lines metrics.
#include "train/metrics.h"

#include <cmath>

#include "util/atomic_file.h"

namespace rpe {

void MetricsWriter::write(const nlohmann::json& row) const {
  if (!file_.empty()) append_line_synced(file_, row.dump());
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", static_cast<long>(s / 3600), static_cast<long>(s % 3600 / 60));
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", static_cast<long>(s / 60), static_cast<long>(s % 60));
  else std::snprintf(buf, sizeof buf, "%lds", static_cast<long>(s));
  return buf;
}

}  // namespace rpe
