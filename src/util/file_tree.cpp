// remove_tree through nftw(3) + remove(3), children before their folder.
#include "util/file_tree.h"

#include <ftw.h>
#include <sys/stat.h>

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
  if (std::remove(path) == 0) return 0;
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

}  // namespace rpe
