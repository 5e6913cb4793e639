// Atomic writes via temp file + fsync + rename; errors name the file and say why (errno).
#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>

#include "util/atomic_writer.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/input_file.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

void write_atomic_with(const fs::path& path, const std::function<void(const fs::path&)>& writer) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UserError("cannot create folder " + dir.string() + " for " + path.filename().string() + ": " + ec.message());
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  auto fail = [&](int error) {
    fs::remove(tmp, ec);
    throw_write_error(path, error);
  };
  try {
    writer(tmp);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(errno);
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail(error);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(errno);
  fsync_folder(dir);
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  AtomicWriter out(path);
  out.write(content);
  out.commit();
}

void write_files_atomic(const std::vector<std::pair<fs::path, std::string>>& files) {
  std::vector<std::unique_ptr<AtomicWriter>> out;  // each removes its temporary file unless committed
  for (const auto& [path, content] : files) {
    out.push_back(std::make_unique<AtomicWriter>(path));
    out.back()->write(content);
  }
  for (auto& w : out) w->sync();
  for (auto& w : out) w->commit();
}

void append_line_synced(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND, 0644);
  if (fd < 0) throw UserError("cannot open " + path.string() + ": " + std::strerror(errno));
  // A line whose write failed is cut back off (below); one torn by a crash has no newline at
  // the end: it is cut off here, before the new line, so every line in the file is whole (the
  // torn one was lost with the crash; readers skip it while it is the last). A last line that is
  // whole JSON only lacks its newline (an editor's save): it is kept and ended.
  off_t before = ::lseek(fd, 0, SEEK_END);
  char last = '\n';
  if (before > 0 && ::pread(fd, &last, 1, before - 1) != 1) last = '\n';
  std::string buf = line + "\n";
  if (last != '\n') {  // back to just after the last newline (or the start of the file)
    const std::string text = read_file(path);
    const size_t nl = text.rfind('\n');
    const size_t start = nl == std::string::npos ? 0 : nl + 1;
    if (nlohmann::json::accept(std::string_view(text).substr(start))) {
      buf = "\n" + buf;
    } else {
      const off_t end = static_cast<off_t>(start);
      if (::ftruncate(fd, end) == 0) before = end;
      if (text.find_first_not_of(" \t\r", start) != std::string::npos)
        log::warn("io", "{}: cut off a last line a write left unfinished ({} bytes)", path.string(), text.size() - start);
    }
  }
  const char* p = buf.data();
  size_t left = buf.size();
  auto fail = [&](int error) {
    if (before >= 0 && ::ftruncate(fd, before) != 0) {}  // best effort: leave no partial line
    ::close(fd);
    throw_write_error(path, error);
  };
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fdatasync(fd) != 0 && errno != EINVAL) fail(errno);
  if (::close(fd) != 0) throw_write_error(path, errno);
}

std::string read_file(const fs::path& path) {
  require_regular_file(path);  // a FIFO would block in the open below, a folder read as ""
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace rpe
