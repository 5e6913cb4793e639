// Streamed atomic writes with errno checks (see atomic_writer.h).
#include "util/atomic_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "util/errors.h"
#include "util/file_tree.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

// Slicing-by-8: table[0] is the byte-at-a-time table of the reflected polynomial 0xEDB88320;
// table[k][b] is the CRC of byte b followed by k zero bytes, so 8 input bytes are folded in
// with 8 lookups. The 8-byte step reads the input as little-endian words.
static_assert(std::endian::native == std::endian::little, "crc32_update's 8-byte step assumes little-endian");

using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

CrcTables make_tables() {
  CrcTables t{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][n] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (uint32_t n = 0; n < 256; ++n) t[k][n] = (t[k - 1][n] >> 8) ^ t[0][t[k - 1][n] & 0xFFu];
  return t;
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  static const CrcTables t = make_tables();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFFu] ^ t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = t[0][(c ^ *p) & 0xFFu] ^ (c >> 8);
  return ~c;
}

// A write that failed for the machine's sake (full disk, file too large, I/O error): main()
// reports it in one line with exit 1, a user's fault (permissions, a folder) with exit 2.
class WriteError : public std::system_error {
 public:
  WriteError(int error, std::string message) : std::system_error(error, std::generic_category()), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

std::string write_error_message(const fs::path& path, int error) {
  if (error == ENOSPC) return "no space left on device: " + path.string();
  return "cannot write " + path.string() + ": " + std::strerror(error);
}

void throw_write_error(const fs::path& path, int error) { throw WriteError(error, write_error_message(path, error)); }

AtomicWriter::AtomicWriter(fs::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (fs::is_directory(path_, ec)) throw UserError(path_.string() + " is a folder, not a file");
  const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path(".");
  fs::create_directories(dir, ec);
  if (ec) throw UserError("cannot create folder " + dir.string() + " for " + path_.filename().string() + ": " + ec.message());
  tmp_ = path_.string() + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int error = errno;
    // A full disk or quota refusing the new file is the machine's, as a failed write (exit 1);
    // permissions, a read-only or missing place are the path's (exit 2; callers name their flag).
    if (environment_error(std::error_code(error, std::generic_category()))) throw_write_error(path_, error);
    throw UserError(write_error_message(path_, error));
  }
}

AtomicWriter::~AtomicWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicWriter::write(const void* data, size_t n) noexcept {
  if (error_ != 0 || n == 0) return;
  crc_ = crc32_update(crc_, data, n);
  size_ += n;
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t done = ::write(fd_, p, n);
    if (done < 0) {
      if (errno == EINTR) continue;
      error_ = errno;
      return;
    }
    p += done;
    n -= static_cast<size_t>(done);
  }
}

void AtomicWriter::fail(int error) {
  error_ = error;  // a later sync() or commit() reports it again, never "synced"
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  throw WriteError(error, write_error_message(path_, error));
}

void AtomicWriter::sync() {
  if (error_ != 0) fail(error_);
  if (fd_ < 0) return;  // synced already
  // Delayed allocation (ext4, xfs, NFS) may report a full disk only here.
  if (::fsync(fd_) != 0) fail(errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(errno);
}

void AtomicWriter::commit() {
  sync();
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail(errno);
  committed_ = true;
  fsync_folder(path_.parent_path());
}

}  // namespace rpe
