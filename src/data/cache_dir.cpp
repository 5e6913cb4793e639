// See cache_dir.h.
#include "data/cache_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <system_error>

#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool writable_folder(const fs::path& dir, bool create) {
  std::error_code ec;
  if (create) fs::create_directories(dir, ec);
  return fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK | X_OK) == 0;
}
}  // namespace

fs::path fallback_cache_dir(bool create) {
  if (const std::string own = env("RPE_TRAIN_CACHE_DIR"); !own.empty()) {
    if (writable_folder(own, create)) return own;
    if (!create) return {};
    throw UserError("RPE_TRAIN_CACHE_DIR=" + own + ": not a folder this process can create and write");
  }
  fs::path dir;
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) dir = fs::path(xdg) / "rpe-train";
  else if (const std::string home = env("HOME"); !home.empty()) dir = fs::path(home) / ".cache" / "rpe-train";
  if (!dir.empty() && writable_folder(dir, create)) return dir;
  std::error_code ec;
  dir = fs::temp_directory_path(ec) / ("rpe-train-" + std::to_string(::getuid()));
  if (ec) return {};
  if (create) ::mkdir(dir.c_str(), 0700);
  // A shared temp folder: only a folder of this user's own, not a link another user put there,
  // and one nobody else can write into (no planted links at its temp or lock file names).
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) return {};
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) return {};
  return ::access(dir.c_str(), W_OK | X_OK) == 0 ? dir : fs::path();
}

}  // namespace rpe
