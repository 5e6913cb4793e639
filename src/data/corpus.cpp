// Corpus reading with strict UTF-8 validation, and the held-out rule.
#include "data/corpus.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <utility>

#include "data/text_reader.h"
#include "util/errors.h"
#include "util/input_file.h"

namespace rpe {
namespace fs = std::filesystem;

std::vector<Document> read_documents(const fs::path& file, const std::string& format_name) {
  const DocumentFormat format = parse_document_format(format_name);
  ChunkReader reader(file, format, size_t{16} << 20);
  std::vector<Document> docs;
  Document doc;
  std::string chunk;
  uint64_t offset = 0;
  while (reader.next(chunk, offset)) {
    if (const size_t bad = find_invalid_utf8(chunk); bad != std::string::npos)
      throw UserError(file.string() + ": invalid UTF-8 at byte offset " + std::to_string(offset + bad));
    split_documents(
        chunk, format, [&](std::string_view line) { doc.sentences.emplace_back(line); },
        [&] { docs.push_back(std::move(doc)), doc = Document(); });
  }
  if (docs.empty()) throw UserError(file.string() + ": no text (only blank lines)");
  return docs;
}

int64_t holdout_period(const DataOptions& d) {
  if (!d.valid_files.empty() || !(d.valid_fraction > 0.0)) return 0;
  return std::max<int64_t>(2, std::llround(1.0 / d.valid_fraction));
}

void require_distinct_text_files(const DataOptions& d) {
  std::map<std::filesystem::path, std::string> seen;  // the file as it resolves -> the key that listed it
  for (const auto& [key, files] : {std::pair{"data.train_files", &d.train_files}, {"data.valid_files", &d.valid_files}})
    for (const auto& f : *files) {
      const auto [it, fresh] = seen.emplace(same_file_key(f), key);
      if (!fresh)
        throw UserError(std::string(key) + ": " + f + " is listed in " + it->second + " already (" +
                        (it->second == key ? "its documents would be trained on twice"
                                           : "the held-out documents would be trained on") +
                        "): list each file once");
    }
}

}  // namespace rpe
