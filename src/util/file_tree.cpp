// remove_tree through nftw(3) + remove(3), children before their folder; replace_folder
// through renameat2(2).
#include "util/file_tree.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "util/errors.h"

namespace rpe {

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

}  // namespace rpe
