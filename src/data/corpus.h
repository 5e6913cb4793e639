// Raw text corpus read whole into memory (the text path for small corpora; prepare-data
// streams instead). Document rules: text_reader.h (data.document_format).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "util/utf8.h"  // find_invalid_utf8, used with every corpus reader

namespace rpe {

struct Document {
  std::vector<std::string> sentences;  // non-empty lines, in order
};

// Reads one file (.gz too). UserError naming the file (and byte offset) for a missing or
// empty file, a folder, and bytes that are not valid UTF-8. `format`: "blank_line" | "line".
std::vector<Document> read_documents(const std::filesystem::path& file, const std::string& format = "blank_line");

// The held-out rule, shared by prepare-data and the text path: with no data.valid_files,
// training document i (numbered across the training files, in order) is held out when
// i % period == period - 1, period = max(2, round(1 / valid_fraction)); period 0 (valid
// files given, or valid_fraction 0) holds nothing out.
int64_t holdout_period(const DataOptions& d);
// Each of data.train_files and data.valid_files once: a file listed twice (in one list or in
// both, however spelled: "a.txt", "./a.txt", a link to it) would be trained on twice, or be its
// own held-out set. UserError naming the file and the key.
void require_distinct_text_files(const DataOptions& d);
inline bool is_held_out(int64_t document, int64_t period) { return period > 0 && document % period == period - 1; }

}  // namespace rpe
