// Python's whitespace on UTF-8 bytes (see unicode_space.h).
#include "util/unicode_space.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstddef>

namespace rpe {

namespace {

bool is_space(utf8proc_int32_t cp) {
  return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// The character at s[i]: its bytes, and whether it is whitespace. A byte that starts no UTF-8
// character is one byte of text (the readers' UTF-8 checks name it).
size_t char_at(std::string_view s, size_t i, bool& space) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data()) + i;
  utf8proc_int32_t cp = -1;
  const auto len = utf8proc_iterate(p, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  space = len > 0 && is_space(cp);
  return len > 0 ? static_cast<size_t>(len) : 1;
}

}  // namespace

bool is_all_space(std::string_view s) {
  bool space = true;
  for (size_t i = 0; i < s.size() && space;) i += char_at(s, i, space);
  return space;
}

std::string_view strip_space(std::string_view s) {
  size_t begin = s.size(), end = 0;  // of the first and past the last non-space character
  for (size_t i = 0; i < s.size();) {
    bool space = false;
    const size_t k = char_at(s, i, space);
    if (!space) {
      begin = std::min(begin, i);
      end = i + k;
    }
    i += k;
  }
  return begin < end ? s.substr(begin, end - begin) : std::string_view();
}

}  // namespace rpe
