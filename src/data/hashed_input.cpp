// One read of a corpus file for its text and its checksum; see hashed_input.h.
#include "data/hashed_input.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "data/shard.h"
#include "util/errors.h"

namespace rpe {

struct HashedInput::State {
  std::string name;
  int fd = -1;
  std::vector<unsigned char> buf = std::vector<unsigned char>(size_t{1} << 20);
  size_t pos = 0, len = 0;  // raw bytes read, not yet used: buf[pos, len)
  uint64_t raw = 0, text = 0;  // raw bytes read, text bytes returned
  ShardHasher hash;           // of every raw byte, in file order, as read
  bool decided = false, gzip = false, member_open = false, done = false, raw_eof = false;
  z_stream z{};
  bool z_ready = false;

  size_t avail() const { return len - pos; }
  // Reads more of the file behind the unused bytes (moved to the front); false at its end.
  bool more() {
    if (raw_eof) return false;
    if (pos > 0) {
      std::memmove(buf.data(), buf.data() + pos, avail());
      len -= pos;
      pos = 0;
    }
    ssize_t n = 0;
    do {
      n = ::read(fd, buf.data() + len, buf.size() - len);
    } while (n < 0 && errno == EINTR);
    if (n < 0) throw UserError(name + ": read error near byte " + std::to_string(raw) + " (" + std::strerror(errno) + ")");
    if (n == 0) return !(raw_eof = true);
    hash.update(buf.data() + len, static_cast<size_t>(n));
    raw += static_cast<uint64_t>(n);
    len += static_cast<size_t>(n);
    return true;
  }
  bool ensure(size_t k) {
    while (avail() < k)
      if (!more()) return false;
    return true;
  }
  bool at_gzip_magic() { return ensure(2) && buf[pos] == 0x1f && buf[pos + 1] == 0x8b; }

  size_t read_gzip(char* dst, size_t n);
};

// Decompresses like gzread: members one after another (a concatenated .gz is one text), bytes
// after the last member that do not start another are ignored (read, so that they are hashed).
size_t HashedInput::State::read_gzip(char* dst, size_t n) {
  size_t got = 0;
  while (got < n && !done) {
    if (!member_open) {
      if (!at_gzip_magic()) {
        pos = len;
        while (more()) pos = len;
        done = true;
        break;
      }
      inflateReset(&z);
      member_open = true;
    }
    if (avail() == 0 && !more())
      throw UserError(name + ": truncated or corrupt gzip file, ends near byte " + std::to_string(text + got) +
                      " (unexpected end of file)");
    z.next_in = buf.data() + pos;
    z.avail_in = static_cast<uInt>(avail());
    z.next_out = reinterpret_cast<Bytef*>(dst + got);
    z.avail_out = static_cast<uInt>(std::min<size_t>(n - got, size_t{1} << 30));
    const int r = inflate(&z, Z_NO_FLUSH);
    pos = len - z.avail_in;
    got = n - z.avail_out;
    if (r == Z_STREAM_END) {
      member_open = false;
    } else if (r != Z_OK) {  // with input and room for output, anything else is a bad stream
      throw UserError(name + ": read error near byte " + std::to_string(text + got) + " (" +
                      (z.msg ? z.msg : "zlib error " + std::to_string(r)) + ")");
    }
  }
  return got;
}

HashedInput::HashedInput(const std::filesystem::path& file, bool gunzip) : s_(std::make_unique<State>()) {
  s_->name = file.string();
  s_->fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (s_->fd < 0) throw UserError(s_->name + ": cannot open (" + std::strerror(errno) + ")");
  ::posix_fadvise(s_->fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint for read-ahead; failing is harmless
  s_->decided = !gunzip;
}

HashedInput::~HashedInput() {
  if (s_->z_ready) inflateEnd(&s_->z);
  ::close(s_->fd);
}

size_t HashedInput::read(char* dst, size_t n) {
  State& s = *s_;
  if (!s.decided) {
    s.decided = true;
    s.gzip = s.at_gzip_magic();
    if (s.gzip) {
      if (inflateInit2(&s.z, 15 + 16) != Z_OK) throw UserError(s.name + ": cannot start gzip decompression");
      s.z_ready = true;
    }
  }
  size_t got = 0;
  if (s.gzip) {
    got = s.read_gzip(dst, n);
  } else if (n > 0 && (s.avail() > 0 || s.more())) {
    got = std::min(n, s.avail());
    std::memcpy(dst, s.buf.data() + s.pos, got);
    s.pos += got;
  }
  s.text += got;
  return got;
}

uint64_t HashedInput::checksum() const { return s_->hash.value(); }
uint64_t HashedInput::raw_bytes() const { return s_->raw; }

uint64_t file_checksum(const std::filesystem::path& file) {
  HashedInput in(file, /*gunzip=*/false);
  std::vector<char> buf(size_t{1} << 20);
  while (in.read(buf.data(), buf.size()) > 0) {
  }
  return in.checksum();
}

}  // namespace rpe
