// Checkpoint files: LibTorch archives with their CRC-32 in the zip comment (see checkpoint_file.h).
#include "train/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "util/atomic_writer.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

// Zip end-of-central-directory record: 22 bytes, signature first, comment length (uint16 LE)
// in its last two bytes, then the comment itself.
constexpr size_t kEndRecord = 22;
constexpr char kEndSignature[] = {'P', 'K', 5, 6};
constexpr char kPrefix[] = "rpe-train crc32 ";  // + 8 hex + " size " + 20 digits
constexpr size_t kCommentLen = 16 + 8 + 6 + 20;

std::string trailer_text(uint32_t crc, uint64_t size) {
  char buf[kCommentLen + 1];
  std::snprintf(buf, sizeof buf, "rpe-train crc32 %08x size %020llu", crc, static_cast<unsigned long long>(size));
  return std::string(buf, kCommentLen);
}

// Passes LibTorch's zip stream on to the file but holds back its last 22 bytes, the end record,
// so that finish() can set the comment length before they are written and append the comment.
class ChecksumTail {
 public:
  explicit ChecksumTail(AtomicWriter& out) : out_(out) {}

  void write(const char* p, size_t n) {
    if (n >= kEndRecord) {
      out_.write(held_.data(), held_.size());
      out_.write(p, n - kEndRecord);
      held_.assign(p + n - kEndRecord, p + n);
      return;
    }
    held_.insert(held_.end(), p, p + n);
    if (held_.size() > kEndRecord) {
      const size_t extra = held_.size() - kEndRecord;
      out_.write(held_.data(), extra);
      held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(extra));
    }
  }

  void finish() {
    if (held_.size() != kEndRecord || std::memcmp(held_.data(), kEndSignature, 4) != 0 || held_[20] != 0 ||
        held_[21] != 0)
      throw std::logic_error("checkpoint writer: LibTorch's archive does not end with a comment-less zip end record");
    held_[20] = static_cast<char>(kCommentLen & 0xFF);
    held_[21] = static_cast<char>(kCommentLen >> 8);
    out_.write(held_.data(), held_.size());
    out_.write(trailer_text(out_.crc32(), out_.size()));
  }

 private:
  AtomicWriter& out_;
  std::vector<char> held_;
};

// Reads exactly n bytes at offset; false on a short read.
bool read_at(int fd, uint64_t offset, char* buf, size_t n) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, buf, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    buf += got, offset += static_cast<uint64_t>(got), n -= static_cast<size_t>(got);
  }
  return true;
}

// CRC-32 of the first `length` bytes of `file`.
uint32_t prefix_crc32(const fs::path& file, uint64_t length) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot read " + file.string() + ": " + std::strerror(errno));
  std::vector<char> buf(1 << 20);
  uint32_t crc = 0;
  for (uint64_t done = 0; done < length;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), length - done));
    if (!read_at(fd, done, buf.data(), want)) {
      ::close(fd);
      throw UserError("cannot read " + file.string() + ": " + (errno ? std::strerror(errno) : "short read"));
    }
    crc = crc32_update(crc, buf.data(), want);
    done += want;
  }
  ::close(fd);
  return crc;
}

struct Trailer {
  bool present = false;  // the file ends with our comment
  bool end_ok = false;   // and the zip end record before it announces that comment
  uint32_t crc = 0;
  uint64_t covered = 0;
};

// The embedded checksum at the end of `file` (of `size` bytes), if there is one.
Trailer read_trailer(const fs::path& file, uint64_t size) {
  Trailer t;
  if (size < kCommentLen + kEndRecord) return t;
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot read " + file.string() + ": " + std::strerror(errno));
  std::array<char, kEndRecord + kCommentLen + 1> tail{};
  const bool ok = read_at(fd, size - kEndRecord - kCommentLen, tail.data(), kEndRecord + kCommentLen);
  ::close(fd);
  const char* comment = tail.data() + kEndRecord;
  if (!ok || std::memcmp(comment, kPrefix, 16) != 0 || std::memcmp(comment + 24, " size ", 6) != 0) return t;
  // Parsed from copies so that strtoull stops at the field's end.
  const std::string hex(comment + 16, 8), digits(comment + 30, 20);
  char* end = nullptr;
  t.crc = static_cast<uint32_t>(std::strtoul(hex.c_str(), &end, 16));
  if (*end != '\0') return t;
  t.covered = std::strtoull(digits.c_str(), &end, 10);
  if (*end != '\0') return t;
  // The comment must be the zip's: its length field and the end record's signature around it.
  t.present = true;
  t.end_ok = std::memcmp(tail.data(), kEndSignature, 4) == 0 &&
             static_cast<unsigned char>(tail[20]) == (kCommentLen & 0xFF) && tail[21] == 0;
  return t;
}

