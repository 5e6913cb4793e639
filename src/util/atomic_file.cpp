// Atomic writes via temp file + fsync + rename.
#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

void fsync_path(const fs::path& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return;  // best effort for directories on exotic filesystems
  ::fsync(fd);
  ::close(fd);
}

fs::path temp_name(const fs::path& path) {
  return path.string() + ".tmp." + std::to_string(::getpid());
}

}  // namespace

void write_atomic_with(const fs::path& path, const std::function<void(const fs::path&)>& writer) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  fs::create_directories(dir);
  const fs::path tmp = temp_name(path);
  try {
    writer(tmp);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  fsync_path(tmp, false);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw UserError("cannot write " + path.string() + ": " + ec.message());
  fsync_path(dir, true);
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  write_atomic_with(path, [&](const fs::path& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UserError("cannot open " + tmp.string() + " for writing: " + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) throw UserError("cannot write " + tmp.string() + ": " + std::strerror(errno));
  });
}

void append_line_synced(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) throw UserError("cannot open " + path.string() + ": " + std::strerror(errno));
  std::string buf = line + "\n";
  const char* p = buf.data();
  size_t left = buf.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw UserError("cannot write " + path.string() + ": " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fdatasync(fd);
  ::close(fd);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace rpe
