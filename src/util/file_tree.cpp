// remove_tree through nftw(3) + remove(3), children before their folder; replace_folder
// through renameat2(2); staging folders named by the writer's pid, checked with kill(2).
#include "util/file_tree.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {
thread_local std::string g_failed;  // the entry nftw's callback could not remove
thread_local int g_errno = 0;

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  if (std::remove(path) == 0 || errno == ENOENT) return 0;  // ENOENT: someone else removed it first
  g_failed = path;
  g_errno = errno;
  return 1;  // stops the walk
}
}  // namespace

void remove_tree(const std::filesystem::path& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw UserError("cannot remove " + path.string() + ": " + std::strerror(errno));
  }
  g_failed.clear();
  // FTW_DEPTH: a folder after its contents; FTW_PHYS: symlinks are removed, not followed.
  const int rc = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (rc == 0) return;
  if (!g_failed.empty()) throw UserError("cannot remove " + g_failed + ": " + std::strerror(g_errno));
  throw UserError("cannot remove " + path.string() + ": " + std::strerror(errno));
}

namespace {
void rename_or_throw(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw UserError("cannot rename " + from.string() + " to " + to.string() + ": " + std::strerror(errno));
}

}  // namespace

void fsync_folder(const std::filesystem::path& folder) {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void replace_folder(const std::filesystem::path& staged, const std::filesystem::path& target) {
  struct stat st;
  if (::lstat(staged.c_str(), &st) != 0)
    throw UserError("cannot replace " + target.string() + " with " + staged.string() + ": " + std::strerror(errno));
  if (::lstat(target.c_str(), &st) != 0) {
    rename_or_throw(staged, target);  // nothing to replace
  } else if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    remove_tree(staged);  // now holds the replaced folder
  } else if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {  // no exchange here
    const std::filesystem::path old = staged.string() + ".replaced";
    rename_or_throw(target, old);
    rename_or_throw(staged, target);
    remove_tree(old);
  } else {
    throw UserError("cannot replace " + target.string() + " with " + staged.string() + ": " + std::strerror(errno));
  }
  fsync_folder(target.parent_path());
}


namespace {
// Staging folders of writers whose process is gone (killed while writing: <name>.tmp-<pid>, a
// BERT-sized model each): removed. A live process's are left alone (two processes writing the
// same folder, e.g. a rerun beside a stuck one). <name>.tmp-<pid>.replaced is the previous folder
// moved aside by the fallback swap (file systems without an exchange): if the kill came before
// the new folder was moved in, it is the only copy there, so it is put back, not removed.
void remove_dead_staging(const fs::path& dir) {
  const std::string prefix = dir.filename().string() + ".tmp-";
  auto dead_pid = [&](std::string name) {
    if (!name.starts_with(prefix)) return false;
    if (name.ends_with(".replaced")) name.resize(name.size() - 9);
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.size() > 9 || !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    return ::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH;
  };
  std::error_code ec;
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  std::vector<fs::path> dead;
  for (const auto& e : fs::directory_iterator(parent, ec))
    if (dead_pid(e.path().filename().string())) dead.push_back(e.path());
  for (const auto& path : dead) {
    if (path.string().ends_with(".replaced") && !fs::exists(dir, ec)) {
      log::warn("files", "{}: restored from {}, left by a writer that was killed", dir.string(), path.string());
      fs::rename(path, dir, ec);
      if (!ec) continue;
    }
    remove_tree(path);
  }
}
}  // namespace

fs::path make_staging_folder(const fs::path& target) {
  const fs::path dir = folder_path(target);
  const fs::path tmp = dir.parent_path() / (dir.filename().string() + ".tmp-" + std::to_string(::getpid()));
  remove_dead_staging(dir);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) throw UserError("cannot create " + tmp.string() + ": " + ec.message());
  return tmp;
}

bool path_inside(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  const fs::path rel = fs::weakly_canonical(fs::absolute(inner), ec)
                           .lexically_relative(fs::weakly_canonical(fs::absolute(outer), ec));
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace rpe
