// Python's whitespace on UTF-8 bytes (see unicode_space.h).
#include "util/unicode_space.h"

#include <cstddef>

namespace rpe {

namespace {

// Bytes of the whitespace character that starts at s[i], or 0 when none does. Every non-ASCII
// space is two bytes (U+0085, U+00A0) or three (U+1680 .. U+3000).
size_t space_at(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned b = p[i];
  if (b < 0x80) return (b == ' ' || (b >= 0x09 && b <= 0x0d) || (b >= 0x1c && b <= 0x1f)) ? 1 : 0;
  const size_t n = s.size();
  if ((b & 0xE0) == 0xC0 && i + 1 < n && (p[i + 1] & 0xC0) == 0x80) {
    const char32_t cp = (static_cast<char32_t>(b & 0x1F) << 6) | (p[i + 1] & 0x3F);
    return cp == 0x85 || cp == 0xA0 ? 2 : 0;
  }
  if ((b & 0xF0) == 0xE0 && i + 2 < n && (p[i + 1] & 0xC0) == 0x80 && (p[i + 2] & 0xC0) == 0x80) {
    const char32_t cp = (static_cast<char32_t>(b & 0x0F) << 12) | (static_cast<char32_t>(p[i + 1] & 0x3F) << 6) |
                        (p[i + 2] & 0x3F);
    const bool space = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
                       cp == 0x202F || cp == 0x205F || cp == 0x3000;
    return space ? 3 : 0;
  }
  return 0;
}

// Bytes of the character that starts at s[i] (1 for a byte that starts none).
size_t char_bytes_at(std::string_view s, size_t i) {
  const unsigned b = static_cast<unsigned char>(s[i]);
  const size_t want = b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  size_t k = 1;
  while (k < want && i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80) ++k;
  return k;
}

}  // namespace

bool is_all_space(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t k = space_at(s, i);
    if (k == 0) return false;
    i += k;
  }
  return true;
}

std::string_view strip_space(std::string_view s) {
  size_t begin = s.size(), end = 0;  // of the first and past the last non-space character
  for (size_t i = 0; i < s.size();) {
    if (const size_t k = space_at(s, i)) {
      i += k;
      continue;
    }
    const size_t k = char_bytes_at(s, i);
    if (begin == s.size()) begin = i;
    end = i + k;
    i += k;
  }
  return begin < end ? s.substr(begin, end - begin) : std::string_view();
}

}  // namespace rpe
