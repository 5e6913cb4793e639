// Atomic file writes: write to "<path>.tmp.<pid>", fsync, rename over the target, fsync
// the directory. A reader never sees a half-written checkpoint, config or result file.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace rpe {

// Writes `content` to `path` atomically.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

// Writes several files (a table's .md, .csv and .json) so that a failure leaves all of them
// as they were: every file is written and fsynced beside its target before the first rename.
// (Only a rename failing between two others, which the same folder makes unlikely, could still
// leave a mix.) Errors as write_file_atomic's.
void write_files_atomic(const std::vector<std::pair<std::filesystem::path, std::string>>& files);

// Lets `writer` produce a file at the given temporary path, then fsyncs and renames it
// over `path`. Use for writers that insist on a path (torch::save, sentencepiece).
void write_atomic_with(const std::filesystem::path& path,
                       const std::function<void(const std::filesystem::path& tmp)>& writer);

// Appends one line (plus '\n') to `path` and flushes it to disk (metrics.jsonl, results):
// all of it or none (a failed write is cut back off; a line a crash tore, the file's last
// without its newline, is cut off first), so every line before the end is whole.
// Write errors as throw_write_error (atomic_writer.h): exit 1 for a full disk.
void append_line_synced(const std::filesystem::path& path, const std::string& line);

// Reads a whole file; UserError naming the file when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace rpe
