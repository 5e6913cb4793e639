// Corpus reading with strict UTF-8 validation.
#include "data/corpus.h"

#include <utf8proc.h>

#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

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

std::vector<Document> read_documents(const fs::path& file) {
  if (!fs::exists(file)) throw UserError(file.string() + ": file not found");
  const std::string text = read_file(file);
  if (text.empty()) throw UserError(file.string() + ": file is empty");
  if (const size_t bad = find_invalid_utf8(text); bad != std::string::npos)
    throw UserError(file.string() + ": invalid UTF-8 at byte offset " + std::to_string(bad));

  std::vector<Document> docs(1);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const bool blank = line.find_first_not_of(" \t") == std::string::npos;
    if (blank) {
      if (!docs.back().sentences.empty()) docs.emplace_back();
    } else {
      docs.back().sentences.push_back(std::move(line));
    }
    start = end + 1;
  }
  if (docs.back().sentences.empty()) docs.pop_back();
  if (docs.empty()) throw UserError(file.string() + ": no text (only blank lines)");
  return docs;
}

}  // namespace rpe
