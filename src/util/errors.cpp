// User-facing error helpers.
#include "util/errors.h"

namespace rpe {

void require(bool cond, const std::string& message) {
  if (!cond) throw UserError(message);
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

}  // namespace rpe
