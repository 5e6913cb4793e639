// Where a start keeps what it derives from a prepared shard folder (the sample index, the
// ".verified" stamps) when it cannot write them beside the shards: a dataset folder shared
// read-only (another user's, a read-only mount, a container volume mounted :ro). Without such a
// place, every start on every rank would rebuild the index into its own heap (8 bytes per
// sequence for the whole run) and verify every shard again (the whole corpus read).
//   $RPE_TRAIN_CACHE_DIR, else $XDG_CACHE_HOME/rpe-train, else $HOME/.cache/rpe-train, else
//   <temp>/rpe-train-<uid>; created on first use. Empty when none can be created.
// Files there are named by content keys (the manifest's checksum, a shard's path), so shard
// folders and jobs can share one cache folder.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace rpe {

inline std::filesystem::path fallback_cache_dir() {
  namespace fs = std::filesystem;
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  fs::path dir;
  if (const std::string own = env("RPE_TRAIN_CACHE_DIR"); !own.empty()) dir = own;
  else if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) dir = fs::path(xdg) / "rpe-train";
  else if (const std::string home = env("HOME"); !home.empty()) dir = fs::path(home) / ".cache" / "rpe-train";
  std::error_code ec;
  if (dir.empty() || (fs::create_directories(dir, ec), !fs::is_directory(dir, ec))) {
    dir = fs::temp_directory_path(ec) / ("rpe-train-" + std::to_string(::getuid()));
    if (ec) return {};
    ::mkdir(dir.c_str(), 0700);
    // A shared temp folder: only a folder of this user's own, not a link another user put there.
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) return {};
  }
  return dir;
}

}  // namespace rpe
