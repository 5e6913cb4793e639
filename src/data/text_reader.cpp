// Chunked, streaming reading of (optionally gzip-compressed) corpus files; see text_reader.h.
#include "data/text_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "util/errors.h"
#include "util/input_file.h"
#include "util/unicode_space.h"

namespace rpe {
namespace fs = std::filesystem;

DocumentFormat parse_document_format(const std::string& name) {
  return name == "line" ? DocumentFormat::kLine : DocumentFormat::kBlankLine;
}

const char* format_name(DocumentFormat f) { return f == DocumentFormat::kLine ? "line" : "blank_line"; }

bool is_blank_line(std::string_view line) { return is_all_space(line); }

void split_documents(std::string_view text, DocumentFormat format,
                     const std::function<void(std::string_view)>& on_sentence,
                     const std::function<void()>& on_document_end) {
  bool in_doc = false;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (is_blank_line(line)) {
      if (in_doc) on_document_end();  // (line format: already ended)
      in_doc = false;
    } else {
      on_sentence(line);
      in_doc = true;
      if (format == DocumentFormat::kLine) {
        on_document_end();
        in_doc = false;
      }
    }
    start = end + 1;
  }
  if (in_doc) on_document_end();
}

ChunkReader::ChunkReader(const fs::path& file, DocumentFormat format, size_t chunk_bytes)
    : file_(file), format_(format), chunk_bytes_(chunk_bytes) {
  const std::string name = file.string();
  std::error_code ec;
  if (fs::is_directory(file, ec)) throw UserError(name + ": is a folder, not a text file (list the files in it)");
  if (!input_exists(file)) throw UserError(name + ": file not found");  // a link loop: its own error
  require_regular_file(file);  // a FIFO would block open() until a writer came
  if (file.extension() == ".gz") {  // HashedInput would read a non-gzip file as plain text: refuse it
    unsigned char magic[2] = {0, 0};
    if (FILE* f = std::fopen(name.c_str(), "rb")) {
      const size_t n = std::fread(magic, 1, 2, f);
      std::fclose(f);
      if (n == 1 || (n == 2 && !(magic[0] == 0x1f && magic[1] == 0x8b)))  // no gzip file is 1 byte
        throw UserError(name + ": named .gz but not gzip-compressed");
    }
  }
  in_ = std::make_unique<HashedInput>(file, /*gunzip=*/true);
}

ChunkReader::~ChunkReader() = default;

size_t ChunkReader::fill(size_t want) {
  // The string grows by at most 64 KiB ahead of what is read: a small file does not pay for
  // zero-filling a whole chunk (16 MiB for a corpus) it never uses.
  constexpr size_t kStep = size_t{64} << 10;
  const size_t old = pending_.size();
  size_t got = 0;
  while (got < want) {
    const size_t ask = std::min(kStep, want - got);
    pending_.resize(old + got + ask);
    const size_t n = in_->read(pending_.data() + old + got, ask);  // UserError: a read error, a cut-off .gz
    if (n == 0) {
      eof_ = true;
      break;
    }
    got += n;
  }
  pending_.resize(old + got);
  return got;
}

size_t ChunkReader::find_cut() const {
  size_t e = pending_.rfind('\n');
  if (format_ == DocumentFormat::kLine) return e == std::string::npos ? 0 : e + 1;
  while (e != std::string::npos) {  // after the last blank line
    const size_t b = e == 0 ? std::string::npos : pending_.rfind('\n', e - 1);
    const size_t begin = b == std::string::npos ? 0 : b + 1;
    if (is_blank_line(std::string_view(pending_).substr(begin, e - begin))) return e + 1;
    e = b;
  }
  return 0;
}

void ChunkReader::check_format(std::string_view chunk) const {
  if (format_ != DocumentFormat::kLine) return;
  // Blank lines between runs of several text lines: documents separated by blank lines.
  int64_t lines = 0, blank = 0;
  split_documents(
      chunk, DocumentFormat::kBlankLine, [&](std::string_view) { ++lines; }, [&] { ++blank; });
  if (blank >= 2 && lines >= 2 * blank)
    throw UserError(file_.string() + ": read as data.document_format: line (one document per line), but its first " +
                    std::to_string(lines) + " text lines form " + std::to_string(blank) +
                    " blocks separated by blank lines: this looks like blank-line-separated documents (set "
                    "data.document_format: blank_line)");
}

bool ChunkReader::next(std::string& out, uint64_t& offset) {
  offset = consumed_;
  size_t cut = 0;
  for (;;) {
    if (!eof_ && pending_.size() < chunk_bytes_) fill(chunk_bytes_ - pending_.size());
    if (eof_) {
      cut = pending_.size();
      break;
    }
    cut = find_cut();
    if (cut > 0) break;
    if (pending_.size() >= kMaxDocumentBytes) {
      const std::string what = format_ == DocumentFormat::kLine
                                   ? "a line longer than " + std::to_string(kMaxDocumentBytes >> 20) +
                                         " MB: read as data.document_format: line (one document per line)"
                                   : "no blank line in " + std::to_string(kMaxDocumentBytes >> 20) +
                                         " MB: read as data.document_format: blank_line (documents separated by blank "
                                         "lines); if the file holds one document per line, set "
                                         "data.document_format: line";
      throw UserError(file_.string() + ": from byte " + std::to_string(consumed_) + ", " + what);
    }
    fill(chunk_bytes_);  // a document longer than the chunk: read on until it ends
  }
  if (cut == 0) {
    if (first_ && consumed_ == 0) throw UserError(file_.string() + ": file is empty");
    return false;
  }
  out.assign(pending_, 0, cut);
  pending_.erase(0, cut);
  consumed_ += cut;
  if (first_) check_format(out);
  first_ = false;
  return true;
}

}  // namespace rpe
