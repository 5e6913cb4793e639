// Raw text corpus: documents separated by blank lines, one sentence (or paragraph) per line.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rpe {

struct Document {
  std::vector<std::string> sentences;  // non-empty lines, in order
};

// Reads one file. UserError naming the file (and byte offset) for a missing or empty
// file and for bytes that are not valid UTF-8.
std::vector<Document> read_documents(const std::filesystem::path& file);

// Byte offset of the first invalid UTF-8 sequence in `text`, or npos if it is valid.
size_t find_invalid_utf8(std::string_view text);

}  // namespace rpe
