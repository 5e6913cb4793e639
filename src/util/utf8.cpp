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

}  // namespace rpe
