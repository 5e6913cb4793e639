// User-facing error helpers.
#include "util/errors.h"

namespace rpe {

void require(bool cond, const std::string& message) {
  if (!cond) throw UserError(message);
}

std::string without_nul(const std::string& message) {
  if (message.find('\0') == std::string::npos) return message;
  std::string out;
  for (const char c : message) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out;
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
