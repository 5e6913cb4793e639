// Streamed atomic writes that say why they failed. Bytes go to "<path>.tmp.<pid>"; commit()
// fsyncs it, renames it over `path` and fsyncs the folder, so a reader sees the old file or the
// whole new one. Every write error is reported as one UserError naming `path`:
//   ENOSPC                  "no space left on device: <path>"
//   anything else           "cannot write <path>: <strerror>" (EFBIG, EDQUOT, EIO, EACCES...)
// and the temporary file is removed (also when the writer is destroyed before commit()).
//
// write() never throws and never reports a short write: the first error is kept and later
// bytes are dropped until commit() reports it. This is on purpose. LibTorch's archive writer
// (OutputArchive::save_to) treats a short write as fatal and then finishes the zip file from a
// destructor, which throws again and aborts the process; a sink that "succeeds" lets save_to
// return normally, and the error surfaces in commit().
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace rpe {

// CRC-32 (IEEE 802.3, the zlib/PNG polynomial), zlib-style chaining:
// crc32_update(crc32_update(0, a), b) == CRC of a followed by b; crc32_update(0, "", 0) == 0.
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);

class AtomicWriter {
 public:
  // Creates missing parent folders and opens the temporary file; UserError naming `path`
  // when `path` is a folder or the temporary file cannot be created.
  explicit AtomicWriter(std::filesystem::path path);
  ~AtomicWriter();  // removes the temporary file unless commit() succeeded
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void write(const void* data, size_t n) noexcept;
  void write(std::string_view text) noexcept { write(text.data(), text.size()); }

  uint64_t size() const { return size_; }    // bytes written so far
  uint32_t crc32() const { return crc_; }    // CRC-32 of those bytes
  const std::filesystem::path& path() const { return path_; }

  // Reports the first write error, or fsyncs and closes the temporary file: after it the
  // bytes are on disk and only commit()'s rename is left (several files: sync each, then commit
  // each, and a full disk leaves every old file as it was; write_files_atomic). Idempotent.
  void sync();
  // sync(), then renames the file into place and fsyncs the folder.
  void commit();

 private:
  [[noreturn]] void fail(int error);  // closes and removes the temporary file, throws UserError

  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  int error_ = 0;  // errno of the first failed write, 0 while all went well
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
  bool committed_ = false;
};

// The one-line message for a failed write of `path` (see the table above).
std::string write_error_message(const std::filesystem::path& path, int error);

// Throws that message as a std::system_error carrying `error`: main() exits 1 for the
// machine's failures (a full disk, EIO, EFBIG, a quota) and 2 for the user's (permissions).
// Every writer of the project reports a failed write this way.
[[noreturn]] void throw_write_error(const std::filesystem::path& path, int error);

}  // namespace rpe
