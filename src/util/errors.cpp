// User-facing error helpers.
#include "util/errors.h"

#include <cerrno>

#include "util/utf8.h"

namespace rpe {

void require(bool cond, const std::string& message) {
  if (!cond) throw UserError(message);
}

bool environment_error(const std::error_code& ec) {
  if (ec.category() != std::generic_category() && ec.category() != std::system_category()) return false;
  switch (ec.value()) {
    case ENOSPC: case EDQUOT: case EIO: case ENOMEM: case EMFILE: case ENFILE: case EFBIG: case EAGAIN:
      return true;
    default:
      return false;
  }
}

std::string without_nul(const std::string& message) {
  if (message.find('\0') == std::string::npos) return message;
  std::string out;
  for (const char c : message) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out;
}

std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (auto& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return escape_for_message(text);
}

std::string excerpt(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return text.substr(0, cut) + "... (" + std::to_string(text.size()) + " bytes)";
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