bool unchecked_allowed() {
  const char* v = std::getenv("RPE_TRAIN_ALLOW_UNCHECKED");
  return v != nullptr && std::string(v) == "1";
}

std::string hex8(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// The pre-embedding sidecar check: "crc32 <hex> size <bytes>" of the whole file.
bool verify_sidecar(const fs::path& file, const fs::path& sidecar, uint64_t size, std::string* why) {
  std::FILE* f = std::fopen(sidecar.c_str(), "r");
  unsigned int crc = 0;
  long long recorded = -1;
  const bool parsed = f && std::fscanf(f, "crc32 %x size %lld", &crc, &recorded) == 2;
  if (f) std::fclose(f);
  if (!parsed) {
    if (why) *why = "its checksum file " + sidecar.filename().string() + " is unreadable";
    return false;
  }
  const uint32_t actual = file_crc32(file);
  if (static_cast<uint64_t>(recorded) == size && actual == crc) return true;
  if (why)
    *why = "checksum mismatch (" + sidecar.filename().string() + " records crc32 " + hex8(crc) + " size " +
           std::to_string(recorded) + ", the file has crc32 " + hex8(actual) + " size " + std::to_string(size) +
           "): truncated or corrupt";
  return false;
}

}  // namespace

void write_checkpoint_file(const fs::path& file, torch::serialize::OutputArchive& archive) {
  AtomicWriter out(file);
  ChecksumTail tail(out);
  // The sink reports every chunk as written (see atomic_writer.h): errors surface in commit().
  archive.save_to([&](const void* data, size_t n) -> size_t {
    tail.write(static_cast<const char*>(data), n);
    return n;
  });
  tail.finish();
  out.commit();
}

uint32_t file_crc32(const fs::path& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec) throw UserError("cannot read " + file.string() + ": " + ec.message());
  return prefix_crc32(file, size);
}

bool verify_checkpoint(const fs::path& file, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (!fs::exists(status)) return fail("checkpoint not found");
  if (fs::is_directory(status)) return fail("is a folder, not a checkpoint file");
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return fail("cannot read it: " + ec.message());
  const Trailer t = read_trailer(file, size);
  if (t.present) {
    if (!t.end_ok) return fail("the zip end record before its checksum is damaged: corrupt");
    const uint32_t actual = prefix_crc32(file, size - kCommentLen);
    if (t.covered == size - kCommentLen && actual == t.crc) return true;
    return fail("checksum mismatch (recorded crc32 " + hex8(t.crc) + " over " + std::to_string(t.covered) +
                " bytes, the file has crc32 " + hex8(actual) + " over " + std::to_string(size - kCommentLen) +
                "): corrupt");
  }
  const fs::path sidecar = file.string() + ".crc32";
  if (fs::exists(sidecar, ec)) return verify_sidecar(file, sidecar, size, why);
  if (unchecked_allowed()) {
    log::warn("checkpoint", "{}: no checksum (RPE_TRAIN_ALLOW_UNCHECKED=1): loaded unverified", file.string());
    return true;
  }
  return fail("no checksum (none embedded, no .crc32 sidecar): truncated or corrupt, or written by an rpe-train "
              "without checksums (set RPE_TRAIN_ALLOW_UNCHECKED=1 to load it anyway)");
}

torch::serialize::InputArchive open_checkpoint(const fs::path& file) {
  std::string why;
  if (!verify_checkpoint(file, &why)) throw UserError(file.string() + ": " + why);
  torch::serialize::InputArchive archive;
  try {
    // Into host memory whatever device wrote it: a GPU-written file then loads on a machine
    // without that GPU (predict, inspect, CPU fine-tuning), and no rank of a resumed
    // multi-GPU run deserialises the whole archive onto cuda:0; the readers copy each tensor
    // to its parameter's device.
    archive.load_from(file.string(), torch::kCPU);
  } catch (const std::exception&) {
    std::error_code ec;
    const uint64_t size = fs::file_size(file, ec);
    const bool checked = (!ec && read_trailer(file, size).present) || fs::exists(file.string() + ".crc32", ec);
    throw UserError(file.string() + ": not a readable rpe-train checkpoint (" +
                    (checked ? "its checksum matches: written by another program?"
                             : "loaded unverified, it has no checksum: damaged, or written by another program?") +
                    ")");
  }
  return archive;
}

}  // namespace rpe
