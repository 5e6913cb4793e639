// "Verified once": a file read whole to check its checksum leaves a small stamp (its size,
// mtime and checksum), and later checks only stat() it while the stamp matches. Shards use it
// (~11 GB read at every start on every rank otherwise), and so do the text files shards were
// prepared from when they come back moved or touched (re-copied to a node's scratch disk).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>

namespace rpe {

struct StampedCheck {
  std::filesystem::path file;   // what is read
  std::filesystem::path stamp;  // "<size> <mtime_ns> <checksum>\n" once `file` matched
  uint64_t checksum = 0;
  std::function<void()> verify;  // reads `file`: UserError when it does not match `checksum`
  // Called when another process holds the lock (verifying `file`) and this one waits for it;
  // unset: an info line "waiting for another process verifying <file>" says so.
  std::function<void()> on_wait = {};
};

// Runs c.verify unless c.stamp says this very file (size, mtime) matched c.checksum; then
// stamps it. Where c.stamp's folder takes no files (a read-only dataset folder), the stamp goes
// to the cache folder (cache_dir.h), named by the file's absolute path. A file whose stamp is
// stale on many ranks at once is verified by one process at a time under a lock beside the stamp
// (or beside its cache-folder copy); the ones that waited find the stamp and skip: 64 ranks read
// it once, not 64 times at once. force: verify whatever the stamps say (then stamp).
void verify_once(const StampedCheck& c, bool force = false);

}  // namespace rpe
