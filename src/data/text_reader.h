// Streaming reads of corpus text files in chunks that end at document boundaries, so the
// chunks can be tokenized independently (in parallel) with memory bounded by the chunk size,
// not by the file. Two document formats (data.document_format):
//   blank_line  documents separated by blank lines, one sentence (or paragraph) per line;
//   line        one document per line (e.g. an extracted Wikipedia dump); blank lines skipped.
// Files whose name ends in ".gz" are decompressed on the fly (zlib); byte offsets in errors
// are then offsets into the decompressed text.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "data/hashed_input.h"

namespace rpe {

enum class DocumentFormat { kBlankLine, kLine };

// "blank_line" | "line" (config.cpp has already rejected anything else).
DocumentFormat parse_document_format(const std::string& name);
const char* format_name(DocumentFormat f);

// True for a line of only whitespace as Python's str.isspace() knows it (util/unicode_space.h;
// what Google's create_pretraining_data.py strips before its "an empty line ends a document"
// test): a form-feed page break or a no-break-space line separates documents too.
bool is_blank_line(std::string_view line);

// Calls on_sentence(line) for each non-blank line of `text` and on_document_end() after the
// last line of each document (per `format`). `text` must hold whole documents.
void split_documents(std::string_view text, DocumentFormat format,
                     const std::function<void(std::string_view)>& on_sentence,
                     const std::function<void()>& on_document_end);

class ChunkReader {
 public:
  // UserError naming the file when it is missing, a folder, unreadable or not gzip.
  ChunkReader(const std::filesystem::path& file, DocumentFormat format, size_t chunk_bytes = size_t{1} << 20);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // The next chunk (whole documents, about chunk_bytes) into `out`, and the offset of its
  // first byte in the (decompressed) file. False at the end of the file. UserError when a
  // document (blank_line) or a line (line) is longer than kMaxDocumentBytes, or when the
  // first chunk looks like the other format; the message names the format assumed.
  bool next(std::string& out, uint64_t& offset);
  uint64_t bytes_read() const { return consumed_; }
  // The checksum of the file's bytes on disk (file_checksum's value) and how many there were,
  // taken from the very bytes that were read for the text: right once next() returned false.
  uint64_t file_checksum() const { return in_->checksum(); }
  uint64_t file_bytes() const { return in_->raw_bytes(); }

  static constexpr size_t kMaxDocumentBytes = size_t{64} << 20;

 private:
  size_t fill(size_t want);  // appends up to `want` bytes to pending_; returns how many
  size_t find_cut() const;   // end of the last whole document in pending_, or 0
  void check_format(std::string_view chunk) const;

  std::filesystem::path file_;
  DocumentFormat format_;
  size_t chunk_bytes_;
  std::unique_ptr<HashedInput> in_;  // gunzips a gzip file, passes others through
  std::string pending_;  // read, not yet returned
  uint64_t consumed_ = 0;  // bytes returned so far
  bool eof_ = false, first_ = true;
};

}  // namespace rpe
