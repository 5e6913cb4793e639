// UTF-8 validation through utf8proc (see utf8.h).
#include "util/utf8.h"

#include <utf8proc.h>

#include <string>

namespace rpe {

size_t find_invalid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    if (p[i] < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    utf8proc_int32_t cp;
    const auto len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(n - i), &cp);
    if (len < 0) return i;
    i += static_cast<size_t>(len);
  }
  return std::string::npos;
}

std::string escape_for_message(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  size_t next_bad = find_invalid_utf8(text);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const bool invalid = i == next_bad;
    if (invalid) {
      const size_t more = find_invalid_utf8(text.substr(i + 1));
      next_bad = more == std::string_view::npos ? more : i + 1 + more;
    }
    if (invalid || (byte < 0x20 && byte != '\t') || byte == 0x7f) {
      out.append("\\x").push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace rpe
